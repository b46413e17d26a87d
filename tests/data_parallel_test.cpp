// Data parallelism: the all-reduce pass (src/passes/all_reduce.h) and
// training on N ranks as N threads (make_thread_communicators) against one
// process at N times the batch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>

#include "memfit/dist.h"
#include "memfit/train.h"
#include "ops/op_table.h"
#include "ops/typed_graph.h"
#include "passes/all_reduce.h"
#include "step/compile_step.h"
#include "test_util.h"
#include "train/checkpoint.h"

namespace memfit {
namespace {

Graph lenet_step() {
  return build_step_graph({.name = "lenet", .batch = 4}, 1, testing::sgd(), UpdateMode::apply,
                          nullptr)
      .value();
}

size_t gradient_bytes(const Graph& g) {
  size_t bytes = 0;
  for (const Node& node : g.nodes()) {
    if (node.op == OpKind::sgd_update) bytes += g.value(node.inputs[1]).bytes();
  }
  return bytes;
}

TEST(AllReducePass, EveryUpdateReadsASumStartedAfterItsGradient) {
  const Graph step = lenet_step();
  for (size_t bucket_bytes : {size_t{0}, size_t{20000}, size_t{1} << 30}) {
    SCOPED_TRACE(bucket_bytes);
    AllReduceSummary summary;
    const Graph g = insert_all_reduce(step, 2, bucket_bytes, &summary).value();
    ASSERT_TRUE(verify_graph(g).is_ok());
    EXPECT_EQ(summary.bytes, gradient_bytes(step));
    std::vector<int32_t> position(g.num_values(), -1);  // of each value's producer
    size_t starts = 0, updates = 0;
    for (size_t n = 0; n < g.num_nodes(); ++n) {
      const Node& node = g.nodes()[n];
      for (ValueId out : node.outputs) position[out.idx()] = static_cast<int32_t>(n);
      if (node.op == OpKind::all_reduce_start) ++starts;
      if (node.op == OpKind::all_reduce_wait) {
        // Its bucket was packed before, after every gradient in it was made.
        const NodeId start = g.value(node.inputs[0]).producer;
        ASSERT_LT(start.idx(), n);
        for (ValueId grad : g.node(start).inputs) EXPECT_LT(position[grad.idx()], start.index);
      }
      if (node.op != OpKind::sgd_update) continue;
      ++updates;
      const NodeId producer = g.value(node.inputs[1]).producer;
      EXPECT_EQ(g.node(producer).op, OpKind::all_reduce_wait) << node.name;
    }
    EXPECT_EQ(starts, summary.buckets);
    if (bucket_bytes == 0) {  // one per node that makes gradients (a weight's and a bias's)
      std::set<int32_t> producers;
      for (const Node& node : step.nodes()) {
        if (node.op == OpKind::sgd_update) producers.insert(step.value(node.inputs[1]).producer.index);
      }
      EXPECT_EQ(summary.buckets, producers.size());
    }
    if (bucket_bytes == size_t{1} << 30) {
      EXPECT_EQ(summary.buckets, 1u);
    }
    if (bucket_bytes == 20000) {
      EXPECT_GT(summary.buckets, 1u);
      EXPECT_LT(summary.buckets, updates);
    }
  }
}

TEST(AllReducePass, BucketsFollowTheBackwardPassAndStartBeforeItEnds) {
  // The last layer's gradients come first: with small buckets the first sum
  // starts while later layers' gradients are still being computed.
  const Graph g = insert_all_reduce(lenet_step(), 4, 1, nullptr).value();
  int32_t first_start = -1, last_gradient = -1;
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.nodes()[n];
    if (node.op == OpKind::all_reduce_start && first_start < 0) first_start = static_cast<int32_t>(n);
    if (node.op == OpKind::conv2d_grad_weight) last_gradient = static_cast<int32_t>(n);
  }
  ASSERT_GE(first_start, 0);
  EXPECT_LT(first_start, last_gradient);
  const auto& attrs = std::get<BucketAttrs>(g.nodes()[static_cast<size_t>(first_start)].attrs);
  EXPECT_EQ(attrs.ranks, 4);
  EXPECT_EQ(attrs.size, attrs.offsets.back());
  EXPECT_DOUBLE_EQ(comm_wire_bytes(OpKind::all_reduce_start, attrs), 2.0 * 3.0 / 4.0 * attrs.size * 4.0);
}

TEST(AllReducePass, RefusesNoRanks) {
  EXPECT_FALSE(insert_all_reduce(lenet_step(), 0, 1000, nullptr).is_ok());
}

TEST(PlanRanks, AddsTheBucketsToTheStepAndScalesTheLoss) {
  StepSpec spec = testing::test_spec({.name = "mlp", .batch = 8});
  const CompiledStep one = compile_step(spec).value();
  spec.ranks = 2;
  spec.bucket_mb = 0.1;
  const CompiledStep two = compile_step(spec).value();
  EXPECT_EQ(one.passes.all_reduce.buckets, 0u);
  EXPECT_GT(two.passes.all_reduce.buckets, 1u);
  EXPECT_EQ(two.passes.all_reduce.bytes, gradient_bytes(one.apply->graph()));
  EXPECT_GE(two.apply->plan().arena_bytes, one.apply->plan().arena_bytes);
  spec.ranks = 0;  // refused
  EXPECT_FALSE(compile_step(spec).is_ok());
}

// `ranks` threads each train `base` at its batch on their rows; rank 0's
// checkpoint and losses.
struct RankRun {
  std::vector<float> losses;
  Checkpoint checkpoint;
};

RankRun train_on_threads(TrainOptions base, int ranks, const std::string& path) {
  auto comms = make_thread_communicators(ranks);
  std::vector<Result<TrainReport>> reports(static_cast<size_t>(ranks), Status::error("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      TrainOptions o = base;
      o.comm = comms[static_cast<size_t>(r)].get();
      o.save_path = path;
      o.check_replicas = true;
      reports[static_cast<size_t>(r)] = train(o, [](const std::string&) {});
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    EXPECT_TRUE(reports[static_cast<size_t>(r)].is_ok())
        << "rank " << r << ": " << reports[static_cast<size_t>(r)].message();
  }
  RankRun run;
  if (!reports[0].is_ok()) return run;
  run.losses = reports[0]->losses;
  // Every rank saw the same (global) losses.
  for (int r = 1; r < ranks; ++r) EXPECT_EQ(reports[static_cast<size_t>(r)]->losses, run.losses);
  run.checkpoint = load_checkpoint(path).value();
  return run;
}

// 20 optimizer steps of 16 examples (`batch` per rank).
TrainOptions small_run(const std::string& model, int64_t batch) {
  TrainOptions o;
  o.step = testing::test_spec({.name = model, .batch = batch, .dropout = false});
  o.step.threads = 1;
  o.step.bucket_mb = 0.05;  // several buckets
  o.synthetic = true;
  o.limit = 20 * 16;
  o.epochs = 1;
  o.schedule = Schedule::constant;
  o.seed = 3;
  return o;
}

// The largest |a - b| / (1 + |b|) over every tensor of two checkpoints.
double largest_difference(const Checkpoint& a, const Checkpoint& b) {
  double worst = 0;
  EXPECT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t t = 0; t < std::min(a.tensors.size(), b.tensors.size()); ++t) {
    EXPECT_EQ(a.tensors[t].name, b.tensors[t].name);
    EXPECT_EQ(a.tensors[t].data.size(), b.tensors[t].data.size());
    for (size_t i = 0; i < std::min(a.tensors[t].data.size(), b.tensors[t].data.size()); ++i) {
      const double x = a.tensors[t].data[i], y = b.tensors[t].data[i];
      worst = std::max(worst, std::abs(x - y) / (1.0 + std::abs(y)));
    }
  }
  return worst;
}

class DataParallel : public ::testing::TestWithParam<const char*> {};

// Float addition is not associative: the ranks' partial gradients summed
// over the ranks round differently from one sum over all rows. After 20 steps
// of SGD with momentum the parameters differ by about 2e-7 relative (mlp and
// lenet); the bound leaves 50 times that.
TEST_P(DataParallel, TwoRanksGiveTheParametersOfOneProcessAtTwiceTheBatch) {
  testing::ScratchDir dir;
  const std::string model = GetParam();
  TrainOptions single = small_run(model, 16);
  single.save_path = dir.file("single.ckpt");
  const TrainReport alone = train(single, [](const std::string&) {}).value();
  const RankRun two = train_on_threads(small_run(model, 8), 2, dir.file("two.ckpt"));
  ASSERT_EQ(two.losses.size(), alone.losses.size());
  for (size_t i = 0; i < alone.losses.size(); ++i) {
    EXPECT_NEAR(two.losses[i], alone.losses[i], 1e-4 * (1 + std::abs(alone.losses[i]))) << i;
  }
  const Checkpoint one = load_checkpoint(single.save_path).value();
  EXPECT_EQ(two.checkpoint.optimizer_step, one.optimizer_step);
  EXPECT_LT(largest_difference(two.checkpoint, one), 1e-5);
  // Not the trivial case: training moved the parameters.
  TrainOptions untrained = small_run(model, 16);
  untrained.limit = 16;  // one step
  untrained.save_path = dir.file("first.ckpt");
  ASSERT_TRUE(train(untrained, [](const std::string&) {}).is_ok());
  EXPECT_GT(largest_difference(load_checkpoint(untrained.save_path).value(), one), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Models, DataParallel, ::testing::Values("mlp", "lenet"));

TEST(DataParallel, ThreeRanksAccumulatingMatchOneProcess) {
  testing::ScratchDir dir;
  TrainOptions single = small_run("mlp", 12);
  single.step.accumulate = 2;
  single.limit = 240;  // 10 steps of 2 x 12
  single.save_path = dir.file("single.ckpt");
  ASSERT_TRUE(train(single, [](const std::string&) {}).is_ok());
  TrainOptions per_rank = small_run("mlp", 4);
  per_rank.step.accumulate = 2;
  per_rank.limit = single.limit;
  const RankRun three = train_on_threads(per_rank, 3, dir.file("three.ckpt"));
  EXPECT_LT(largest_difference(three.checkpoint, load_checkpoint(single.save_path).value()), 1e-4);
}

// ZeRO: the same sums (the thread communicators add in rank order for the
// all-reduce and the reduce-scatter alike) and the same elementwise updates
// give the parameters and the optimizer state of the unsharded run, bit for
// bit; every rank's state is checked equal after every step.
TEST(Zero, ShardedStepsGiveTheUnshardedStepsBitForBit) {
  testing::ScratchDir dir;
  for (const auto kind : {OptimizerConfig::Kind::sgd, OptimizerConfig::Kind::adamw}) {
    for (int ranks : {2, 3}) {
      TrainOptions base = small_run("lenet", 16 / ranks);
      base.limit = 10 * (16 / ranks) * ranks;  // 10 steps
      base.step.optimizer.kind = kind;
      const std::string tag = std::to_string(static_cast<int>(kind)) + "_" + std::to_string(ranks);
      const RankRun plain = train_on_threads(base, ranks, dir.file("none" + tag));
      for (Shard shard : {Shard::optimizer, Shard::gradients}) {
        SCOPED_TRACE(tag + " " + std::string(shard_name(shard)));
        TrainOptions sharded = base;
        sharded.step.shard = shard;
        const RankRun run =
            train_on_threads(sharded, ranks, dir.file(std::string(shard_name(shard)) + tag));
        EXPECT_EQ(run.losses, plain.losses);
        EXPECT_EQ(largest_difference(run.checkpoint, plain.checkpoint), 0.0);
      }
    }
  }
}

TEST(Zero, ShardsTheOptimizerStateOfThePlan) {
  StepSpec spec = testing::test_spec({.name = "lenet", .batch = 8});
  spec.optimizer.kind = OptimizerConfig::Kind::adamw;
  spec.ranks = 4;
  spec.bucket_mb = 0.2;
  const CompiledStep none = compile_step(spec).value();
  spec.shard = Shard::optimizer;
  const CompiledStep sharded = compile_step(spec).value();
  const auto state_bytes = [](const Graph& g) {
    size_t bytes = 0;
    for (const Value& v : g.values()) {
      if (!v.producer.valid() && v.role == Role::optimizer_state) bytes += v.bytes();
    }
    return bytes;
  };
  const size_t all = state_bytes(none.apply->graph());
  const size_t mine = state_bytes(sharded.apply->graph());
  // A quarter, and the padding of each bucket to a multiple of 4 floats.
  EXPECT_GE(mine * 4, all);
  EXPECT_LE(mine * 4, all + 2 * 4 * 4 * sharded.passes.zero.buckets.buckets);
  EXPECT_GT(sharded.passes.zero.buckets.buckets, 1u);
  EXPECT_EQ(sharded.passes.zero.states.size(), 2 * sharded.passes.zero.buckets.buckets);  // adam_m, adam_v
  spec.accumulate = 2;
  EXPECT_FALSE(compile_step(spec).is_ok());  // not with accumulation (yet)
}

// A checkpoint of optimizer-sharded state on 4 ranks, resumed by 2 unsharded
// ranks, continues as a run on 2 ranks all along: within the rounding of the
// other number of ranks (SGD keeps it near 1e-7; AdamW's division by the root
// of its second moment magnifies it for gradients near zero, to 2e-2).
TEST(Zero, ResumesWithOtherRanksAndShards) {
  testing::ScratchDir dir;
  TrainOptions four = small_run("mlp", 4);
  four.epochs = 2;
  four.stop_after = 1;
  four.step.shard = Shard::optimizer;
  train_on_threads(four, 4, dir.file("four.ckpt"));
  TrainOptions unsharded = four;
  unsharded.step.shard = Shard::none;
  train_on_threads(unsharded, 4, dir.file("four_unsharded.ckpt"));
  // The checkpoint holds per-parameter state, the same with or without shards.
  EXPECT_EQ(largest_difference(load_checkpoint(dir.file("four.ckpt")).value(),
                               load_checkpoint(dir.file("four_unsharded.ckpt")).value()),
            0.0);
  TrainOptions two = small_run("mlp", 8);
  two.epochs = 2;
  two.resume_path = dir.file("four.ckpt");
  const RankRun resumed = train_on_threads(two, 2, dir.file("resumed.ckpt"));
  TrainOptions whole = two;
  whole.resume_path.clear();
  const RankRun straight = train_on_threads(whole, 2, dir.file("straight.ckpt"));
  EXPECT_EQ(resumed.checkpoint.optimizer_step, straight.checkpoint.optimizer_step);
  EXPECT_LT(largest_difference(resumed.checkpoint, straight.checkpoint), 1e-5);
}

// Recomputation and swapping change where values live, not what the ranks
// compute: the ranks' parameters are those of the plain data-parallel step.
TEST(DataParallel, TechniquesKeepTheBits) {
  testing::ScratchDir dir;
  TrainOptions plain = small_run("lenet", 8);
  plain.limit = 10 * 16;
  const RankRun base = train_on_threads(plain, 2, dir.file("plain.ckpt"));
  TrainOptions rewritten = plain;
  rewritten.step.recompute = Recompute::sqrt;
  rewritten.step.swap = Swap::tflms;  // every candidate
  rewritten.step.link_gbps = 50;
  const RankRun run = train_on_threads(rewritten, 2, dir.file("rewritten.ckpt"));
  EXPECT_EQ(run.losses, base.losses);
  EXPECT_EQ(largest_difference(run.checkpoint, base.checkpoint), 0.0);
}

TEST(DataParallel, RefusesAStepSetForOtherRanks) {
  auto comms = make_thread_communicators(1);
  TrainOptions o = small_run("mlp", 4);
  o.step.ranks = 2;
  o.comm = comms[0].get();
  const auto report = train(o, [](const std::string&) {});
  ASSERT_FALSE(report.is_ok());
  EXPECT_NE(report.message().find("2 ranks"), std::string::npos) << report.message();
}

}  // namespace
}  // namespace memfit
