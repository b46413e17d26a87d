// FNV-1a (Fowler, Noll, Vo), 64-bit: a fast hash of bytes, for names and for
// what ranks compare; not for anything an adversary chooses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace memfit {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;

// FNV-1a over `bytes` bytes at `data`, continuing from `h`.
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnv1aOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline uint64_t fnv1a(std::string_view text, uint64_t h = kFnv1aOffset) {
  return fnv1a(text.data(), text.size(), h);
}

}  // namespace memfit
