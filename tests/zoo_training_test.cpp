// Every model of the zoo learns: a tiny configuration trains for a few steps
// on fresh batches of its synthetic data set, and the mean loss of the last
// steps falls well below that of the first ones.
#include <gtest/gtest.h>

#include <numeric>

#include "memfit/builder.h"
#include "test_util.h"
#include "train/data_source.h"
#include "train/training_program.h"

namespace memfit {
namespace {

struct Case {
  ModelOptions options;
  OptimizerConfig optimizer;
  int steps = 20;
  float ratio = 0.8f;  // last losses / first losses must be below this
};

OptimizerConfig sgd(float lr) {
  OptimizerConfig o;
  o.lr = lr;
  return o;
}

OptimizerConfig adamw(float lr) {
  OptimizerConfig o;
  o.kind = OptimizerConfig::Kind::adamw;
  o.lr = lr;
  return o;
}

float mean(const std::vector<float>& v, size_t begin, size_t end) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(begin),
                         v.begin() + static_cast<std::ptrdiff_t>(end), 0.0f) /
         static_cast<float>(end - begin);
}

void expect_learns(const Case& c) {
  const ModelOptions& o = c.options;
  StepSpec spec;
  spec.model = o;
  spec.optimizer = c.optimizer;
  spec.threads = 2;
  auto program = TrainingProgram::create(spec, o.batch);
  ASSERT_TRUE(program.is_ok()) << program.message();
  auto data = synthetic_source(testing::data_kind(o.name), (*program)->model(), c.steps * o.batch, o.batch, 9);
  ASSERT_TRUE(data.is_ok()) << data.message();
  Batch batch = Batch::for_model((*program)->model());
  StateStore state;
  (*program)->init_state(state, 3);
  ASSERT_TRUE((*program)->load_state(state).is_ok());
  StepCounters counters;
  std::vector<float> losses;
  std::vector<int64_t> examples(static_cast<size_t>(o.batch));
  for (int step = 0; step < c.steps; ++step) {
    std::iota(examples.begin(), examples.end(), step * o.batch);
    ASSERT_TRUE((*data)->fill(false, examples, batch).is_ok());
    auto loss = (*program)->micro_step(batch.feeds(), 3, 1.0f, counters);
    ASSERT_TRUE(loss.is_ok()) << loss.message();
    losses.push_back(*loss);
  }
  const size_t k = 5;
  const float first = mean(losses, 0, k), last = mean(losses, losses.size() - k, losses.size());
  std::string all;
  for (float loss : losses) all += " " + std::to_string(loss);
  EXPECT_LT(last, c.ratio * first) << o.name << ": first " << first << ", last " << last
                                   << "; losses:" << all;
}

void PrintTo(const Case& c, std::ostream* os) { *os << c.options.name; }

class ZooTraining : public ::testing::TestWithParam<Case> {};

TEST_P(ZooTraining, LossFalls) { expect_learns(GetParam()); }

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return testing::model_test_name(info.param.options);
}

// Tiny sizes keep each case within a few seconds on two cores.
INSTANTIATE_TEST_SUITE_P(
    Tiny, ZooTraining,
    ::testing::Values(
        Case{{.name = "lenet", .batch = 16}, sgd(0.02f)},
        Case{{.name = "mlp", .batch = 16}, sgd(0.05f)},
        Case{{.name = "resnet18", .batch = 8, .image_size = 32, .classes = 10, .width = 8},
             adamw(0.003f)},
        Case{{.name = "resnet-cifar", .batch = 8, .image_size = 16, .depth = 11, .width = 8},
             adamw(0.003f)},
        // Without batch norm, vgg16 needs some 25 steps before its loss moves.
        Case{{.name = "vgg16", .batch = 16, .image_size = 32, .classes = 4, .width = 8},
             adamw(0.0005f), 40, 0.85f},
        Case{{.name = "lstm-lm", .batch = 8, .depth = 2, .width = 32, .seq_len = 8, .vocab = 16},
             adamw(0.01f), 30},
        Case{{.name = "seq2seq", .batch = 8, .depth = 1, .width = 32, .seq_len = 6, .vocab = 16},
             adamw(0.01f), 30},
        Case{{.name = "gpt", .batch = 4, .depth = 2, .width = 32, .seq_len = 8, .vocab = 16},
             adamw(0.01f), 40},
        Case{{.name = "transformer", .batch = 4, .depth = 1, .width = 32, .seq_len = 6,
              .vocab = 16},
             adamw(0.01f), 30},
        Case{{.name = "unet3d", .batch = 1, .classes = 3, .width = 4, .volume = 16},
             adamw(0.01f), 20}),
    case_name);

}  // namespace
}  // namespace memfit
