// The step pipeline (src/passes/step_pipeline.h): its passes in order for
// each setting, and `--dump-graphs`: every graph it writes reads back with
// parse_graph and passes the verifier, and the last one is the graph that
// runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "onnx/model_source.h"
#include "ops/typed_graph.h"
#include "passes/step_pipeline.h"
#include "step/compile_step.h"
#include "test_util.h"

namespace memfit {
namespace {

using Names = std::vector<std::string_view>;

TEST(StepPipeline, ListsThePassesInOrder) {
  StepPipelineOptions o;
  o.recompute = Recompute::sqrt;
  o.swap = Swap::budget;
  const StepPipeline plain = step_pipeline(o);
  EXPECT_EQ(plain.lowering.names(),
            (Names{"fuse_forward_ops", "autodiff", "fuse_gradient_sums", "assign_layouts"}));
  EXPECT_EQ(plain.memory.names(), (Names{"recompute", "swap", "schedule"}));

  o.ranks = 2;
  EXPECT_EQ(step_pipeline(o).memory.names(), (Names{"recompute", "swap", "all_reduce", "schedule"}));
  o.zero = true;
  EXPECT_EQ(step_pipeline(o).memory.names(), (Names{"recompute", "swap", "zero_shard", "schedule"}));
  // The micro-batches that only accumulate do not communicate.
  o.mode = UpdateMode::accumulate;
  EXPECT_EQ(step_pipeline(o).memory.names(), (Names{"recompute", "swap", "schedule"}));

  StepPipelineOptions a;
  a.automatic = true;
  a.fuse_forward = a.fuse_gradient_sums = a.blocked_layouts = false;
  a.schedule = false;
  const StepPipeline automatic = step_pipeline(a);
  EXPECT_EQ(automatic.lowering.names(), (Names{"autodiff"}));
  EXPECT_EQ(automatic.memory.names(), (Names{"auto"}));

  EXPECT_EQ(forward_pipeline(true).names(), (Names{"dead_nodes", "assign_layouts"}));
  EXPECT_EQ(forward_pipeline(false).names(), (Names{"dead_nodes"}));
}

// Evaluation's graph: the model's forward graph with its loss as a second
// output, without dead nodes, in the backend's layouts, as the passes give
// it called one by one.
TEST(StepPipeline, ForwardGraphIsTheForwardPasses) {
  auto backend = make_backend(BackendKind::cpu, 1);
  ASSERT_TRUE(backend.is_ok()) << backend.message();
  const StepSpec spec = testing::test_spec({.name = "resnet-cifar", .batch = 4, .image_size = 8,
                                            .depth = 11});
  Model model;
  auto graph = build_forward_graph(spec, 3, **backend, &model);
  ASSERT_TRUE(graph.is_ok()) << graph.message();
  ModelOptions at3 = spec.model;
  at3.batch = 3;
  const Model expected_model = make_model(at3, false).value();
  Graph with_loss = expected_model.graph;
  with_loss.mark_output(expected_model.loss);
  const Graph expected = assign_layouts(remove_dead_nodes(with_loss), **backend).value();
  EXPECT_EQ(graph->outputs().size(), 2u);  // the logits and the loss
  EXPECT_EQ(print_graph(*graph), print_graph(expected));
  EXPECT_EQ(print_graph(model.graph), print_graph(expected_model.graph));
  EXPECT_GT(graph->num_nodes(), 0u);
}

// The dumps of `dir`, by graph name, in the order written.
std::map<std::string, std::vector<std::filesystem::path>> dumps_in(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::map<std::string, std::vector<std::filesystem::path>> by_graph;
  for (const auto& f : files) {
    const std::string name = f.filename().string();
    by_graph[name.substr(0, name.find('-'))].push_back(f);
  }
  return by_graph;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pass name of a dump: <graph>-<NN>-<pass>.ir.
std::string pass_of(const std::filesystem::path& path) {
  const std::string stem = path.stem().string();
  return stem.substr(stem.find('-', stem.find('-') + 1) + 1);
}

TEST(StepPipeline, DumpsReadBackVerifiedAndEndAtTheGraphThatRuns) {
  testing::ScratchDir scratch;
  // Every kind of pass changes this step: lenet fuses and takes blocked
  // layouts, sqrt recomputes, swap (no budget) swaps every candidate, two
  // ranks sum their gradients, two micro-batches give a second graph.
  StepSpec spec = testing::test_spec({.name = "lenet", .batch = 4}, 2);
  spec.recompute = Recompute::sqrt;
  spec.swap = Swap::budget;
  spec.ranks = 2;
  const std::string dir = scratch.file("dumps");
  // An earlier plan's dump is replaced; other files are left alone.
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/step-99-stale.ir") << "x";
  std::ofstream(dir + "/notes.txt") << "x";
  auto step = compile_step(spec, StepBuild{.accumulate_only = true, .dump_graphs = dir});
  ASSERT_TRUE(step.is_ok()) << step.message();
  EXPECT_FALSE(std::filesystem::exists(dir + "/step-99-stale.ir"));
  ASSERT_TRUE(std::filesystem::remove(dir + "/notes.txt"));

  const auto by_graph = dumps_in(dir);
  ASSERT_EQ(by_graph.size(), 2u);
  const Names order{"model",          "fuse_forward_ops", "autodiff", "fuse_gradient_sums",
                    "assign_layouts", "recompute",        "swap",     "all_reduce",
                    "schedule"};
  for (const auto& [graph, files] : by_graph) {
    SCOPED_TRACE(graph);
    ASSERT_GE(files.size(), 3u);
    std::vector<std::string> passes;
    for (const auto& f : files) {
      SCOPED_TRACE(f.filename().string());
      const std::string text = read_text(f);
      auto parsed = parse_graph(text);
      ASSERT_TRUE(parsed.is_ok()) << parsed.message();
      EXPECT_TRUE(verify_graph(*parsed).is_ok()) << verify_graph(*parsed).message();
      EXPECT_EQ(print_graph(*parsed), text);
      passes.push_back(pass_of(f));
    }
    // In the pipeline's order, starting at the model.
    EXPECT_EQ(passes.front(), "model");
    size_t at = 0;
    for (const std::string& pass : passes) {
      while (at < order.size() && order[at] != pass) ++at;
      EXPECT_LT(at, order.size()) << pass << " out of order";
    }
    for (std::string_view pass : {"fuse_forward_ops", "autodiff", "assign_layouts", "swap"}) {
      EXPECT_NE(std::find(passes.begin(), passes.end(), pass), passes.end()) << pass;
    }
    const bool applies = graph == "step";
    EXPECT_EQ(std::find(passes.begin(), passes.end(), "all_reduce") != passes.end(), applies);
    const Executable& runs = applies ? *step->apply : *step->accumulate_only;
    EXPECT_EQ(read_text(files.back()), print_graph(runs.graph()));
  }
}

TEST(StepPipeline, DumpDirectoryMustBeADirectory) {
  testing::ScratchDir scratch;
  const std::string file = scratch.file("taken");
  std::ofstream(file) << "x";
  auto step = compile_step(testing::test_spec({.name = "mlp", .batch = 2}),
                           StepBuild{.dump_graphs = file});
  ASSERT_FALSE(step.is_ok());
  EXPECT_NE(step.message().find("--dump-graphs " + file + ": not a directory"), std::string::npos)
      << step.message();
}

// build_step_graph runs the lowering passes but gradient-sum fusion and layouts.
TEST(StepPipeline, BuildStepGraphIsTheLoweringPasses) {
  Model model;
  auto fused = build_step_graph({.name = "lenet", .batch = 2}, 1, testing::sgd(), UpdateMode::apply,
                                &model, true);
  ASSERT_TRUE(fused.is_ok()) << fused.message();
  auto plain = build_step_graph({.name = "lenet", .batch = 2}, 1, testing::sgd(), UpdateMode::apply,
                                nullptr, false);
  ASSERT_TRUE(plain.is_ok()) << plain.message();
  // Fusion drops the products' outputs: fewer nodes; the model keeps the
  // fused forward graph, and its values follow the renumbering into it.
  EXPECT_LT(fused->num_nodes(), plain->num_nodes());
  EXPECT_LT(model.graph.num_nodes(), fused->num_nodes());
  EXPECT_EQ(model.graph.value(model.logits).type.shape, (Shape{2, 10}));
  for (ValueId v : {model.loss, model.logits, model.labels}) {
    EXPECT_TRUE(fused->find_value(model.graph.value(v).name).valid()) << model.graph.value(v).name;
  }
}

}  // namespace
}  // namespace memfit
