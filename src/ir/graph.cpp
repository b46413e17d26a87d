#include <algorithm>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "memfit/ir.h"

namespace memfit {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::i32:
      return 4;
  }
  MEMFIT_CHECK(false);
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::i32:
      return "i32";
  }
  MEMFIT_CHECK(false);
  return "";
}

std::string_view role_name(Role role) {
  switch (role) {
    case Role::input:
      return "input";
    case Role::label:
      return "label";
    case Role::parameter:
      return "parameter";
    case Role::optimizer_state:
      return "optimizer_state";
    case Role::state:
      return "state";
    case Role::activation:
      return "activation";
    case Role::gradient:
      return "gradient";
    case Role::temporary:
      return "temporary";
  }
  MEMFIT_CHECK(false);
  return "";
}

bool is_persistent(Role role) {
  return role == Role::parameter || role == Role::optimizer_state || role == Role::state;
}

namespace {

constexpr std::string_view kOpNames[] = {
#define MEMFIT_OP_NAME(id, attrs, min_inputs, max_inputs) #id,
    MEMFIT_OPS(MEMFIT_OP_NAME)
#undef MEMFIT_OP_NAME
};

constexpr Arity kArities[] = {
#define MEMFIT_OP_ARITY(id, attrs, min_inputs, max_inputs) {min_inputs, max_inputs},
    MEMFIT_OPS(MEMFIT_OP_ARITY)
#undef MEMFIT_OP_ARITY
};

}  // namespace

std::string_view op_name(OpKind op) {
  MEMFIT_CHECK(static_cast<int>(op) < kNumOps);
  return kOpNames[static_cast<int>(op)];
}

Result<OpKind> op_from_name(std::string_view name) {
  for (int i = 0; i < kNumOps; ++i) {
    if (kOpNames[i] == name) return static_cast<OpKind>(i);
  }
  return Status::error("unknown op '" + std::string(name) + "' (docs/ops.md lists the ops)");
}

Arity op_arity(OpKind op) {
  MEMFIT_CHECK(static_cast<int>(op) < kNumOps);
  return kArities[static_cast<int>(op)];
}

Attrs default_attrs(OpKind op) {
  switch (op) {
#define MEMFIT_OP_ATTRS(id, attrs, min_inputs, max_inputs) \
  case OpKind::id:                                         \
    return attrs{};
    MEMFIT_OPS(MEMFIT_OP_ATTRS)
#undef MEMFIT_OP_ATTRS
  }
  MEMFIT_CHECK(false);
  return NoAttrs{};
}

std::string_view layout_name(Layout layout) {
  switch (layout) {
    case Layout::plain:
      return "plain";
    case Layout::c8:
      return "c8";
    case Layout::c16:
      return "c16";
    case Layout::oi8:
      return "oi8";
    case Layout::oi16:
      return "oi16";
  }
  MEMFIT_CHECK(false);
  return "";
}

Result<Layout> layout_from_name(std::string_view name) {
  for (Layout layout : {Layout::plain, Layout::c8, Layout::c16, Layout::oi8, Layout::oi16}) {
    if (layout_name(layout) == name) return layout;
  }
  return Status::error("unknown layout '" + std::string(name) + "'; use plain, c8, c16, oi8 or oi16");
}

int64_t layout_block(Layout layout) {
  switch (layout) {
    case Layout::plain:
      return 1;
    case Layout::c8:
    case Layout::oi8:
      return 8;
    case Layout::c16:
    case Layout::oi16:
      return 16;
  }
  MEMFIT_CHECK(false);
  return 1;
}

bool is_weight_layout(Layout layout) { return layout == Layout::oi8 || layout == Layout::oi16; }

int64_t stored_elements(const Shape& shape, Layout layout) {
  const int64_t block = layout_block(layout);
  if (block == 1 || shape.size() < 2) return num_elements(shape);
  auto whole_blocks = [block](int64_t n) { return (n + block - 1) / block * block; };
  Shape padded = shape;
  padded[1] = whole_blocks(shape[1]);
  if (is_weight_layout(layout)) padded[0] = whole_blocks(shape[0]);
  return num_elements(padded);
}

int64_t num_elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? "," : "") << shape[i];
  out << ']';
  return out.str();
}

std::string type_string(const TensorType& type) {
  return std::string(dtype_name(type.dtype)) + shape_string(type.shape);
}

Graph::NameIndex& Graph::NameIndex::operator=(const NameIndex&) {
  *this = NameIndex();
  return *this;
}

Graph::NameIndex& Graph::NameIndex::operator=(NameIndex&& other) noexcept {
  if (this == &other) return *this;
  built = std::exchange(other.built, false);
  values = std::exchange(other.values, {});
  nodes = std::exchange(other.nodes, {});
  value_suffixes = std::exchange(other.value_suffixes, {});
  node_suffixes = std::exchange(other.node_suffixes, {});
  return *this;
}

void Graph::index_names() const {
  const std::lock_guard<std::mutex> lock(names_.mutex);
  if (names_.built) return;
  names_.values.reserve(values_.size());
  for (size_t v = 0; v < values_.size(); ++v) {
    names_.values.emplace(values_[v].name, static_cast<int32_t>(v));
  }
  names_.nodes.reserve(nodes_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    names_.nodes.emplace(nodes_[n].name, static_cast<int32_t>(n));
  }
  names_.built = true;
}

ValueId Graph::add_input(std::string name, TensorType type, Role role) {
  MEMFIT_CHECK(!find_value(name).valid());
  Value value;
  value.name = std::move(name);
  value.type = std::move(type);
  value.role = role;
  return add_value_raw(std::move(value));
}

ValueId Graph::find_value(std::string_view name) const {
  index_names();
  auto it = names_.values.find(std::string(name));
  return it == names_.values.end() ? ValueId() : ValueId(it->second);
}

namespace {

// The base name, or else base_1, base_2, ...: the first not taken. Names are
// never given back, so every suffix below the last one returned for a base
// stays taken and the search resumes there (`next`): a name used at every
// step of an unrolled network costs O(1), not O(its uses).
std::string first_free(std::string_view base, const std::unordered_map<std::string, int32_t>& taken,
                       std::unordered_map<std::string, int32_t>& next) {
  std::string name(base);
  if (!taken.count(name)) return name;
  int32_t& suffix = next.try_emplace(name, 1).first->second;
  for (;; ++suffix) {
    name = std::string(base) + "_" + std::to_string(suffix);
    if (!taken.count(name)) return name;
  }
}

}  // namespace

std::string Graph::unique_value_name(std::string_view base) const {
  index_names();
  const std::lock_guard<std::mutex> lock(names_.mutex);  // the suffixes are written
  return first_free(base, names_.values, names_.value_suffixes);
}

std::string Graph::unique_node_name(std::string_view base) const {
  index_names();
  const std::lock_guard<std::mutex> lock(names_.mutex);
  return first_free(base, names_.nodes, names_.node_suffixes);
}

ValueId Graph::add_value_raw(Value value) {
  const ValueId id(static_cast<int32_t>(values_.size()));
  values_.push_back(std::move(value));
  if (names_.built) names_.values.emplace(values_.back().name, id.index);
  return id;
}

NodeId Graph::add_node_raw(Node node) {
  const NodeId id(static_cast<int32_t>(nodes_.size()));
  nodes_.push_back(std::move(node));
  if (names_.built) names_.nodes.emplace(nodes_.back().name, id.index);
  return id;
}

}  // namespace memfit
