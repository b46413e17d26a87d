// Byte counts as people write and read them (--budget 1.5GiB, "3.21 MiB").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "memfit/status.h"

namespace memfit {

// A byte count: a whole or decimal number, optionally followed by a unit: B,
// KB, MB, GB (powers of 1000) or KiB, MiB, GiB (powers of 1024), e.g. 1.5GiB.
// Fractions of a byte are dropped. Errors: empty, negative, not a number, an
// unknown unit, or more than fits in size_t.
Result<size_t> parse_bytes(std::string_view text);

// "3.21 MiB": bytes in the largest binary unit that keeps the number >= 1.
std::string human_bytes(size_t bytes);

}  // namespace memfit
