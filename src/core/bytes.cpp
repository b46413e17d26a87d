#include "memfit/bytes.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <limits>

namespace memfit {

Result<size_t> parse_bytes(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  const std::string example = "a number of bytes, such as 4096, 512MiB or 1.5GB";
  if (text.empty()) return Status::error("the byte count is empty; give " + example);
  if (text.front() == '-') return Status::error(quoted + " is negative; give " + example);
  auto is_digit = [&](size_t i) {
    return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
  };
  // Digits are collected exactly; 128 bits hold any size_t times any unit.
  using Wide = unsigned __int128;
  const Wide too_large = Wide(std::numeric_limits<size_t>::max()) + 1;
  size_t i = 0;
  Wide whole = 0;
  for (; is_digit(i); ++i) whole = std::min(whole * 10 + Wide(text[i] - '0'), too_large);
  if (i == 0) return Status::error(quoted + " is not a number; give " + example);
  // Fraction digits past the 18th weigh less than 1e-18 of a unit: less than a byte.
  Wide fraction = 0, fraction_scale = 1;
  if (i < text.size() && text[i] == '.') {
    if (!is_digit(++i)) return Status::error(quoted + " has no digits after the point");
    for (int kept = 0; is_digit(i); ++i, ++kept) {
      if (kept < 18) {
        fraction = fraction * 10 + Wide(text[i] - '0');
        fraction_scale *= 10;
      }
    }
  }
  while (i < text.size() && text[i] == ' ') ++i;
  const std::string_view unit = text.substr(i);
  struct Unit {
    std::string_view name;
    size_t bytes;
  };
  constexpr Unit kUnits[] = {{"", 1},
                             {"B", 1},
                             {"KB", 1000},
                             {"MB", 1'000'000},
                             {"GB", 1'000'000'000},
                             {"TB", 1'000'000'000'000},
                             {"PB", 1'000'000'000'000'000},
                             {"KiB", size_t{1} << 10},
                             {"MiB", size_t{1} << 20},
                             {"GiB", size_t{1} << 30},
                             {"TiB", size_t{1} << 40},
                             {"PiB", size_t{1} << 50}};
  const auto* found = std::find_if(std::begin(kUnits), std::end(kUnits),
                                   [&](const Unit& u) { return u.name == unit; });
  if (found == std::end(kUnits)) {
    return Status::error(quoted + " has an unknown unit '" + std::string(unit) +
                         "'; use B, KB, MB, GB, TB, PB (powers of 1000) or KiB, MiB, GiB, TiB, PiB "
                         "(powers of 1024)");
  }
  if (found->bytes == 1 && fraction != 0) {
    return Status::error(quoted + " is a fraction of a byte; give whole bytes or a unit, such as " +
                         std::string(text.substr(0, i)) + "GiB");
  }
  const Wide bytes = whole * found->bytes + fraction * found->bytes / fraction_scale;
  if (bytes >= too_large) {
    return Status::error(quoted + " is more bytes than this machine can address");
  }
  return static_cast<size_t>(bytes);
}

std::string human_bytes(size_t bytes) {
  constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", value, kUnits[unit]);
  return text;
}

}  // namespace memfit
