// Helpers shared by the tests.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/op_table.h"
#include "runtime/executor.h"

namespace memfit::testing {

// Deterministic normal(0, 1) numbers from a seed.
std::vector<float> random_normal(size_t count, uint64_t seed);

// The raw bytes of a tensor: f32 or i32 elements stored as 32-bit words.
using Words = std::vector<uint32_t>;

// Input data for an op example, filled as its InputInit says.
std::vector<Words> example_inputs(const OpExample& example, uint64_t seed);

// A graph with one node of `op` whose inputs are graph inputs named in0, in1, ...
// and whose outputs are all graph outputs.
Graph single_node_graph(OpKind op, const OpExample& example);

// Feeds for a graph whose inputs are in0, in1, ...
Feeds feeds_for(const std::vector<Words>& inputs);

// Runs `graph` once and returns its outputs in order (f32 data).
std::vector<std::vector<float>> run_outputs(Executable& exe, const std::vector<Words>& inputs,
                                            const StepContext& step = {});

inline float as_float(uint32_t word) {
  float f;
  static_assert(sizeof f == sizeof word);
  __builtin_memcpy(&f, &word, sizeof f);
  return f;
}
inline uint32_t as_word(float f) {
  uint32_t w;
  __builtin_memcpy(&w, &f, sizeof f);
  return w;
}

}  // namespace memfit::testing
