// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011). A draw is a
// pure function of (seed, step, stream key, element index): no generator state
// exists, so a node recomputed later in the step draws the same bits.
#pragma once

#include <array>
#include <cstdint>

// The cuda backend's dropout kernel (nvcc, --expt-relaxed-constexpr) draws
// with these very functions: the same mask bits on every backend.
#if defined(__CUDACC__)
#define MEMFIT_HOST_DEVICE __host__ __device__
#else
#define MEMFIT_HOST_DEVICE
#endif

namespace memfit {

// Philox4x32-10's round multipliers and key increments (Weyl sequence).
inline constexpr uint32_t kPhiloxMul0 = 0xD2511F53u, kPhiloxMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u, kPhiloxWeyl1 = 0xBB67AE85u;

MEMFIT_HOST_DEVICE inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter,
                                                             std::array<uint32_t, 2> key) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxMul0) * counter[0];
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxMul1) * counter[2];
    counter = {static_cast<uint32_t>(p1 >> 32) ^ counter[1] ^ key[0], static_cast<uint32_t>(p1),
               static_cast<uint32_t>(p0 >> 32) ^ counter[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kPhiloxWeyl0;
    key[1] += kPhiloxWeyl1;
  }
  return counter;
}

// The Philox key of stream `key` at `step` of the run `seed`; a block's
// counter is (block low, block high, step low, key low).
MEMFIT_HOST_DEVICE inline std::array<uint32_t, 2> philox_key(uint64_t seed, uint64_t step,
                                                             uint64_t key) {
  return {static_cast<uint32_t>(seed) ^ static_cast<uint32_t>(step >> 32),
          static_cast<uint32_t>(seed >> 32) ^ static_cast<uint32_t>(key >> 32)};
}

// The four 32-bit words of Philox block `block` of stream `key` at `step`
// (random_bits takes word 0; dropout draws four elements per block).
MEMFIT_HOST_DEVICE inline std::array<uint32_t, 4> random_block(uint64_t seed, uint64_t step,
                                                               uint64_t key, uint64_t block) {
  const std::array<uint32_t, 4> counter = {static_cast<uint32_t>(block),
                                           static_cast<uint32_t>(block >> 32),
                                           static_cast<uint32_t>(step), static_cast<uint32_t>(key)};
  return philox4x32(counter, philox_key(seed, step, key));
}

// 32 random bits for element `index` of stream `key` at `step` of the run `seed`.
MEMFIT_HOST_DEVICE inline uint32_t random_bits(uint64_t seed, uint64_t step, uint64_t key,
                                               uint64_t index) {
  return random_block(seed, step, key, index)[0];
}

// A word's top 24 bits as a uniform float in [0, 1).
MEMFIT_HOST_DEVICE inline float uniform_of(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

// A uniform float in [0, 1) with 24 random bits.
MEMFIT_HOST_DEVICE inline float random_uniform(uint64_t seed, uint64_t step, uint64_t key,
                                               uint64_t index) {
  return uniform_of(random_bits(seed, step, key, index));
}

// Whether a 32-bit draw keeps its element under dropout with probability p:
// its top 24 bits, as a uniform float in [0, 1), are at least p.
MEMFIT_HOST_DEVICE inline bool dropout_keeps_word(uint32_t word, float p) {
  return uniform_of(word) >= p;
}

// Dropout keeps element `index` when its uniform draw, word index % 4 of
// block index / 4, is at least p.
MEMFIT_HOST_DEVICE inline bool dropout_keeps(uint64_t seed, uint64_t step, uint64_t key,
                                             uint64_t index, float p) {
  return dropout_keeps_word(random_block(seed, step, key, index / 4)[index % 4], p);
}

}  // namespace memfit
