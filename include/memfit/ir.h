// The graph IR: dense ids, static shapes, nodes kept in topological order.
// One Graph is one training step: forward, backward and optimizer updates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "memfit/attrs.h"
#include "memfit/op_list.h"
#include "memfit/status.h"

namespace memfit {

// Strong integer ids: a ValueId cannot be passed where a NodeId is expected.
template <class Tag>
struct Id {
  int32_t index = -1;
  constexpr Id() = default;
  constexpr explicit Id(int32_t i) : index(i) {}
  constexpr bool valid() const { return index >= 0; }
  constexpr size_t idx() const { return static_cast<size_t>(index); }
  friend constexpr bool operator==(Id a, Id b) { return a.index == b.index; }
  friend constexpr auto operator<=>(Id a, Id b) { return a.index <=> b.index; }
};
using ValueId = Id<struct ValueTag>;
using NodeId = Id<struct NodeTag>;

enum class DType : uint8_t { f32, i32 };
size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);

// What a value is for; the planner reports memory by role.
enum class Role : uint8_t {
  input,            // a batch of data
  label,            // a batch of targets
  parameter,        // trained weights
  optimizer_state,  // momentum and moment buffers
  state,            // model state that is not trained: batch-norm running statistics
  activation,       // produced by forward nodes
  gradient,         // produced by backward nodes
  temporary,        // anything else a node produces
};
std::string_view role_name(Role role);
// Values of these roles persist across steps: they are read at the start of a
// step and replaced by their `updates` entry at its end.
bool is_persistent(Role role);

// Bytes by what they hold: a memory plan's live bytes at the step where they
// peak (MemoryPlan and PlanReport's by_role), grouped by the roles of the
// values that hold them.
struct BytesByRole {
  size_t parameters = 0;
  size_t gradients = 0;
  size_t optimizer_state = 0;  // optimizer moments, accumulators, batch-norm running statistics
  size_t activations = 0;      // inputs, labels, activations and temporaries
  size_t workspace = 0;        // kernel scratch space
};

// The part of a step a node belongs to. The rule (node_phase, src/ir/phase.h):
// a node is `update` if it is an optimizer update, writes a parameter or
// optimizer state, or reads optimizer state (accumulators included);
// `backward` if it writes a gradient; `forward` otherwise, which is exactly
// the nodes of the model's forward graph and their recomputed clones. The
// schedule may interleave them: a memory-aware order runs an update as soon as
// its gradient is complete, and recomputed clones run inside the backward pass.
enum class Phase : uint8_t { forward, backward, update };
std::string_view phase_name(Phase phase);

enum class OpKind : uint8_t {
#define MEMFIT_OP_ENUM(id, attrs, min_inputs, max_inputs) id,
  MEMFIT_OPS(MEMFIT_OP_ENUM)
#undef MEMFIT_OP_ENUM
};
inline constexpr int kNumOps = 0
#define MEMFIT_OP_COUNT(id, attrs, min_inputs, max_inputs) +1
    MEMFIT_OPS(MEMFIT_OP_COUNT)
#undef MEMFIT_OP_COUNT
    ;
std::string_view op_name(OpKind op);
// The op with this name, if any.
Result<OpKind> op_from_name(std::string_view name);

// How many inputs a node of an op takes (its row of op_list.h).
struct Arity {
  int min = 0;
  int max = 0;  // -1: any number
  bool admits(int inputs) const { return inputs >= min && (max < 0 || inputs <= max); }
};
Arity op_arity(OpKind op);

namespace attrs_list {
// std::variant<Ts...>, with T added at the end unless it is one of Ts.
template <class Variant, class T>
struct Add;
template <class... Ts, class T>
struct Add<std::variant<Ts...>, T> {
  using type = std::conditional_t<(std::is_same_v<T, Ts> || ...), std::variant<Ts...>,
                                  std::variant<Ts..., T>>;
};
// Variant with every type of Ts added, each once.
template <class Variant, class... Ts>
struct Distinct {
  using type = Variant;
};
template <class Variant, class T, class... Rest>
struct Distinct<Variant, T, Rest...> : Distinct<typename Add<Variant, T>::type, Rest...> {};
}  // namespace attrs_list

// Every attribute struct of the op list, once each. NoAttrs is first, so a
// default Attrs holds it.
#define MEMFIT_OP_ATTRS_TYPE(id, attrs, min_inputs, max_inputs) , attrs
using Attrs = attrs_list::Distinct<std::variant<NoAttrs> MEMFIT_OPS(MEMFIT_OP_ATTRS_TYPE)>::type;
#undef MEMFIT_OP_ATTRS_TYPE
// The attribute struct of `op`, default-initialized.
Attrs default_attrs(OpKind op);

struct TensorType {
  Shape shape;
  DType dtype = DType::f32;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

// The order of a value's elements in memory. plain: row-major. c8 and c16
// (rank 4 and 5 only): dimension 1, the channels, is split into blocks of 8 or
// 16 channels that are the innermost dimension, and padded with zeros to a
// whole block: oneDNN's nChw8c, nCdhw16c, ... The cpu backend chooses them for
// the values of convolution networks (src/passes/assign_layouts.h). oi8 and
// oi16 (rank 4 and 5, convolution weights (O, I, K...)): dimensions 0 and 1
// are both split into blocks and padded so, the input channel's block outside
// the output channel's: oneDNN's OIhw8i8o (ABcd8b8a), OIdhw16i16o, ... Values
// a host reads or writes are plain, but persistent state, which the executor
// converts as it loads and stores it (pack_layout, unpack_layout).
enum class Layout : uint8_t { plain, c8, c16, oi8, oi16 };
std::string_view layout_name(Layout layout);
Result<Layout> layout_from_name(std::string_view name);
// Elements per block: 1 for plain.
int64_t layout_block(Layout layout);
// Whether `layout` is one of the weights' layouts (oi8, oi16).
bool is_weight_layout(Layout layout);
// The elements stored for `shape` in `layout`, padding included.
int64_t stored_elements(const Shape& shape, Layout layout);
// `plain` (num_elements(shape) floats, row-major) into `stored`
// (stored_elements(shape, layout) floats) in `layout`, padding zeroed; and back.
void pack_layout(const float* plain, const Shape& shape, Layout layout, float* stored);
void unpack_layout(const float* stored, const Shape& shape, Layout layout, float* plain);

int64_t num_elements(const Shape& shape);
std::string shape_string(const Shape& shape);     // "[2,3]"
std::string type_string(const TensorType& type);  // "f32[2,3]"

struct Value {
  std::string name;  // unique within a graph
  TensorType type;
  Role role = Role::activation;
  NodeId producer;        // invalid for graph inputs
  int output_index = -1;  // which output of the producer
  Layout layout = Layout::plain;
  int64_t elements() const { return num_elements(type.shape); }
  // The bytes the value occupies: its elements in its layout, padding included.
  size_t bytes() const {
    return static_cast<size_t>(stored_elements(type.shape, layout)) * dtype_size(type.dtype);
  }
};

struct Node {
  OpKind op{};
  std::string name;  // unique within a graph
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
};

// After a step, the buffer of `next` becomes the value of `state` for the next step.
struct StateUpdate {
  ValueId state;
  ValueId next;
};

class Graph {
 public:
  // A value with no producer: an input, label, parameter or state.
  ValueId add_input(std::string name, TensorType type, Role role);
  void mark_output(ValueId value) { outputs_.push_back(value); }
  void add_update(ValueId state, ValueId next) { updates_.push_back({state, next}); }
  void set_outputs(std::vector<ValueId> outputs) { outputs_ = std::move(outputs); }
  void set_updates(std::vector<StateUpdate> updates) { updates_ = std::move(updates); }

  const Value& value(ValueId id) const { return values_.at(id.idx()); }
  Value& value(ValueId id) { return values_.at(id.idx()); }
  const Node& node(NodeId id) const { return nodes_.at(id.idx()); }
  Node& node(NodeId id) { return nodes_.at(id.idx()); }
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  // Values kept to the end of the step and returned to the caller (the loss).
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const std::vector<StateUpdate>& updates() const { return updates_; }
  size_t num_values() const { return values_.size(); }
  size_t num_nodes() const { return nodes_.size(); }

  // Lookup by name (the first value of that name); invalid id when absent.
  ValueId find_value(std::string_view name) const;
  // Names not used yet by a value (or a node), built from `base`. Values and
  // nodes have separate name spaces.
  std::string unique_value_name(std::string_view base) const;
  std::string unique_node_name(std::string_view base) const;

  // Raw insertion, without shape inference: a node is appended after all
  // present ones, with its output values already added. The text parser
  // builds graphs with them, and add_node (src/ops/typed_graph.h), which
  // types a node's outputs by the op table's shape inference.
  ValueId add_value_raw(Value value);
  NodeId add_node_raw(Node node);

 private:
  // Names to ids, built on the first lookup (find_value, unique_*_name,
  // add_input) and kept up to date from then on. Passes copy and rebuild
  // large graphs, most of them never looking a name up: building the index
  // for each was most of planning's time on long unrolled sequences. So a
  // copy starts without one (it builds its own if asked), and a move takes
  // it along. A lookup on a const graph may run on several threads: `mutex`
  // guards the index and the suffixes.
  struct NameIndex {
    NameIndex() = default;
    NameIndex(const NameIndex&) {}
    NameIndex& operator=(const NameIndex&);
    NameIndex(NameIndex&& other) noexcept { *this = std::move(other); }
    NameIndex& operator=(NameIndex&& other) noexcept;

    std::mutex mutex;
    bool built = false;
    std::unordered_map<std::string, int32_t> values, nodes;
    // The next suffix to try for a base name (unique_*_name's search).
    std::unordered_map<std::string, int32_t> value_suffixes, node_suffixes;
  };
  // Builds the name index if it is not built yet.
  void index_names() const;

  // First, so that a copy assignment drops it before the values change: a
  // copy that fails halfway leaves it unbuilt, not stale.
  mutable NameIndex names_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> outputs_;
  std::vector<StateUpdate> updates_;
};

// The text form of a graph: print_graph(parse_graph(s)) == s for every printed graph.
std::string print_graph(const Graph& graph);
// `name` as the text form writes it: bare when made of letters, digits and
// `._-/:`, else in double quotes with \" \\ and \xHH escapes (plain ASCII).
std::string quoted_name(std::string_view name);
Result<Graph> parse_graph(std::string_view text);

}  // namespace memfit
