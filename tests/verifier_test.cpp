// The graph verifier: a valid training step passes, and each broken invariant,
// made by editing the graph through its non-const accessors, gives an error
// that names the node or value and the problem.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "memfit/ir.h"
#include "ops/typed_graph.h"

namespace memfit {
namespace {

ValueId output_of(const Graph& graph, const Result<NodeId>& node, size_t index = 0) {
  EXPECT_TRUE(node.is_ok()) << node.message();
  return graph.node(*node).outputs.at(index);
}

// conv -> batch norm -> relu -> pool -> reshape -> linear -> loss, and an SGD
// step of the linear weights; the batch-norm running statistics are updated.
Graph step_graph() {
  Graph g;
  const ValueId x = g.add_input("x", {{2, 3, 4, 4}, DType::f32}, Role::input);
  const ValueId y = g.add_input("y", {{2}, DType::i32}, Role::label);
  const ValueId conv_w = g.add_input("conv.w", {{4, 3, 3, 3}, DType::f32}, Role::parameter);
  const ValueId conv = output_of(
      g, add_node(g, OpKind::conv2d, {x, conv_w}, Conv2dAttrs{{1, 1}, {1, 1}, {1, 1}, 1}, "conv"));
  const ValueId gamma = g.add_input("bn.gamma", {{4}, DType::f32}, Role::parameter);
  const ValueId beta = g.add_input("bn.beta", {{4}, DType::f32}, Role::parameter);
  const ValueId mean = g.add_input("bn.mean", {{4}, DType::f32}, Role::state);
  const ValueId var = g.add_input("bn.var", {{4}, DType::f32}, Role::state);
  const Result<NodeId> bn =
      add_node(g, OpKind::batch_norm, {conv, gamma, beta, mean, var}, BatchNormAttrs{}, "bn");
  const ValueId relu =
      output_of(g, add_node(g, OpKind::relu, {output_of(g, bn)}, NoAttrs{}, "relu"));
  const ValueId pool =
      output_of(g, add_node(g, OpKind::global_avg_pool, {relu}, NoAttrs{}, "pool"));
  const ValueId flat =
      output_of(g, add_node(g, OpKind::reshape, {pool}, ShapeAttrs{{2, 4}}, "flat"));
  const ValueId fc_w = g.add_input("fc.w", {{3, 4}, DType::f32}, Role::parameter);
  const ValueId fc = output_of(g, add_node(g, OpKind::linear, {flat, fc_w}, NoAttrs{}, "fc"));
  const ValueId loss =
      output_of(g, add_node(g, OpKind::softmax_cross_entropy, {fc, y}, NoAttrs{}, "loss"));
  const ValueId dw =
      output_of(g, add_node(g, OpKind::fill, {}, FillAttrs{0.5f, {3, 4}}, "dw", Role::gradient));
  const ValueId next = output_of(
      g, add_node(g, OpKind::sgd_update, {fc_w, dw}, SgdAttrs{0.1f}, "sgd", Role::parameter));
  g.mark_output(loss);
  g.add_update(mean, output_of(g, bn, 3));
  g.add_update(var, output_of(g, bn, 4));
  g.add_update(fc_w, next);
  return g;
}

ValueId value_named(const Graph& graph, std::string_view name) {
  const ValueId id = graph.find_value(name);
  EXPECT_TRUE(id.valid()) << name;
  return id;
}

NodeId node_named(const Graph& graph, std::string_view name) {
  for (size_t i = 0; i < graph.num_nodes(); ++i) {
    if (graph.nodes()[i].name == name) return NodeId(static_cast<int32_t>(i));
  }
  ADD_FAILURE() << "no node " << name;
  return NodeId(0);
}

void expect_error(const Graph& graph, std::string_view fragment) {
  const Status status = verify_graph(graph);
  ASSERT_FALSE(status.is_ok()) << "no error; expected: " << fragment;
  EXPECT_NE(status.message().find(fragment), std::string::npos)
      << "message: " << status.message() << "\nexpected: " << fragment;
}

TEST(VerifierTest, AcceptsATrainingStep) {
  const Graph g = step_graph();
  const Status status = verify_graph(g);
  EXPECT_TRUE(status.is_ok()) << status.message();
}

TEST(VerifierTest, RejectsAWrongOutputShape) {
  Graph g = step_graph();
  g.value(value_named(g, "conv")).type.shape[1] = 5;
  expect_error(g,
               "node 'conv' (conv2d): output 0 (%conv) has type f32[2,5,4,4], expected "
               "f32[2,4,4,4]");
}

TEST(VerifierTest, RejectsAWrongOutputDtype) {
  Graph g = step_graph();
  g.value(value_named(g, "fc")).type.dtype = DType::i32;
  expect_error(g, "node 'fc' (linear): output 0 (%fc) has type i32[2,3], expected f32[2,3]");
}

TEST(VerifierTest, RejectsAnInputTypeThatShapeInferenceRefuses) {
  Graph g = step_graph();
  g.value(value_named(g, "y")).type.dtype = DType::f32;
  expect_error(g, "node 'loss' (softmax_cross_entropy): ");
}

TEST(VerifierTest, RejectsAttributesThatShapeInferenceRefuses) {
  Graph g = step_graph();
  std::get<Conv2dAttrs>(g.node(node_named(g, "conv")).attrs).stride = {0, 1};
  expect_error(g, "node 'conv' (conv2d): ");
}

TEST(VerifierTest, RejectsNodesOutOfOrder) {
  Graph g = step_graph();
  g.node(node_named(g, "relu")).inputs[0] = value_named(g, "loss");
  expect_error(g,
               "node 'relu' (relu): input 0 (%loss) is produced by node 'loss', which does "
               "not come before it");
}

TEST(VerifierTest, RejectsANodeReadingItsOwnOutput) {
  Graph g = step_graph();
  g.node(node_named(g, "relu")).inputs[0] = value_named(g, "relu");
  expect_error(g, "input 0 (%relu) is produced by node 'relu', which does not come before it");
}

TEST(VerifierTest, RejectsTooManyInputs) {
  Graph g = step_graph();
  g.node(node_named(g, "relu")).inputs.push_back(value_named(g, "x"));
  expect_error(g, "node 'relu' (relu) has 2 inputs, expected 1");
}

TEST(VerifierTest, RejectsTooFewInputs) {
  Graph g = step_graph();
  g.node(node_named(g, "conv")).inputs.pop_back();
  expect_error(g, "node 'conv' (conv2d) has 1 inputs, expected 2 to 3");
}

TEST(VerifierTest, RejectsAttributesOfAnotherOp) {
  Graph g = step_graph();
  g.node(node_named(g, "conv")).attrs = PermAttrs{{0, 1, 2, 3}};
  expect_error(g, "node 'conv' (conv2d) has attributes of the wrong kind");
}

TEST(VerifierTest, RejectsAnInputThatIsNotAValue) {
  Graph g = step_graph();
  g.node(node_named(g, "relu")).inputs[0] = ValueId(999);
  expect_error(g, "node 'relu' (relu): input 0 is value id 999 (not a value of the graph)");
}

TEST(VerifierTest, RejectsDuplicateValueNames) {
  Graph g = step_graph();
  g.value(value_named(g, "relu")).name = "conv";
  expect_error(g, "value %conv is defined twice");
}

TEST(VerifierTest, RejectsDuplicateNodeNames) {
  Graph g = step_graph();
  g.node(node_named(g, "relu")).name = "conv";
  expect_error(g, "node 'conv' is defined twice");
}

TEST(VerifierTest, RejectsAValueItsProducerDoesNotList) {
  Graph g = step_graph();
  g.value(value_named(g, "relu")).producer = node_named(g, "conv");
  expect_error(g,
               "value %relu names node 'conv' (conv2d) as its producer, output 0, but the "
               "node does not list it there");
}

TEST(VerifierTest, RejectsAWrongOutputIndex) {
  Graph g = step_graph();
  g.value(value_named(g, "bn.1")).output_index = 2;
  expect_error(g, "value %bn.1 names node 'bn' (batch_norm) as its producer, output 2");
}

TEST(VerifierTest, RejectsAProducerThatIsNotANode) {
  Graph g = step_graph();
  g.value(value_named(g, "relu")).producer = NodeId(77);
  expect_error(g, "value %relu has producer id 77, which is not a node of the graph");
}

TEST(VerifierTest, RejectsAGraphInputWithAnOutputIndex) {
  Graph g = step_graph();
  g.value(value_named(g, "x")).output_index = 0;
  expect_error(g, "value %x has no producer (a graph input) but output index 0");
}

TEST(VerifierTest, RejectsANodeListingAnotherNodesOutput) {
  Graph g = step_graph();
  g.node(node_named(g, "relu")).outputs.push_back(value_named(g, "conv"));
  expect_error(g, "node 'relu' (relu): output 1 (%conv) does not name the node as its producer");
}

TEST(VerifierTest, RejectsAnOutputThatIsNotAValue) {
  Graph g = step_graph();
  g.node(node_named(g, "relu")).outputs.push_back(ValueId(-3));
  expect_error(g, "node 'relu' (relu): output 1 is value id -3 (not a value of the graph)");
}

TEST(VerifierTest, RejectsMissingOutputs) {
  // Written as text: building it through the API is impossible.
  const Result<Graph> parsed = parse_graph(
      "memfit-graph 1\n"
      "input %x f32[4,2] input\n"
      "input %c f32[2] parameter\n"
      "node bn = batch_norm(%x, %c, %c, %c, %c) -> %y f32[4,2] activation\n");
  ASSERT_TRUE(parsed.is_ok()) << parsed.message();
  expect_error(*parsed, "node 'bn' (batch_norm) has 1 outputs; shape inference gives 5");
}

TEST(VerifierTest, RejectsANegativeDimension) {
  Graph g = step_graph();
  g.value(value_named(g, "x")).type.shape[0] = -2;
  expect_error(g, "value %x has a negative dimension: f32[-2,3,4,4]");
}

TEST(VerifierTest, RejectsAValueTooLargeToCount) {
  Graph g = step_graph();
  g.value(value_named(g, "x")).type.shape = {1 << 30, 1 << 30, 1 << 30, 1};
  expect_error(g, "value %x is too large: f32[1073741824,1073741824,1073741824,1]");
}

TEST(VerifierTest, RejectsAGraphOutputThatIsNotAValue) {
  Graph g = step_graph();
  g.mark_output(ValueId(500));
  expect_error(g, "graph output 1 is value id 500 (not a value of the graph)");
}

TEST(VerifierTest, RejectsAnUpdateOfAProducedValue) {
  Graph g = step_graph();
  g.add_update(value_named(g, "relu"), value_named(g, "relu"));
  expect_error(g,
               "update %relu <- %relu: %relu is produced by node 'relu'; only graph inputs "
               "carry state across steps");
}

TEST(VerifierTest, RejectsAnUpdateOfAValueThatDoesNotPersist) {
  Graph g = step_graph();
  g.add_update(value_named(g, "x"), value_named(g, "conv"));
  expect_error(g, "update %x <- %conv: %x has role input, which does not persist across steps");
}

TEST(VerifierTest, RejectsAnUpdateOfAnotherType) {
  Graph g = step_graph();
  g.add_update(value_named(g, "conv.w"), value_named(g, "sgd"));
  expect_error(g, "update %conv.w <- %sgd: %sgd has type f32[3,4], the state f32[4,3,3,3]");
}

TEST(VerifierTest, RejectsAStateUpdatedTwice) {
  Graph g = step_graph();
  g.add_update(value_named(g, "fc.w"), value_named(g, "sgd"));
  expect_error(g, "update %fc.w <- %sgd: %fc.w is updated twice");
}

TEST(VerifierTest, RejectsAnUpdateOfSomethingThatIsNotAValue) {
  Graph g = step_graph();
  g.add_update(ValueId(1000), value_named(g, "sgd"));
  expect_error(g,
               "update value id 1000 (not a value of the graph) <- %sgd: both sides must be "
               "values of the graph");
}

}  // namespace
}  // namespace memfit
