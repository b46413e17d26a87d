// Helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "ops/op_table.h"
#include "passes/recompute_strategy.h"
#include "runtime/executor.h"
#include "train/training_program.h"

namespace memfit::testing {

// A fresh directory for one test, removed when the test ends. The pid keeps
// tests that CTest runs in parallel processes apart.
class ScratchDir {
 public:
  ScratchDir() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("memfit_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" +
             info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Every op of the list, and its name as a test-parameter name.
std::vector<OpKind> all_ops();
std::string op_test_name(const ::testing::TestParamInfo<OpKind>& info);

// Deterministic normal(0, 1) numbers from a seed.
std::vector<float> random_normal(size_t count, uint64_t seed);

// The raw bytes of a tensor: f32 or i32 elements stored as 32-bit words.
using Words = std::vector<uint32_t>;

// Input data for an op example, filled as its InputInit says.
std::vector<Words> example_inputs(const OpExample& example, uint64_t seed);

// A graph with one node of `op` whose inputs are graph inputs named in0, in1, ...
// and whose outputs are all graph outputs.
Graph single_node_graph(OpKind op, const OpExample& example);

// x f32[2,3,4,4] reordered into the cpu backend's blocked layout c8 (node
// to_c8) and back to plain (node to_plain).
Graph blocked_round_trip_graph();

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

// The kind of data zoo model `model` reads (a test failure if unknown).
DataKind data_kind(const std::string& model);

// Runs `accumulate` micro-batches of `program` on its model's synthetic data
// (micro-batch m holds examples m B .. m B + B - 1, data seed 11, step seed
// 3) and returns their losses; failures are test failures.
std::vector<float> run_synthetic_micro_batches(TrainingProgram& program, int64_t accumulate,
                                               StateStore& state);

// SGD with momentum and learning rate 0.1. From zero velocity, after one step
// each `.momentum` holds exactly the parameter's gradient (v' = 0.9 * 0 + g),
// so comparing the state compares the gradients too.
OptimizerConfig sgd();

// The step the tests run unless they say otherwise: `model`, sgd(), the cpu
// backend.
StepSpec test_spec(const ModelOptions& model, int64_t accumulate = 1);

// What one optimizer step gave.
struct StepRun {
  std::vector<float> losses;
  StateStore state;
  RecomputeSummary recompute;
  SwapSummary swap;
  size_t arena = 0;
  size_t lower_bound = 0;  // the plan's most live bytes at one step
  size_t host = 0;
};

// One optimizer step of `program` (`accumulate` micro-batches, as
// run_synthetic_micro_batches runs them) from parameters initialized with
// seed 7; with `verify`, the step graph and its plan are verified first
// (failures are test failures).
StepRun run_step(TrainingProgram& program, int64_t accumulate, bool verify);

// One verified step (run_step) of `spec` (evaluation batch 2), poison mode as
// given; failures are test failures.
StepRun run_verified_step(const StepSpec& spec, bool poison = true);
// The same, but a program that cannot be made (its plan over spec.budget, say)
// is the error returned, not a test failure.
Result<StepRun> try_verified_step(const StepSpec& spec, bool poison = true);

// The bytes after "the smallest arena this plan reaches is " in a budget
// error (plan_training_step's); 0 when it is not there.
size_t smallest_arena_in(const std::string& message);

// n tanh layers over a parameter %w of `width` floats, summed into the loss,
// with the backward pass: every tanh output (%t1 .. %tn) is a candidate, and
// every gradient node reads its layer's output.
Graph tanh_chain(int n, int width);

// Expects the same losses and state (parameters, optimizer state, running
// statistics) bit for bit, and finite losses.
void expect_identical_steps(const StepRun& expected, const StepRun& actual,
                            const std::string& what);

// Measures a graph by the arena bytes of its plan on `backend` (which must
// outlive the function returned).
ArenaOf backend_arena_of(const Backend& backend);

// A model's name as gtest takes it in a test name ('-' becomes '_').
std::string model_test_name(const ModelOptions& model);
// The same for a parameter that is the model.
std::string model_param_name(const ::testing::TestParamInfo<ModelOptions>& info);

// Every model of the zoo at a tiny size (the swap tests' cases).
std::vector<ModelOptions> tiny_zoo();

// A model and the micro-batches of its optimizer step, as a test parameter.
struct ModelCase {
  ModelOptions model;
  int64_t accumulate = 1;
};
// How gtest prints a case in test listings.
void PrintTo(const ModelCase& c, std::ostream* os);

// A recompute strategy's step on a model, as a test parameter.
struct StepCase {
  ModelOptions model;
  int64_t accumulate = 1;
  Recompute recompute = Recompute::optimal;
};
void PrintTo(const StepCase& c, std::ostream* os);

}  // namespace memfit::testing

namespace memfit {
// How gtest prints a model parameter: its name and batch (found by argument-
// dependent lookup; without it gtest prints the object's bytes).
void PrintTo(const ModelOptions& model, std::ostream* os);
}  // namespace memfit
