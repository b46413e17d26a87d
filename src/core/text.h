// Small text helpers shared by the reports: printf-style formatting into a
// std::string, and JSON string literals.
#pragma once

#include <string>
#include <string_view>

namespace memfit {

[[gnu::format(printf, 1, 2)]] std::string format(const char* fmt, ...);

// `text` as a JSON string literal, quotes included.
std::string json_string(std::string_view text);

}  // namespace memfit
