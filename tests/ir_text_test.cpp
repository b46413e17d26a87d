// The text form of graphs: exact round trips (every op's examples, floats bit
// for bit, 64-bit keys, odd names, value ids), the parser's error messages,
// and a fuzz test: random mutations of a valid text never crash the parser or
// the verifier.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "memfit/ir.h"
#include "ops/op_table.h"
#include "ops/typed_graph.h"

namespace memfit {
namespace {

// Every field of an attribute struct as text, floats as their bits, so that
// equal lists mean bit-identical attributes.
std::vector<std::string> field_list(const Attrs& attrs) {
  std::vector<std::string> fields{"alternative " + std::to_string(attrs.index())};
  Attrs copy = attrs;
  std::visit(
      [&](auto& alternative) {
        alternative.visit_fields([&](std::string_view key, const auto& field) {
          using T = std::decay_t<decltype(field)>;
          std::string text = std::string(key) + "=";
          if constexpr (std::is_same_v<T, float>) {
            text += "bits " + std::to_string(std::bit_cast<uint32_t>(field));
          } else if constexpr (std::is_arithmetic_v<T>) {
            text += std::to_string(field);
          } else {
            for (int64_t element : field) text += std::to_string(element) + ",";
          }
          fields.push_back(text);
        });
      },
      copy);
  return fields;
}

std::vector<int32_t> indices(const std::vector<ValueId>& ids) {
  std::vector<int32_t> out;
  for (ValueId id : ids) out.push_back(id.index);
  return out;
}

void expect_same_graph(const Graph& a, const Graph& b) {
  ASSERT_EQ(a.num_values(), b.num_values());
  for (size_t i = 0; i < a.num_values(); ++i) {
    const Value& x = a.values()[i];
    const Value& y = b.values()[i];
    SCOPED_TRACE("value " + std::to_string(i) + " %" + x.name);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type.shape, y.type.shape);
    EXPECT_EQ(dtype_name(x.type.dtype), dtype_name(y.type.dtype));
    EXPECT_EQ(role_name(x.role), role_name(y.role));
    EXPECT_EQ(layout_name(x.layout), layout_name(y.layout));
    EXPECT_EQ(x.producer.index, y.producer.index);
    EXPECT_EQ(x.output_index, y.output_index);
  }
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  for (size_t i = 0; i < a.num_nodes(); ++i) {
    const Node& x = a.nodes()[i];
    const Node& y = b.nodes()[i];
    SCOPED_TRACE("node " + std::to_string(i) + " " + x.name);
    EXPECT_EQ(op_name(x.op), op_name(y.op));
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(indices(x.inputs), indices(y.inputs));
    EXPECT_EQ(indices(x.outputs), indices(y.outputs));
    EXPECT_EQ(field_list(x.attrs), field_list(y.attrs));
  }
  EXPECT_EQ(indices(a.outputs()), indices(b.outputs()));
  ASSERT_EQ(a.updates().size(), b.updates().size());
  for (size_t i = 0; i < a.updates().size(); ++i) {
    EXPECT_EQ(a.updates()[i].state.index, b.updates()[i].state.index);
    EXPECT_EQ(a.updates()[i].next.index, b.updates()[i].next.index);
  }
}

// Print, parse, print: the parsed graph equals the original in every field and
// the text is a fixed point.
void expect_round_trip(const Graph& graph) {
  const std::string text = print_graph(graph);
  Result<Graph> parsed = parse_graph(text);
  ASSERT_TRUE(parsed.is_ok()) << parsed.message() << "\n" << text;
  expect_same_graph(graph, *parsed);
  EXPECT_EQ(print_graph(*parsed), text);
}

ValueId output_of(const Graph& graph, const Result<NodeId>& node, size_t index = 0) {
  EXPECT_TRUE(node.is_ok()) << node.message();
  return graph.node(*node).outputs.at(index);
}

// One node for every example of every op, each with inputs of its own.
Graph every_op_graph() {
  Graph graph;
  for (int k = 0; k < kNumOps; ++k) {
    const auto op = static_cast<OpKind>(k);
    const std::vector<OpExample> examples = op_info(op).examples();
    for (size_t e = 0; e < examples.size(); ++e) {
      const std::string name = std::string(op_name(op)) + "." + std::to_string(e);
      std::vector<ValueId> inputs;
      for (size_t i = 0; i < examples[e].inputs.size(); ++i) {
        const TensorType& type = examples[e].inputs[i];
        inputs.push_back(graph.add_input(name + ".in" + std::to_string(i), type,
                                         type.dtype == DType::i32 ? Role::label : Role::input));
      }
      const Result<NodeId> node = add_node(graph, op, inputs, examples[e].attrs, name);
      if (node.is_ok() && graph.node(*node).outputs.empty()) continue;  // swap_wait
      graph.mark_output(output_of(graph, node));
    }
  }
  return graph;
}

// A small training step: conv, batch norm with running statistics, dropout,
// a loss, and SGD and AdamW updates fed by constant gradients.
Graph training_step_graph() {
  Graph g;
  const ValueId x = g.add_input("x", {{4, 3, 6, 6}, DType::f32}, Role::input);
  const ValueId y = g.add_input("y", {{4}, DType::i32}, Role::label);
  const ValueId conv_w = g.add_input("conv.w", {{5, 3, 3, 3}, DType::f32}, Role::parameter);
  const ValueId conv_m = g.add_input("conv.w.m", {{5, 3, 3, 3}, DType::f32}, Role::optimizer_state);
  const ValueId conv_v = g.add_input("conv.w.v", {{5, 3, 3, 3}, DType::f32}, Role::optimizer_state);
  const ValueId conv = output_of(
      g, add_node(g, OpKind::conv2d, {x, conv_w}, Conv2dAttrs{{1, 1}, {1, 1}, {1, 1}, 1}, "conv"));
  std::vector<ValueId> bn_inputs{conv};
  for (const char* name : {"bn.gamma", "bn.beta", "bn.mean", "bn.var"}) {
    const Role role = name[3] == 'g' || name[3] == 'b' ? Role::parameter : Role::state;
    bn_inputs.push_back(g.add_input(name, {{5}, DType::f32}, role));
  }
  const Result<NodeId> bn =
      add_node(g, OpKind::batch_norm, bn_inputs, BatchNormAttrs{1e-8f, 0.3f}, "bn");
  const ValueId relu =
      output_of(g, add_node(g, OpKind::relu, {output_of(g, bn)}, NoAttrs{}, "relu"));
  const ValueId drop = output_of(
      g, add_node(g, OpKind::dropout, {relu}, DropoutAttrs{0.1f, 0xFEDCBA9876543210ull}, "drop"));
  const ValueId pool =
      output_of(g, add_node(g, OpKind::global_avg_pool, {drop}, NoAttrs{}, "pool"));
  const ValueId flat =
      output_of(g, add_node(g, OpKind::reshape, {pool}, ShapeAttrs{{4, 5}}, "flat"));
  const ValueId fc_w = g.add_input("fc.w", {{10, 5}, DType::f32}, Role::parameter);
  const ValueId fc_v = g.add_input("fc.w.v", {{10, 5}, DType::f32}, Role::optimizer_state);
  const ValueId fc = output_of(g, add_node(g, OpKind::linear, {flat, fc_w}, NoAttrs{}, "fc"));
  const ValueId loss =
      output_of(g, add_node(g, OpKind::softmax_cross_entropy, {fc, y}, NoAttrs{}, "loss"));
  const ValueId fc_dw = output_of(
      g, add_node(g, OpKind::fill, {}, FillAttrs{-0.0f, {10, 5}}, "fc.dw", Role::gradient));
  const ValueId conv_dw = output_of(
      g, add_node(g, OpKind::fill, {}, FillAttrs{1e-3f, {5, 3, 3, 3}}, "conv.dw", Role::gradient));
  const Result<NodeId> sgd = add_node(g, OpKind::sgd_update, {fc_w, fc_dw, fc_v},
                                      SgdAttrs{0.05f, 0.9f, 5e-4f}, "sgd", Role::parameter);
  const Result<NodeId> adamw =
      add_node(g, OpKind::adamw_update, {conv_w, conv_dw, conv_m, conv_v},
               AdamWAttrs{3e-4f, 0.9f, 0.999f, 1e-8f, 0.01f}, "adamw", Role::parameter);
  g.mark_output(loss);
  g.add_update(bn_inputs[3], output_of(g, bn, 3));
  g.add_update(bn_inputs[4], output_of(g, bn, 4));
  g.add_update(fc_w, output_of(g, sgd, 0));
  g.add_update(fc_v, output_of(g, sgd, 1));
  g.add_update(conv_w, output_of(g, adamw, 0));
  g.add_update(conv_m, output_of(g, adamw, 1));
  g.add_update(conv_v, output_of(g, adamw, 2));
  return g;
}

TEST(IrTextTest, PrintsTheDocumentedForm) {
  Graph g;
  const ValueId x = g.add_input("x", {{2, 3}, DType::f32}, Role::input);
  const ValueId w = g.add_input("w", {{4, 3}, DType::f32}, Role::parameter);
  const ValueId fc = output_of(g, add_node(g, OpKind::linear, {x, w}, NoAttrs{}, "fc"));
  const ValueId drop =
      output_of(g, add_node(g, OpKind::dropout, {fc}, DropoutAttrs{0.25f, 7}, "drop"));
  const ValueId dw = g.add_input("dw", {{4, 3}, DType::f32}, Role::gradient);
  const ValueId next = output_of(
      g, add_node(g, OpKind::sgd_update, {w, dw}, SgdAttrs{0.5f}, "sgd", Role::parameter));
  g.mark_output(drop);
  g.add_update(w, next);
  EXPECT_EQ(print_graph(g),
            "memfit-graph 1\n"
            "input %x f32[2,3] input\n"
            "input %w f32[4,3] parameter\n"
            "node fc = linear(%x, %w) -> %fc f32[2,4] activation\n"
            "node drop = dropout(%fc) {p=0.25 key=7} -> %drop f32[2,4] activation\n"
            "input %dw f32[4,3] gradient\n"
            "node sgd = sgd_update(%w, %dw) {lr=0.5 momentum=0 weight_decay=0} -> %sgd f32[4,3] "
            "parameter\n"
            "output %drop\n"
            "update %w <- %sgd\n");
  expect_round_trip(g);
}

TEST(IrTextTest, RoundTripsEveryExampleOfEveryOp) {
  const Graph graph = every_op_graph();
  ASSERT_TRUE(verify_graph(graph).is_ok()) << verify_graph(graph).message();
  expect_round_trip(graph);
}

// Triple fields (3-D windows) print as three numbers and parse back.
TEST(IrTextTest, RoundTripsTriples) {
  Graph g;
  const ValueId x = g.add_input("x", {{1, 2, 4, 6, 8}, DType::f32}, Role::input);
  const ValueId pool =
      output_of(g, add_node(g, OpKind::max_pool3d, {x},
                            Pool3dAttrs{{2, 3, 2}, {2, 3, 2}, {0, 1, 0}, false}, "pool"));
  g.mark_output(output_of(
      g, add_node(g, OpKind::upsample, {pool}, UpsampleAttrs{{2, 3, 2}, true, {}}, "up")));
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("node pool = max_pool3d(%x) {kernel=[2,3,2] stride=[2,3,2] pad=[0,1,0] "
                      "include_pad=false} -> %pool f32[1,2,2,2,4] activation\n"
                      "node up = upsample(%pool) {scale=[2,3,2] linear=true shape=[]} -> %up "
                      "f32[1,2,4,6,8] activation\n"),
            std::string::npos)
      << text;
  expect_round_trip(g);
}

TEST(IrTextTest, RoundTripsATrainingStep) {
  const Graph graph = training_step_graph();
  ASSERT_TRUE(verify_graph(graph).is_ok()) << verify_graph(graph).message();
  expect_round_trip(graph);
  const std::string text = print_graph(graph);
  EXPECT_NE(text.find("node bn = batch_norm(%conv, %bn.gamma, %bn.beta, %bn.mean, %bn.var) "
                      "{eps=1e-08 momentum=0.3 relu=false} -> %bn.0 f32[4,5,6,6] activation, %bn.1 f32[5] "
                      "activation, %bn.2 f32[5] activation, %bn.3 f32[5] activation, %bn.4 "
                      "f32[5] activation\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{p=0.1 key=18364758544493064720}"), std::string::npos) << text;
  EXPECT_NE(text.find("update %bn.mean <- %bn.3\n"), std::string::npos) << text;
}

// A blocked value prints its layout after its type, reads back into it, and
// counts its padding in its bytes.
TEST(IrTextTest, RoundTripsLayouts) {
  const std::string text =
      "memfit-graph 1\n"
      "input %x f32[2,3,4,4] input\n"
      "node to_c8 = reorder(%x) -> %x.c8 f32[2,3,4,4]@c8 activation\n"
      "node relu = relu(%x.c8) -> %relu f32[2,3,4,4]@c8 activation\n"
      "node to_plain = reorder(%relu) -> %y f32[2,3,4,4] activation\n"
      "output %y\n";
  Result<Graph> graph = parse_graph(text);
  ASSERT_TRUE(graph.is_ok()) << graph.message();
  ASSERT_TRUE(verify_graph(*graph).is_ok()) << verify_graph(*graph).message();
  EXPECT_EQ(print_graph(*graph), text);
  expect_round_trip(*graph);
  const Value& blocked = graph->value(graph->find_value("x.c8"));
  EXPECT_EQ(blocked.layout, Layout::c8);
  EXPECT_EQ(blocked.elements(), 2 * 3 * 4 * 4);
  EXPECT_EQ(blocked.bytes(), size_t{2 * 8 * 4 * 4 * 4});  // 3 channels padded to 8
  EXPECT_EQ(graph->value(graph->find_value("y")).bytes(), size_t{2 * 3 * 4 * 4 * 4});
  EXPECT_NE(parse_graph("memfit-graph 1\ninput %x f32[2,3,4,4]@c7 input\n").message().find(
                "unknown layout 'c7'"),
            std::string::npos);
}

// Weights in oi8 pad both channel dimensions; state may be blocked, and its
// next value is then in the same layout.
TEST(IrTextTest, RoundTripsBlockedState) {
  const std::string text =
      "memfit-graph 1\n"
      "input %w f32[20,3,3,3]@oi8 parameter\n"
      "input %g f32[20,3,3,3]@oi8 gradient\n"
      "node u = sgd_update(%w, %g) {lr=0.1 momentum=0 weight_decay=0} -> %w.next "
      "f32[20,3,3,3]@oi8 parameter\n"
      "update %w <- %w.next\n";
  Result<Graph> graph = parse_graph(text);
  ASSERT_TRUE(graph.is_ok()) << graph.message();
  EXPECT_NE(verify_graph(*graph).message().find("graph inputs other than persistent state"),
            std::string::npos);  // %g is a gradient, not state
  Result<Graph> state_only = parse_graph(
      "memfit-graph 1\n"
      "input %w f32[20,3,3,3]@oi8 parameter\n"
      "node u = sgd_update(%w, %w) {lr=0.1 momentum=0 weight_decay=0} -> %w.next "
      "f32[20,3,3,3]@oi8 parameter\n"
      "update %w <- %w.next\n");
  ASSERT_TRUE(state_only.is_ok()) << state_only.message();
  ASSERT_TRUE(verify_graph(*state_only).is_ok()) << verify_graph(*state_only).message();
  expect_round_trip(*state_only);
  const Value& w = state_only->value(state_only->find_value("w"));
  EXPECT_EQ(w.layout, Layout::oi8);
  EXPECT_EQ(w.bytes(), size_t{24 * 8 * 3 * 3 * 4});  // 20 and 3 channels padded to 24 and 8
}

// Layouts the verifier refuses: on a value that is not an f32 volume, on a
// graph input that is not state, on a graph output and on the next value of
// state in another layout than the state's.
TEST(IrTextTest, VerifierRefusesMisplacedLayouts) {
  const std::pair<const char*, const char*> cases[] = {
      {"input %x f32[2,3] input\nnode r = reorder(%x) -> %y f32[2,3]@c8 activation\n",
       "only f32 values of rank 4 or 5"},
      {"input %x f32[2,3,4,4]@c8 input\nnode r = relu(%x) -> %y f32[2,3,4,4]@c8 activation\n",
       "graph inputs other than persistent state are plain"},
      {"input %w f32[16,8,3,3]@oi8 parameter\n"
       "node u = sgd_update(%w, %w) {lr=0.1 momentum=0 weight_decay=0} -> %w.next "
       "f32[16,8,3,3] parameter\nupdate %w <- %w.next\n",
       "the next value of state is in the state's layout"},
      {"input %x f32[2,3,4,4] input\nnode r = reorder(%x) -> %y f32[2,3,4,4]@c16 "
       "activation\noutput %y\n",
       "graph outputs, which are plain"},
  };
  for (const auto& [body, message] : cases) {
    Result<Graph> graph = parse_graph(std::string("memfit-graph 1\n") + body);
    ASSERT_TRUE(graph.is_ok()) << graph.message();
    const Status verified = verify_graph(*graph);
    EXPECT_NE(verified.message().find(message), std::string::npos) << verified.message();
  }
}

TEST(IrTextTest, KeepsFloatsAndKeysBitExact) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float values[] = {0.1f,
                          1e-8f,
                          -2.5e-7f,
                          -0.0f,
                          1.0f / 3.0f,
                          std::nextafter(1.0f, 2.0f),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(),
                          kInf,
                          -kInf};
  const uint64_t keys[] = {0, (1ull << 32) + 1, std::numeric_limits<uint64_t>::max()};
  Graph g;
  const ValueId x = g.add_input("x", {{3}, DType::f32}, Role::input);
  for (size_t i = 0; i < std::size(values); ++i) {
    const std::string name = "v" + std::to_string(i);
    ASSERT_TRUE(add_node(g, OpKind::fill, {}, FillAttrs{values[i], {1}}, "fill." + name).is_ok());
    ASSERT_TRUE(add_node(g, OpKind::scale, {x}, ScaleAttrs{values[i]}, "scale." + name).is_ok());
  }
  for (size_t i = 0; i < std::size(keys); ++i) {
    ASSERT_TRUE(
        add_node(g, OpKind::dropout, {x}, DropoutAttrs{0.5f, keys[i]}, "drop" + std::to_string(i))
            .is_ok());
  }
  expect_round_trip(g);
  const std::string text = print_graph(g);
  for (const char* expected : {"{value=0.1 ", "{alpha=1e-08}", "{alpha=-0}", "{alpha=inf}",
                               "{alpha=-inf}", "key=18446744073709551615}", "key=4294967297}"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  }
}

TEST(IrTextTest, QuotesNamesWithOtherCharacters) {
  Graph g;
  const std::string names[] = {"with space", "quote\"inside", "back\\slash",
                               "new\nline",  "#hash",         "",
                               "tab\t%{}",   "\xff\x01",      "plain.name/with:all_-"};
  ValueId previous = g.add_input(names[0], {{2}, DType::f32}, Role::input);
  for (size_t i = 1; i < std::size(names); ++i) {
    const Result<NodeId> node = add_node(g, OpKind::relu, {previous}, NoAttrs{}, names[i]);
    previous = output_of(g, node);
  }
  g.mark_output(previous);
  expect_round_trip(g);
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("input %\"with space\" f32[2] input\n"), std::string::npos) << text;
  EXPECT_NE(text.find("node \"new\\x0aline\" = relu(%\"back\\\\slash\") -> %\"new\\x0aline\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("node plain.name/with:all_- = relu("), std::string::npos) << text;
  // One line per statement: no name brings a raw newline.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 1 + 8 + 1);
}

TEST(IrTextTest, KeepsIdsOfInputsAddedBetweenAndAfterNodes) {
  Graph g;
  const ValueId a = g.add_input("a", {{2, 2}, DType::f32}, Role::input);
  const Result<NodeId> first = add_node(g, OpKind::relu, {a}, NoAttrs{}, "first");
  const ValueId b = g.add_input("b", {{2, 2}, DType::f32}, Role::input);
  const Result<NodeId> second =
      add_node(g, OpKind::add, {output_of(g, first), b}, NoAttrs{}, "second");
  const ValueId late = g.add_input("late", {{2, 2}, DType::f32}, Role::input);
  g.add_input("unused", {{1}, DType::i32}, Role::label);
  // A pass may point an early node at an input created after it.
  g.node(*second).inputs[1] = late;
  g.mark_output(output_of(g, second));
  ASSERT_TRUE(verify_graph(g).is_ok()) << verify_graph(g).message();
  expect_round_trip(g);
}

TEST(IrTextTest, ReadsHandWrittenText) {
  const Result<Graph> parsed = parse_graph(
      "# a comment before the header\n"
      "memfit-graph 1   # the version\n"
      "\n"
      "input %x f32[2,8] input\r\n"
      "  input   %\"odd name\"\tf32[ 2 , 8 ] input\n"
      "node s = add(%x,%\"odd name\") {} -> %s f32[2,8] activation\n"
      "node sm = softmax( %s ) {  } -> %sm f32[2,8] activation  # axis defaults to 0\n"
      "node c = concat(%x, %sm) {axis=1} -> %c f32[2,16] temporary\n"
      "output %c\n");
  ASSERT_TRUE(parsed.is_ok()) << parsed.message();
  const Graph& g = *parsed;
  EXPECT_TRUE(verify_graph(g).is_ok()) << verify_graph(g).message();
  ASSERT_EQ(g.num_nodes(), 3u);
  EXPECT_EQ(g.value(g.nodes()[0].inputs[1]).name, "odd name");
  EXPECT_EQ(std::get<AxisAttrs>(g.nodes()[1].attrs).axis, 0);
  EXPECT_EQ(std::get<AxisAttrs>(g.nodes()[2].attrs).axis, 1);
  EXPECT_EQ(g.value(g.find_value("c")).role, Role::temporary);
  EXPECT_EQ(g.outputs().size(), 1u);
}

TEST(IrTextTest, LetsANodeNameAGraphInputOfALaterLine) {
  const Result<Graph> parsed = parse_graph(
      "memfit-graph 1\n"
      "input %x f32[2] input\n"
      "node s = add(%x, %late) -> %s f32[2] activation\n"
      "input %late f32[2] input\n");
  ASSERT_TRUE(parsed.is_ok()) << parsed.message();
  EXPECT_EQ(parsed->nodes()[0].inputs[1].index, 2);
  EXPECT_TRUE(verify_graph(*parsed).is_ok()) << verify_graph(*parsed).message();
}

TEST(IrTextTest, ParsesWrongTypesForTheVerifierToReject) {
  const Result<Graph> parsed = parse_graph(
      "memfit-graph 1\n"
      "input %x f32[2,8] input\n"
      "node r = relu(%x) -> %r f32[2,9] activation\n");
  ASSERT_TRUE(parsed.is_ok()) << parsed.message();
  const Status status = verify_graph(*parsed);
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("node 'r' (relu): output 0 (%r) has type f32[2,9], expected "
                                  "f32[2,8]"),
            std::string::npos)
      << status.message();
}

struct BadText {
  std::string text;
  std::string fragment;
};

TEST(IrTextTest, ReportsMalformedTextWithTheLine) {
  const std::string head =
      "memfit-graph 1\n"
      "input %x f32[2,3] input\n"
      "input %w f32[4,3] parameter\n";
  const std::string relu_out = " -> %a f32[2,3] activation";
  const BadText cases[] = {
      {"", "empty text"},
      {"# only a comment\n\n", "empty text"},
      {"graph 1\n", "line 1: expected the header 'memfit-graph 1'"},
      {"memfit-graph 2\n", "line 1: unsupported version '2'"},
      {head + "nodes a = relu(%x)" + relu_out, "line 4: unknown statement 'nodes'"},
      {head + "[x]", "line 4: expected input, node, output or update but found '[x]'"},
      {head + "node a = conv4d(%x)" + relu_out, "line 4: node 'a': unknown op 'conv4d'"},
      {head + "node a = (%x)" + relu_out, "line 4: node 'a': expected an op but found '(%x)'"},
      {head + "node = relu(%x)" + relu_out, "expected a node name but found '='"},
      {head + "node a relu(%x)" + relu_out, "expected '=' but found 'relu(%x)'"},
      {head + "node a = linear(%x, %w) {bias=true} -> %a f32[2,4] activation",
       "line 4: node 'a' (linear): unknown attribute 'bias' (the op has no attributes)"},
      {head + "node a = matmul(%x, %w) {trans_b=true bias=1} -> %a f32[2,4] activation",
       "unknown attribute 'bias' (known: trans_a, trans_b)"},
      {head + "node a = matmul(%x, %w) {trans_b=} -> %a f32[2,4] activation",
       "node 'a' (matmul): attribute 'trans_b' has no value"},
      {head + "node a = scale(%x) {alpha= }" + relu_out, "attribute 'alpha' has no value"},
      {head + "node a = scale(%x) {alpha}" + relu_out, "expected '=' but found '}'"},
      {head + "node a = scale(%x) {=1}" + relu_out, "expected an attribute name but found '=1}'"},
      {head + "node a = scale(%x) {alpha=1" + relu_out,
       "expected an attribute name but found '->'"},
      {head + "node a = scale(%x) {alpha=1 alpha=2}" + relu_out,
       "attribute 'alpha' is given twice"},
      {head + "node a = matmul(%x, %w) {trans_b=yes} -> %a f32[2,4] activation",
       "attribute 'trans_b': expected true or false, got 'yes'"},
      {head + "node a = scale(%x) {alpha=1.5.2}" + relu_out,
       "attribute 'alpha': bad number '1.5.2' (expected a float)"},
      {head + "node a = scale(%x) {alpha=1e99}" + relu_out, "bad number '1e99' (expected a float)"},
      {head + "node a = dropout(%x) {key=-1}" + relu_out,
       "attribute 'key': bad number '-1' (expected an unsigned integer)"},
      {head + "node a = dropout(%x) {key=18446744073709551616}" + relu_out,
       "bad number '18446744073709551616'"},
      {head + "node a = concat(%x) {axis=1x}" + relu_out,
       "attribute 'axis': bad number '1x' (expected an integer)"},
      {head + "node a = max_pool2d(%x) {kernel=[2]}" + relu_out,
       "attribute 'kernel': expected two numbers [a,b], got '[2]'"},
      {head + "node a = max_pool3d(%x) {stride=[2,2]}" + relu_out,
       "attribute 'stride': expected three numbers [a,b,c], got '[2,2]'"},
      {head + "node a = conv3d(%x, %w) {stride=[1,1]}" + relu_out,
       "attribute 'stride': expected three numbers [a,b,c], got '[1,1]'"},
      {head + "node a = max_pool2d(%x) {kernel=2}" + relu_out,
       "attribute 'kernel': expected a list like [1,2], got '2'"},
      {head + "node a = transpose(%x) {perm=[1,x]}" + relu_out,
       "bad number 'x' (expected an integer)"},
      {head + "input %y f32[2,3 input", "line 4: missing ']'"},
      {head + "input %y f32[2,,3] input", "bad shape of %y: bad number ''"},
      {head + "input %y f16[2] input", "line 4: unknown dtype 'f16' (known: f32, i32)"},
      {head + "input %y [2] input", "expected a dtype (known: f32, i32)"},
      {head + "input %y f32[2] weights", "unknown role 'weights' (known: input, label, parameter"},
      {head + "input %y f32[2]", "line 4: expected a role"},
      {head + "input y f32[2] input", "expected a value name starting with '%' but found 'y'"},
      {head + "input % f32[2] input", "expected a value name after '%' but found 'f32[2]'"},
      {head + "input %\"a b f32[2] input", "a quoted name misses its closing '\"'"},
      {head + "input %\"a\\qb\" f32[2] input", "bad escape in a quoted name"},
      {head + "node a = relu(%z)" + relu_out, "line 4: node 'a' (relu): value %z is not defined"},
      {head + "node a = relu(%a)" + relu_out, "value %a is used before it is defined (on line 4)"},
      {head + "node b = relu(%a) -> %b f32[2,3] activation\nnode a = relu(%x)" + relu_out,
       "line 4: node 'b' (relu): value %a is used before it is defined (on line 5)"},
      {head + "output %z", "line 4: output: value %z is used before it is defined"},
      {head + "update %w <- %z", "update: value %z is used before it is defined"},
      {head + "update %w %x", "expected '<-' but found '%x'"},
      {head + "input %x f32[2] input", "line 4: value %x is already defined on line 2"},
      {head + "node a = relu(%x) -> %w f32[2,3] activation",
       "value %w is already defined on line 3"},
      {head + "node a = relu(%x)" + relu_out + ", %a f32[2,3] activation",
       "line 4: value %a is already defined on line 4"},
      {head + "node a = relu(%x)" + relu_out + "\nnode a = relu(%a) -> %b f32[2,3] activation",
       "line 5: node 'a' is already defined on line 4"},
      {head + "node a = relu(%x, %w)" + relu_out, "node 'a' (relu) takes 1 input, got 2"},
      {head + "node a = linear(%x)" + relu_out, "node 'a' (linear) takes 2 to 4 inputs, got 1"},
      {head + "node a = fill(%x, %x)" + relu_out, "takes 0 to 1 input, got 2"},
      {head + "node a = relu(%x" + relu_out, "expected ',' but found '->'"},
      {head + "node a = relu(%x) %a f32[2,3] activation", "expected '->' but found '%a'"},
      {head + "node a = relu(%x) -> %a f32[2,3] activation %b", "expected ',' but found '%b'"},
      {head + "output %x extra", "line 4: unexpected text but found 'extra'"},
      {head + "\n\n# comment\noutput %x\noutput", "line 8: expected a value name starting"},
  };
  for (const BadText& bad : cases) {
    const Result<Graph> parsed = parse_graph(bad.text);
    ASSERT_FALSE(parsed.is_ok()) << "parsed without error:\n" << bad.text;
    EXPECT_NE(parsed.message().find(bad.fragment), std::string::npos)
        << "message: " << parsed.message() << "\nexpected: " << bad.fragment;
  }
}

// A random edit of `text`: characters or tokens inserted, deleted or replaced,
// lines duplicated, deleted or swapped.
std::string mutate(std::string text, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  constexpr std::string_view kChars = " \t\n%[](){}=,<->#\"\\.:_/0123456789+eExz";
  const char* const kTokens[] = {"0",
                                 "-1",
                                 "1",
                                 "2",
                                 "99999999999999999999",
                                 "9223372036854775807",
                                 "-9223372036854775808",
                                 "1e39",
                                 "nan",
                                 "-inf",
                                 "true",
                                 "f32",
                                 "i32",
                                 "parameter",
                                 "state",
                                 "%x",
                                 "->",
                                 "{}",
                                 "[]",
                                 "[,]",
                                 "",
                                 "relu",
                                 "%conv"};
  if (text.empty()) return std::string(1, kChars[pick(kChars.size())]);
  const size_t at = pick(text.size());
  std::vector<std::string> lines;
  for (size_t start = 0; start < text.size();) {
    const size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  auto joined = [&] {
    std::string out;
    for (const std::string& line : lines) out += line + "\n";
    return out;
  };
  switch (pick(7)) {
    case 0:
      return text.erase(at, 1 + pick(4));
    case 1:
      return text.insert(at, 1, kChars[pick(kChars.size())]);
    case 2:
      text[at] = kChars[pick(kChars.size())];
      return text;
    case 3: {
      // Replace the run of name characters around `at` by a token.
      size_t begin = at, end = at;
      auto in_token = [&](size_t i) {
        return std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
               text[i] == '_' || text[i] == '-';
      };
      while (begin > 0 && in_token(begin - 1)) --begin;
      while (end < text.size() && in_token(end)) ++end;
      return text.replace(begin, end - begin, kTokens[pick(std::size(kTokens))]);
    }
    case 4:
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(pick(lines.size())),
                   lines[pick(lines.size())]);
      return joined();
    case 5:
      lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(pick(lines.size())));
      return joined();
    default:
      std::swap(lines[pick(lines.size())], lines[pick(lines.size())]);
      return joined();
  }
}

TEST(IrTextTest, SurvivesRandomMutations) {
  const std::string valid = print_graph(training_step_graph());
  std::mt19937_64 rng(20240611);
  int parsed_count = 0, verified_count = 0, rejected_count = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    std::string text = valid;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) text = mutate(std::move(text), rng);
    const Result<Graph> parsed = parse_graph(text);
    if (!parsed.is_ok()) {
      ++rejected_count;
      EXPECT_EQ(parsed.message().rfind("line ", 0), 0u) << parsed.message();
      continue;
    }
    ++parsed_count;
    const Status status = verify_graph(*parsed);
    if (!status.is_ok()) {
      EXPECT_FALSE(status.message().empty());
      continue;
    }
    ++verified_count;
    // A mutated graph that is valid still round-trips.
    const std::string printed = print_graph(*parsed);
    const Result<Graph> again = parse_graph(printed);
    ASSERT_TRUE(again.is_ok()) << again.message() << "\n" << printed;
    EXPECT_EQ(print_graph(*again), printed);
  }
  // The mutations reach every outcome: parse errors, verifier errors, valid graphs.
  EXPECT_GT(rejected_count, 0);
  EXPECT_GT(parsed_count, verified_count);
  EXPECT_GT(verified_count, 0);
}

}  // namespace
}  // namespace memfit
