#include "ops/op_table.h"

#include <algorithm>
#include <array>
#include <string>

#include "core/check.h"

namespace memfit {

namespace {

// Built once, one row per op of the list, in its order.
const std::array<OpInfo, kNumOps>& table() {
  static const std::array<OpInfo, kNumOps> instance = [] {
    std::array<OpInfo, kNumOps> by_op = {
#define MEMFIT_OP_INFO(id, attrs, min_inputs, max_inputs) op_info_##id(),
        MEMFIT_OPS(MEMFIT_OP_INFO)
#undef MEMFIT_OP_INFO
    };
    for (size_t i = 0; i < by_op.size(); ++i) {
      const OpInfo& info = by_op[i];
      MEMFIT_CHECK(static_cast<size_t>(info.op) == i);
      MEMFIT_CHECK(info.infer != nullptr && info.examples != nullptr);
      const int max_inputs = op_arity(info.op).max;
      for (int input : info.i32_inputs) {
        MEMFIT_CHECK(input >= 0 && (max_inputs < 0 || input < max_inputs));
      }
    }
    return by_op;
  }();
  return instance;
}

}  // namespace

const OpInfo& op_info(OpKind op) { return table().at(static_cast<size_t>(op)); }

Result<std::vector<TensorType>> infer_types(OpKind op, const std::vector<TensorType>& inputs,
                                            const Attrs& attrs) {
  const std::string name(op_name(op));
  const Arity arity = op_arity(op);
  const auto n = static_cast<int>(inputs.size());
  if (!arity.admits(n)) {
    const std::string expected =
        arity.max < 0            ? "at least " + std::to_string(arity.min)
        : arity.min == arity.max ? std::to_string(arity.min)
                                 : std::to_string(arity.min) + " to " + std::to_string(arity.max);
    return Status::error(name + " takes " + expected + " inputs, got " + std::to_string(n));
  }
  if (attrs.index() != default_attrs(op).index()) {
    return Status::error(name + " was given the attributes of another op");
  }
  auto types = op_info(op).infer(inputs, attrs);
  if (!types) return Status::error(name + ": " + types.message());
  return types;
}

Cost op_cost(const Graph& graph, const Node& node) {
  std::vector<TensorType> in, out;
  for (ValueId v : node.inputs) in.push_back(graph.value(v).type);
  for (ValueId v : node.outputs) out.push_back(graph.value(v).type);
  const OpInfo& info = op_info(node.op);
  if (info.cost) return info.cost(in, out, node.attrs);
  Cost cost;
  for (const TensorType& t : out) cost.flops += static_cast<double>(num_elements(t.shape));
  for (const auto* list : {&in, &out}) {
    for (const TensorType& t : *list) {
      cost.bytes += static_cast<double>(num_elements(t.shape)) * dtype_size(t.dtype);
    }
  }
  return cost;
}

std::vector<InplacePair> inplace_pairs(const Node& node) {
  const OpInfo& info = op_info(node.op);
  if (!info.inplace_after_first) return info.inplace;
  std::vector<InplacePair> pairs;
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    pairs.push_back(InplacePair{static_cast<int>(o) + 1, static_cast<int>(o)});
  }
  return pairs;
}

bool has_op_dtypes(const Graph& graph, const Node& node) {
  const std::vector<int>& i32 = op_info(node.op).i32_inputs;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const bool is_i32 = std::find(i32.begin(), i32.end(), static_cast<int>(i)) != i32.end();
    if (graph.value(node.inputs[i]).type.dtype != (is_i32 ? DType::i32 : DType::f32)) return false;
  }
  for (ValueId v : node.outputs) {
    if (graph.value(v).type.dtype != DType::f32) return false;
  }
  return true;
}

bool always_kept(const Node& node, size_t output) {
  const std::vector<int>& kept = op_info(node.op).kept_outputs;
  return std::find(kept.begin(), kept.end(), static_cast<int>(output)) != kept.end();
}

Node recompute_form(const Node& original) {
  const RecomputeFormFn form = op_info(original.op).recompute_form_of;
  return form ? form(original) : original;
}

}  // namespace memfit
