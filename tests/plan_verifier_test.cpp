// The plan verifier: hand-made plans that break each rule are refused with a
// message naming the node, the step, the values and the bytes; hand-made valid
// plans (sharing, in place, updates in place) pass; the planner's plans of
// 10,000 random graphs pass, with and without in-place reuse and sharing; and
// moving a slice of a planner's plan onto a live value is always caught, so
// the verifier is not vacuous.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memfit/ir.h"
#include "memory/planner.h"
#include "ops/typed_graph.h"
#include "random_graphs.h"

namespace memfit {
namespace {

struct Case {
  Graph graph;
  PlanSizes sizes;
  MemoryPlan plan;
};

// A graph in the text form, each value at the offset given by its name, in a
// slice of its bytes rounded up; nodes named in `workspaces` get that
// workspace, the others none. The sizes ask for exactly the value bytes and
// the workspace slices; the arena is the largest slice end.
Case make_case(std::string_view text, const std::map<std::string, size_t>& offsets,
               const std::map<std::string, Slice>& workspaces = {}) {
  Result<Graph> graph = parse_graph(text);
  EXPECT_TRUE(graph.is_ok()) << graph.message();
  Case c{std::move(graph).value(), {}, {}};
  for (const Value& v : c.graph.values()) {
    const auto it = offsets.find(v.name);
    EXPECT_NE(it, offsets.end()) << "no offset for %" << v.name;
    const Slice slice{it == offsets.end() ? 0 : it->second, align_up(v.bytes())};
    c.plan.value_slices.push_back(slice);
    c.sizes.value_bytes.push_back(v.bytes());
    c.plan.arena_bytes = std::max(c.plan.arena_bytes, slice.end());
  }
  for (const Node& n : c.graph.nodes()) {
    const auto it = workspaces.find(n.name);
    const Slice slice = it == workspaces.end() ? Slice{} : it->second;
    c.plan.workspace_slices.push_back(slice);
    c.sizes.workspace_bytes.push_back(slice.bytes);
    c.plan.arena_bytes = std::max(c.plan.arena_bytes, slice.end());
  }
  return c;
}

void expect_ok(const Case& c, size_t budget = 0) {
  const Status status = verify_plan(c.graph, c.sizes, c.plan, budget);
  EXPECT_TRUE(status.is_ok()) << status.message();
}

void expect_error(const Case& c, std::string_view expected, size_t budget = 0) {
  const Status status = verify_plan(c.graph, c.sizes, c.plan, budget);
  ASSERT_FALSE(status.is_ok()) << "no error; expected: " << expected;
  EXPECT_NE(status.message().find(expected), std::string::npos)
      << "message: " << status.message() << "\nexpected: " << expected;
}

size_t index_of(const Graph& graph, std::string_view value) {
  const ValueId id = graph.find_value(value);
  EXPECT_TRUE(id.valid()) << value;
  return id.idx();
}

// Every tensor f32[4,16]: 256 bytes. relu is read twice: by tanh and by add.
constexpr std::string_view kChain = R"(memfit-graph 1
input %x f32[4,16] input
node relu = relu(%x) -> %relu f32[4,16] activation
node tanh = tanh(%relu) -> %tanh f32[4,16] activation
node add = add(%relu, %tanh) -> %add f32[4,16] activation
output %add
)";

// A long skip connection: a is read at steps 1 and 3.
constexpr std::string_view kSkip = R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node b = tanh(%a) -> %b f32[4,16] activation
node c = sigmoid(%b) -> %c f32[4,16] activation
node d = add(%a, %c) -> %d f32[4,16] activation
output %d
)";

// One SGD step of a linear layer: w is 1024 bytes, then tanh of the layer.
constexpr std::string_view kSgd = R"(memfit-graph 1
input %x f32[4,16] input
input %w f32[16,16] parameter
node fc = linear(%x, %w) -> %fc f32[4,16] activation
node grad = matmul(%fc, %x) {trans_a=true} -> %grad f32[16,16] gradient
node sgd = sgd_update(%w, %grad) -> %sgd f32[16,16] parameter
node t = tanh(%fc) -> %t f32[4,16] activation
output %t
update %w <- %sgd
)";

// Four values of 2^62 bytes sum to 2^64: the planner refuses the step before
// any of its sums wraps (it would plan an arena of 0 bytes).
TEST(PlanMemory, RefusesStepsWhoseBytesWouldWrap) {
  Result<Graph> graph = parse_graph(kChain);
  ASSERT_TRUE(graph.is_ok()) << graph.message();
  PlanSizes sizes = plain_sizes(*graph);
  ASSERT_EQ(sizes.value_bytes.size(), 4u);
  for (size_t& bytes : sizes.value_bytes) bytes = size_t{1} << 62;
  for (const bool share : {true, false}) {
    Result<MemoryPlan> plan = plan_memory(*graph, sizes, {.share = share});
    ASSERT_FALSE(plan.is_ok()) << "arena " << plan->arena_bytes;
    EXPECT_NE(plan.message().find("4.00 EiB or more in all"), std::string::npos) << plan.message();
  }
  sizes.value_bytes.assign(4, size_t{1} << 59);  // 2 EiB in all: planned
  Result<MemoryPlan> plan = plan_memory(*graph, sizes, {.share = false});
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  EXPECT_EQ(plan->arena_bytes, size_t{1} << 61);
}

TEST(PlanVerifierTest, AcceptsSlicesOfTheirOwn) {
  expect_ok(make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}}));
}

TEST(PlanVerifierTest, AcceptsLegalInPlaceWrites) {
  // relu over x (its only reader), add over tanh as its input 1: pairs (0 -> 0), (1 -> 0).
  expect_ok(make_case(kChain, {{"x", 0}, {"relu", 0}, {"tanh", 256}, {"add", 256}}));
  expect_ok(make_case(kChain, {{"x", 0}, {"relu", 0}, {"tanh", 256}, {"add", 0}}));
}

TEST(PlanVerifierTest, AcceptsReuseOfDeadBytes) {
  // x is dead after step 0, b after step 2: c and d take their bytes.
  expect_ok(make_case(kSkip, {{"x", 0}, {"a", 256}, {"b", 512}, {"c", 0}, {"d", 512}}));
}

TEST(PlanVerifierTest, AcceptsAnUpdateInPlaceAndAWorkspaceOverDeadBytes) {
  // sgd over w (its own update), t over fc; grad's workspace over x, dead after step 1.
  expect_ok(make_case(
      kSgd, {{"x", 0}, {"w", 256}, {"fc", 1280}, {"grad", 1536}, {"sgd", 256}, {"t", 1280}},
      {{"sgd", {0, 128}}}));
}

TEST(PlanVerifierTest, AcceptsAnInputRepeatedAtPositionsThatAllowInPlace) {
  expect_ok(make_case(R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node sum = add(%a, %a) -> %sum f32[4,16] activation
output %sum
)",
                      {{"x", 0}, {"a", 256}, {"sum", 256}}));
}

TEST(PlanVerifierTest, RejectsOverlappingLiveValues) {
  expect_error(make_case(R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node b = sigmoid(%x) -> %b f32[4,16] activation
node c = add(%a, %b) -> %c f32[4,16] activation
output %c
)",
                         {{"x", 0}, {"a", 256}, {"b", 384}, {"c", 0}}),
               "node 'c' reads %a [256, 512) at step 2, but node 'b' overwrote [384, 512) with "
               "%b [384, 640) at step 1");
}

TEST(PlanVerifierTest, RejectsAReadAfterTheBytesWereReused) {
  expect_error(make_case(kSkip, {{"x", 0}, {"a", 256}, {"b", 512}, {"c", 256}, {"d", 0}}),
               "node 'd' reads %a [256, 512) at step 3, but node 'c' overwrote [256, 512) with "
               "%c [256, 512) at step 2");
}

TEST(PlanVerifierTest, RejectsAWorkspaceOverAValueReadLater) {
  expect_error(make_case(kSkip, {{"x", 0}, {"a", 256}, {"b", 512}, {"c", 768}, {"d", 0}},
                         {{"c", {256, 64}}}),
               "node 'd' reads %a [256, 512) at step 3, but node 'c' overwrote [256, 320) with "
               "its workspace at step 2");
}

TEST(PlanVerifierTest, RejectsAnInPlaceWriteWithoutAnOpTablePair) {
  expect_error(make_case(R"(memfit-graph 1
input %x f32[4,16] input
node g = gelu(%x) -> %g f32[4,16] activation
output %g
)",
                         {{"x", 0}, {"g", 0}}),
               "node 'g' writes %g [0, 256) over its input %x [0, 256) at step 0, but the op "
               "table lists no in-place pair (input 0 -> output 0) for gelu");
}

TEST(PlanVerifierTest, RejectsAnUpdateWrittenOverTheGradient) {
  // sgd_update allows (0 -> 0) and (2 -> 1), not w' over g.
  expect_error(
      make_case(kSgd,
                {{"x", 0}, {"w", 256}, {"fc", 1280}, {"grad", 1536}, {"sgd", 1536}, {"t", 2560}}),
      "node 'sgd' writes %sgd [1536, 2560) over its input %grad [1536, 2560) at step 2, "
      "but the op table lists no in-place pair (input 1 -> output 0) for sgd_update");
}

TEST(PlanVerifierTest, RejectsAnInputRepeatedAtAPositionWithoutAPair) {
  // relu_grad allows (0 -> 0) only: input 1 is read while the output is written.
  expect_error(make_case(R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node da = relu_grad(%a, %a) -> %da f32[4,16] gradient
output %da
)",
                         {{"x", 0}, {"a", 256}, {"da", 256}}),
               "(input 1 -> output 0) for relu_grad");
}

TEST(PlanVerifierTest, RejectsAnInPlaceWriteWhoseInputIsReadLater) {
  expect_error(make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 256}, {"add", 512}}),
               "node 'add' reads %relu [256, 512) at step 2, but node 'tanh' wrote %tanh "
               "[256, 512) in place over it at step 1");
}

TEST(PlanVerifierTest, RejectsAnInPlaceWriteAtAnotherOffset) {
  expect_error(make_case(kChain, {{"x", 0}, {"relu", 0}, {"tanh", 64}, {"add", 512}}),
               "node 'tanh' writes %tanh [64, 320) over its input %relu [0, 256) at step 1: an "
               "output written in place must start where its input does");
}

TEST(PlanVerifierTest, RejectsInPlaceAcrossLayouts) {
  // The same bytes (8 channels fill a block of c8), but relu would read the
  // elements in one order and write them in another.
  expect_error(make_case(R"(memfit-graph 1
input %x f32[2,8,2,2] input
node b = reorder(%x) -> %b f32[2,8,2,2]@c8 activation
node r = relu(%b) -> %r f32[2,8,2,2] activation
output %r
)",
                         {{"x", 0}, {"b", 256}, {"r", 256}}),
               "node 'r' writes %r [256, 512) over its input %b [256, 512) at step 1: in place "
               "needs the same element count, dtype and layout, but the input is "
               "f32[2,8,2,2]@c8 and the output f32[2,8,2,2]");
}

TEST(PlanVerifierTest, RejectsInPlaceOverABroadcastOperand) {
  // add lists (1 -> 0), but s (16) is broadcast: its elements are read after y overwrites them.
  expect_error(make_case(R"(memfit-graph 1
input %x f32[4,16] input
node s = reduce_sum(%x) {axes=[0]} -> %s f32[16] activation
node y = add(%x, %s) -> %y f32[4,16] activation
output %y
)",
                         {{"x", 0}, {"s", 256}, {"y", 256}}),
               "node 'y' writes %y [256, 512) over its input %s [256, 320) at step 1: in place "
               "needs the same element count, dtype and layout, but the input is f32[16] and the output "
               "f32[4,16]");
}

TEST(PlanVerifierTest, RejectsAWorkspaceOverlappingAnInput) {
  expect_error(
      make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}},
                {{"tanh", {320, 64}}}),
      "the workspace of node 'tanh' [320, 384) overlaps its input %relu [256, 512) at step 1");
}

TEST(PlanVerifierTest, RejectsAWorkspaceOverlappingAnOutput) {
  expect_error(make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}},
                         {{"tanh", {640, 128}}}),
               "node 'tanh' writes %tanh [512, 768) at step 1 over its own workspace [640, 768)");
}

TEST(PlanVerifierTest, RejectsOutputsOverlappingEachOther) {
  expect_error(make_case(R"(memfit-graph 1
input %w f32[16] parameter
input %g f32[16] gradient
input %v f32[16] optimizer_state
node sgd = sgd_update(%w, %g, %v) {lr=0.1 momentum=0.9} -> %sgd.0 f32[16] parameter, %sgd.1 f32[16] optimizer_state
update %w <- %sgd.0
update %v <- %sgd.1
)",
                         {{"w", 0}, {"g", 64}, {"v", 128}, {"sgd.0", 192}, {"sgd.1", 192}}),
               "node 'sgd' writes %sgd.1 [192, 256) at step 0 over its other output %sgd.0 "
               "[192, 256)");
}

TEST(PlanVerifierTest, RejectsAnUnreadOutputOverAnInput) {
  // The batch mean is never read, but the kernel writes it while it reads x.
  expect_error(make_case(R"(memfit-graph 1
input %x f32[4,16] input
input %gamma f32[16] parameter
input %beta f32[16] parameter
input %mean f32[16] state
input %var f32[16] state
node bn = batch_norm(%x, %gamma, %beta, %mean, %var) -> %bn.0 f32[4,16] activation, %bn.1 f32[16] activation, %bn.2 f32[16] activation, %bn.3 f32[16] state, %bn.4 f32[16] state
output %bn.0
update %mean <- %bn.3
update %var <- %bn.4
)",
                         {{"x", 0},
                          {"gamma", 256},
                          {"beta", 320},
                          {"mean", 384},
                          {"var", 448},
                          {"bn.0", 512},
                          {"bn.1", 0},
                          {"bn.2", 768},
                          {"bn.3", 832},
                          {"bn.4", 896}}),
               "node 'bn' writes %bn.1 [0, 64) over its input %x [0, 256) at step 0, but the op "
               "table lists no in-place pair (input 0 -> output 1) for batch_norm");
}

TEST(PlanVerifierTest, RejectsOverlappingGraphInputs) {
  expect_error(make_case(R"(memfit-graph 1
input %x f32[4,16] input
input %y i32[4] label
node loss = softmax_cross_entropy(%x, %y) -> %loss f32[] activation
output %loss
)",
                         {{"x", 0}, {"y", 192}, {"loss", 256}}),
               "graph inputs %x [0, 256) and %y [192, 256) overlap; both are written before the "
               "first node");
}

TEST(PlanVerifierTest, RejectsASliceTooSmall) {
  Case c = make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}});
  c.plan.value_slices[index_of(c.graph, "tanh")].bytes = 192;
  expect_error(c, "%tanh [512, 704) has 192 bytes, but needs 256");
}

TEST(PlanVerifierTest, RejectsAWorkspaceTooSmall) {
  Case c = make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}},
                     {{"tanh", {0, 64}}});
  c.sizes.workspace_bytes[1] = 100;
  expect_error(c, "the workspace of node 'tanh' [0, 64) has 64 bytes, but needs 100");
}

TEST(PlanVerifierTest, RejectsAMisalignedSlice) {
  expect_error(make_case(kChain, {{"x", 0}, {"relu", 288}, {"tanh", 576}, {"add", 832}}),
               "%relu [288, 544) is not aligned to 64 bytes");
  Case c = make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}});
  c.plan.value_slices[index_of(c.graph, "add")].bytes = 260;
  c.plan.arena_bytes = 1028;
  expect_error(c, "%add [768, 1028) is not aligned to 64 bytes");
}

TEST(PlanVerifierTest, RejectsAnArenaOverBudget) {
  const Case c = make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}});
  expect_error(c, "the plan needs 1024 bytes, over the budget of 1000", 1000);
  expect_ok(c, 1024);
}

TEST(PlanVerifierTest, RejectsASlicePastTheArena) {
  Case c = make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}});
  c.plan.arena_bytes = 768;
  expect_error(c, "%add [768, 1024) ends past the arena of 768 bytes");
}

TEST(PlanVerifierTest, RejectsAnArenaLargerThanItsSlices) {
  Case c = make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}});
  c.plan.arena_bytes = 2048;
  expect_error(c, "the plan claims an arena of 2048 bytes, but its slices end at 1024");
}

TEST(PlanVerifierTest, RejectsAPlanOfAnotherGraph) {
  Case c = make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}});
  c.plan.value_slices.pop_back();
  expect_error(c,
               "the plan has 3 value slices and 3 workspace slices for a graph of 4 values and "
               "3 nodes");
  c = make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}});
  c.sizes.workspace_bytes.push_back(0);
  expect_error(c, "the sizes list 4 values and 4 workspaces for a graph of 4 values and 3 nodes");
}

TEST(PlanVerifierTest, RejectsAnInvalidGraph) {
  Case c = make_case(kChain, {{"x", 0}, {"relu", 256}, {"tanh", 512}, {"add", 768}});
  c.graph.node(NodeId(0)).inputs[0] = c.graph.find_value("add");
  expect_error(c, "the graph of the plan is invalid: node 'relu' (relu): input 0 (%add)");
}

TEST(PlanVerifierTest, RejectsAnUpdateDestroyedBeforeTheEnd) {
  expect_error(
      make_case(kSgd,
                {{"x", 0}, {"w", 256}, {"fc", 1280}, {"grad", 1536}, {"sgd", 256}, {"t", 256}}),
      "%sgd [256, 1280), the update of %w, must hold its value at the end of the step, but node "
      "'t' overwrote [256, 512) with %t [256, 512) at step 3");
}

TEST(PlanVerifierTest, RejectsAParameterOverwritten) {
  expect_error(
      make_case(kSgd,
                {{"x", 0}, {"w", 256}, {"fc", 1280}, {"grad", 1536}, {"sgd", 2560}, {"t", 256}}),
      "parameter %w [256, 1280) must hold its value at the end of the step, but node 't' "
      "overwrote [256, 512) with %t [256, 512) at step 3 (only its update %sgd may replace it, "
      "in place)");
  // Without the update, even sgd_update may not write over w.
  std::string text(kSgd);
  text.erase(text.find("update %w"));
  expect_error(
      make_case(text,
                {{"x", 0}, {"w", 256}, {"fc", 1280}, {"grad", 1536}, {"sgd", 256}, {"t", 1280}}),
      "parameter %w [256, 1280) must hold its value at the end of the step, but node 'sgd' "
      "wrote %sgd [256, 1280) in place over it at step 2 (it has no update)");
}

TEST(PlanVerifierTest, RejectsAParameterReadAfterItsUpdateWasWrittenOverIt) {
  std::string text(kSgd);
  text.insert(text.find("output"), "node late = scale(%w) -> %late f32[16,16] activation\n");
  expect_error(make_case(text, {{"x", 0},
                                {"w", 256},
                                {"fc", 1280},
                                {"grad", 1536},
                                {"sgd", 256},
                                {"t", 1280},
                                {"late", 1536}}),
               "node 'late' reads %w [256, 1280) at step 4, but node 'sgd' wrote %sgd [256, 1280) "
               "in place over it at step 2");
}

TEST(PlanVerifierTest, RejectsStateReplacedInPlaceByAValueOtherThanItsUpdate) {
  // Accumulate-and-apply: the sum may not take the accumulator's bytes, whose
  // update is the reset.
  expect_error(
      make_case(R"(memfit-graph 1
input %w f32[16] parameter
input %g f32[16] gradient
input %acc f32[16] optimizer_state
node sum = add(%acc, %g) -> %sum f32[16] gradient
node zero = fill() {value=0 shape=[16]} -> %zero f32[16] optimizer_state
node sgd = sgd_update(%w, %sum) -> %sgd f32[16] parameter
update %acc <- %zero
update %w <- %sgd
)",
                {{"w", 0}, {"g", 64}, {"acc", 128}, {"sum", 128}, {"zero", 192}, {"sgd", 0}}),
      "optimizer_state %acc [128, 192) must hold its value at the end of the step, but "
      "node 'sum' wrote %sum [128, 192) in place over it at step 0 (only its update "
      "%zero may replace it, in place)");
}

TEST(PlanVerifierTest, RejectsAGraphOutputOverwritten) {
  expect_error(make_case(R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node b = tanh(%a) -> %b f32[4,16] activation
output %a
output %b
)",
                         {{"x", 0}, {"a", 256}, {"b", 256}}),
               "graph output %a [256, 512) must hold its value at the end of the step, but node "
               "'b' wrote %b [256, 512) in place over it at step 1");
}

// Swapping: %a is copied to the host (%h) after its forward use, its device
// range is reused once swap_wait says the copy has completed, and it comes
// back as %back for the backward reader. Every tensor f32[4,16]: 256 bytes.
constexpr std::string_view kSwap = R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node b = tanh(%a) -> %b f32[4,16] activation
node out = to_host(%a) -> %h f32[4,16] activation
node c = sigmoid(%b) -> %c f32[4,16] activation
node wait = swap_wait(%a, %h) ->
node d = tanh(%c) -> %d f32[4,16] activation
node in = to_device(%h) -> %back f32[4,16] activation
node e = mul(%d, %back) -> %e f32[4,16] activation
output %e
)";

// make_case with the named values moved to the host pool; the pool sizes follow.
Case make_swap_case(std::string_view text, const std::map<std::string, size_t>& offsets,
                    const std::vector<std::string>& host) {
  Case c = make_case(text, offsets);
  c.plan.arena_bytes = 0;
  for (size_t v = 0; v < c.graph.num_values(); ++v) {
    Slice& slice = c.plan.value_slices[v];
    const std::string& name = c.graph.values()[v].name;
    const bool on_host = std::find(host.begin(), host.end(), name) != host.end();
    if (on_host) slice.pool = Pool::host;
    size_t& pool = on_host ? c.plan.host_bytes : c.plan.arena_bytes;
    pool = std::max(pool, slice.end());
  }
  return c;
}

TEST(PlanVerifierSwapTest, AcceptsReuseAfterTheSwapWait) {
  // %d takes %a's bytes after the wait; %back takes %b's, dead after %c.
  expect_ok(make_swap_case(kSwap, {{"x", 0}, {"a", 256}, {"b", 512}, {"h", 0}, {"c", 768},
                                   {"d", 256}, {"back", 512}, {"e", 0}},
                           {"h"}));
}

TEST(PlanVerifierSwapTest, RejectsReuseBeforeTheCopyCompletes) {
  // %c takes %a's bytes while the copy to_host(%a) may still be reading them.
  expect_error(make_swap_case(kSwap, {{"x", 0}, {"a", 256}, {"b", 512}, {"h", 0}, {"c", 256},
                                      {"d", 768}, {"back", 512}, {"e", 0}},
                              {"h"}),
               "node 'wait' reads %a [256, 512) at step 4, but node 'c' overwrote [256, 512) "
               "with %c [256, 512) at step 3");
}

TEST(PlanVerifierSwapTest, RejectsASwapInOverAValueStillRead) {
  // The copy to_device writes %back from its node on: %d is read after it.
  expect_error(make_swap_case(kSwap, {{"x", 0}, {"a", 256}, {"b", 512}, {"h", 0}, {"c", 768},
                                      {"d", 256}, {"back", 256}, {"e", 0}},
                              {"h"}),
               "node 'e' reads %d [256, 512) at step 7, but node 'in' overwrote [256, 512) with "
               "%back [256, 512) at step 6");
}

TEST(PlanVerifierSwapTest, RejectsAHostCopyOverwrittenBeforeItsSwapIn) {
  constexpr std::string_view two = R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node out = to_host(%a) -> %h f32[4,16] activation
node b = tanh(%a) -> %b f32[4,16] activation
node out2 = to_host(%b) -> %h2 f32[4,16] activation
node wait = swap_wait(%a, %h) ->
node wait2 = swap_wait(%b, %h2) ->
node in = to_device(%h) -> %back f32[4,16] activation
node in2 = to_device(%h2) -> %back2 f32[4,16] activation
node e = mul(%back, %back2) -> %e f32[4,16] activation
output %e
)";
  expect_error(make_swap_case(two, {{"x", 0}, {"a", 256}, {"b", 512}, {"h", 0}, {"h2", 0},
                                    {"back", 256}, {"back2", 512}, {"e", 0}},
                              {"h", "h2"}),
               "node 'wait' reads %h host [0, 256) at step 4, but node 'out2' overwrote [0, 256) "
               "with %h2 host [0, 256) at step 3");
}

TEST(PlanVerifierSwapTest, RejectsAToHostWithoutASwapWait) {
  constexpr std::string_view unwaited = R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node out = to_host(%a) -> %h f32[4,16] activation
node in = to_device(%h) -> %back f32[4,16] activation
output %back
)";
  expect_error(make_swap_case(unwaited, {{"x", 0}, {"a", 256}, {"h", 0}, {"back", 0}}, {"h"}),
               "node 'out' copies %a to the host, but no swap_wait says when the copy has "
               "completed");
}

TEST(PlanVerifierSwapTest, RejectsValuesInTheWrongPool) {
  // A host copy planned in the device arena.
  expect_error(make_swap_case(kSwap, {{"x", 0}, {"a", 256}, {"b", 512}, {"h", 1024}, {"c", 768},
                                      {"d", 256}, {"back", 512}, {"e", 0}},
                              {}),
               "%h, made by node 'out', is in the device arena; only outputs of to_host live in "
               "the host pool");
  // A compute node reading the host pool: mul reads %h instead of %back.
  constexpr std::string_view reads_host = R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node out = to_host(%a) -> %h f32[4,16] activation
node wait = swap_wait(%a, %h) ->
node e = mul(%x, %h) -> %e f32[4,16] activation
output %e
)";
  expect_error(make_swap_case(reads_host, {{"x", 0}, {"a", 256}, {"h", 0}, {"e", 256}}, {"h"}),
               "node 'e' reads %h from the host pool; only to_device copies it back");
}

// A swap_wait that names a value other than the one its copy reads: its
// wait says nothing about %a's copy, so %a's bytes could be reused while the
// copy reads them. Only the check that pairs a wait with its copy rejects it.
TEST(PlanVerifierSwapTest, RejectsASwapWaitForAnotherValue) {
  constexpr std::string_view other_value = R"(memfit-graph 1
input %x f32[4,16] input
node a = relu(%x) -> %a f32[4,16] activation
node b = tanh(%a) -> %b f32[4,16] activation
node out = to_host(%a) -> %h f32[4,16] activation
node wait = swap_wait(%b, %h) ->
node in = to_device(%h) -> %back f32[4,16] activation
node e = mul(%b, %back) -> %e f32[4,16] activation
output %e
)";
  expect_error(make_swap_case(other_value, {{"x", 0}, {"a", 256}, {"b", 512}, {"h", 0},
                                            {"back", 768}, {"e", 0}},
                              {"h"}),
               "node 'wait' must wait for a to_host of %b, but %h is not its output");
}

// A graph input planned in the host pool, read only by a to_device (which
// may read the host pool): only the graph-input check rejects it.
TEST(PlanVerifierSwapTest, RejectsAGraphInputInTheHostPool) {
  constexpr std::string_view input_on_host = R"(memfit-graph 1
input %x f32[4,16] input
node in = to_device(%x) -> %y f32[4,16] activation
output %y
)";
  expect_error(make_swap_case(input_on_host, {{"x", 0}, {"y", 0}}, {"x"}),
               "graph input %x is in the host pool; graph inputs are copied onto the device");
}

TEST(PlanVerifierSwapTest, RejectsAHostPoolSizeThatDisagrees) {
  Case c = make_swap_case(kSwap, {{"x", 0}, {"a", 256}, {"b", 512}, {"h", 0}, {"c", 768},
                                  {"d", 256}, {"back", 512}, {"e", 0}},
                          {"h"});
  c.plan.host_bytes = 512;
  expect_error(c, "the plan claims a host pool of 512 bytes, but its host slices end at 256");
}

TEST(PlannerVerifiedTest, PlansTheSwapGraphInTwoPools) {
  const Result<Graph> graph = parse_graph(kSwap);
  ASSERT_TRUE(graph.is_ok()) << graph.message();
  const PlanSizes sizes = plain_sizes(*graph);
  const Result<MemoryPlan> plan = plan_memory(*graph, sizes);
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  EXPECT_EQ(plan->host_bytes, 256u);
  EXPECT_EQ(plan->value_slices[graph->find_value("h").idx()].pool, Pool::host);
  const Status status = verify_plan(*graph, sizes, *plan);
  EXPECT_TRUE(status.is_ok()) << status.message();
}

// The planner on the smallest graphs of the bugs the random graphs found.
void expect_planned_ok(std::string_view text, const PlanSizes* sizes = nullptr) {
  const Result<Graph> graph = parse_graph(text);
  ASSERT_TRUE(graph.is_ok()) << graph.message();
  const PlanSizes planned = sizes ? *sizes : plain_sizes(*graph);
  const Result<MemoryPlan> plan = plan_memory(*graph, planned);
  ASSERT_TRUE(plan.is_ok()) << plan.message();
  const Status status = verify_plan(*graph, planned, *plan);
  EXPECT_TRUE(status.is_ok()) << status.message();
}

TEST(PlannerVerifiedTest, KeepsAParameterThatIsAGraphOutput) {
  // The caller reads %w after the step: its update may not take its bytes.
  expect_planned_ok(R"(memfit-graph 1
input %w f32[16] parameter
input %g f32[16] gradient
node sgd = sgd_update(%w, %g) -> %sgd f32[16] parameter
output %w
update %w <- %sgd
)");
}

TEST(PlannerVerifiedTest, WritesNothingInPlaceOverABroadcastOperand) {
  // A layout pads %s to the bytes of %y, but y[1] = x[1] + s[0] reads s[0]
  // after y[0] overwrote it.
  const PlanSizes padded{{8, 8, 8}, {0, 0}};
  expect_planned_ok(R"(memfit-graph 1
input %x f32[2,1] input
node s = reduce_sum(%x) {axes=[0] keepdims=true} -> %s f32[1,1] activation
node y = add(%x, %s) -> %y f32[2,1] activation
output %x
output %y
)",
                    &padded);
}

// Planner plans of random graphs, under three sets of options.
struct Planned {
  const char* name;
  PlanOptions options;
};
const Planned kOptions[] = {
    {"default", {}}, {"inplace=false", {.inplace = false}}, {"share=false", {.share = false}}};

std::string describe(uint64_t seed, const char* options, const Graph& graph) {
  return "seed " + std::to_string(seed) + ", options " + options + ", graph:\n" +
         print_graph(graph);
}

// Sizes of half the graphs from the planner's plain_sizes, of the other half
// padded and with workspaces.
PlanSizes sizes_for(const Graph& graph, uint64_t seed) {
  return seed % 2 == 0 ? plain_sizes(graph) : testing::random_sizes(graph, seed);
}

TEST(PlanVerifierRandomTest, PlannerPlansOfRandomGraphsVerify) {
  constexpr uint64_t kGraphs = 10000;
  size_t in_place_writes = 0;
  size_t shared_arenas = 0;
  for (uint64_t seed = 0; seed < kGraphs; ++seed) {
    const Graph graph = testing::random_graph(seed);
    const Status valid = verify_graph(graph);
    ASSERT_TRUE(valid.is_ok()) << valid.message() << "\n" << describe(seed, "", graph);
    const PlanSizes sizes = sizes_for(graph, seed);
    size_t arenas[std::size(kOptions)] = {};
    for (size_t o = 0; o < std::size(kOptions); ++o) {
      const Result<MemoryPlan> plan = plan_memory(graph, sizes, kOptions[o].options);
      ASSERT_TRUE(plan.is_ok()) << plan.message() << "\n"
                                << describe(seed, kOptions[o].name, graph);
      const Status status = verify_plan(graph, sizes, *plan);
      ASSERT_TRUE(status.is_ok()) << status.message() << "\n"
                                  << describe(seed, kOptions[o].name, graph);
      arenas[o] = plan->arena_bytes;
      if (o != 0) continue;
      // The arena is exactly what the budget must allow.
      EXPECT_TRUE(verify_plan(graph, sizes, *plan, plan->arena_bytes).is_ok());
      EXPECT_FALSE(verify_plan(graph, sizes, *plan, plan->arena_bytes - 1).is_ok());
      for (const Node& node : graph.nodes()) {
        for (ValueId out : node.outputs) {
          const Slice& s = plan->value_slices[out.idx()];
          in_place_writes += std::any_of(node.inputs.begin(), node.inputs.end(), [&](ValueId in) {
            const Slice& t = plan->value_slices[in.idx()];
            return s.bytes > 0 && t.bytes > 0 && s.offset == t.offset;
          });
        }
      }
    }
    shared_arenas += arenas[0] < arenas[2];
  }
  // The graphs exercise what the verifier checks: in-place writes and shared bytes.
  EXPECT_GT(in_place_writes, kGraphs);
  EXPECT_GT(shared_arenas, kGraphs / 2);
}

// The step from which each value's bytes must hold it, and the last step that
// needs them (graph outputs, update values and persistent inputs: the end),
// computed here from the graph alone.
struct Needs {
  std::vector<int32_t> from;
  std::vector<int32_t> until;
  std::vector<ValueId> next_of;  // the update of a state
};

Needs needs_of(const Graph& graph) {
  const auto end = static_cast<int32_t>(graph.num_nodes());
  Needs needs{std::vector<int32_t>(graph.num_values(), -1),
              std::vector<int32_t>(graph.num_values(), -1),
              std::vector<ValueId>(graph.num_values())};
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const Value& value = graph.values()[v];
    if (value.producer.valid()) needs.from[v] = needs.until[v] = value.producer.index;
    if (!value.producer.valid() && is_persistent(value.role)) needs.until[v] = end;
  }
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    for (ValueId in : graph.nodes()[n].inputs) {
      needs.until[in.idx()] = std::max(needs.until[in.idx()], static_cast<int32_t>(n));
    }
  }
  for (ValueId v : graph.outputs()) needs.until[v.idx()] = end;
  for (const StateUpdate& u : graph.updates()) {
    needs.until[u.next.idx()] = end;
    needs.next_of[u.state.idx()] = u.next;
  }
  return needs;
}

// The arena a plan needs once a slice moved: the largest slice end.
size_t largest_end(const MemoryPlan& plan) {
  size_t end = 0;
  for (const auto* slices : {&plan.value_slices, &plan.workspace_slices}) {
    for (const Slice& slice : *slices) end = std::max(end, slice.end());
  }
  return end;
}

// Moving a value a onto the slice of a value b that is written before a and
// needed after a is written must fail, and the message must name a; so must
// moving a node's workspace onto a value needed after the node.
TEST(PlanVerifierRandomTest, MovingASliceOntoALiveValueIsCaught) {
  constexpr uint64_t kGraphs = 2000;
  size_t moved_values = 0;
  size_t moved_workspaces = 0;
  for (uint64_t seed = 0; seed < kGraphs; ++seed) {
    const Graph graph = testing::random_graph(seed);
    const PlanSizes sizes = testing::random_sizes(graph, seed);
    const Result<MemoryPlan> plan = plan_memory(graph, sizes);
    ASSERT_TRUE(plan.is_ok()) << plan.message();
    // A plan refused as it is fails the test above; moving its slices shows nothing.
    if (!verify_plan(graph, sizes, *plan).is_ok()) continue;
    const Needs needs = needs_of(graph);
    const std::vector<Slice>& slices = plan->value_slices;
    std::mt19937_64 rng(seed);
    std::vector<std::pair<size_t, size_t>> pairs;  // (a, b)
    for (size_t a = 0; a < graph.num_values(); ++a) {
      for (size_t b = 0; b < graph.num_values(); ++b) {
        if (slices[a].bytes > 0 && slices[b].bytes > 0 && needs.from[b] < needs.from[a] &&
            needs.until[b] > needs.from[a] && needs.next_of[b].index != static_cast<int32_t>(a)) {
          pairs.emplace_back(a, b);
        }
      }
    }
    if (!pairs.empty()) {
      const auto [a, b] = pairs[rng() % pairs.size()];
      MemoryPlan moved = *plan;
      moved.value_slices[a].offset = slices[b].offset;
      moved.arena_bytes = largest_end(moved);
      const Status status = verify_plan(graph, sizes, moved);
      const std::string name = "%" + graph.values()[a].name + " ";
      ASSERT_FALSE(status.is_ok()) << "moved " << name << "onto %" << graph.values()[b].name << "\n"
                                   << describe(seed, "default", graph);
      EXPECT_NE(status.message().find(name), std::string::npos) << status.message();
      ++moved_values;
    }
    std::vector<std::pair<size_t, size_t>> workspaces;  // (node, b)
    for (size_t n = 0; n < graph.num_nodes(); ++n) {
      if (plan->workspace_slices[n].bytes == 0) continue;
      for (size_t b = 0; b < graph.num_values(); ++b) {
        const auto step = static_cast<int32_t>(n);
        if (slices[b].bytes > 0 && needs.from[b] < step && needs.until[b] > step) {
          workspaces.emplace_back(n, b);
        }
      }
    }
    if (!workspaces.empty()) {
      const auto [n, b] = workspaces[rng() % workspaces.size()];
      MemoryPlan moved = *plan;
      moved.workspace_slices[n].offset = slices[b].offset;
      moved.arena_bytes = largest_end(moved);
      const Status status = verify_plan(graph, sizes, moved);
      ASSERT_FALSE(status.is_ok()) << "moved the workspace of node '" << graph.nodes()[n].name
                                   << "' onto %" << graph.values()[b].name << "\n"
                                   << describe(seed, "default", graph);
      EXPECT_NE(status.message().find("workspace"), std::string::npos) << status.message();
      ++moved_workspaces;
    }
  }
  EXPECT_GT(moved_values, kGraphs * 9 / 10);
  EXPECT_GT(moved_workspaces, kGraphs / 2);
}

}  // namespace
}  // namespace memfit
