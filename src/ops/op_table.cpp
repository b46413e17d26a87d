#include "ops/op_table.h"

#include <algorithm>
#include <array>
#include <string>

#include "core/check.h"

namespace memfit {

void OpTableBuilder::add(OpInfo info) { infos_.push_back(std::move(info)); }

namespace {

// Built once: every family registers its ops; every op of the list must be present once.
const std::array<OpInfo, kNumOps>& table() {
  static const std::array<OpInfo, kNumOps> instance = [] {
    OpTableBuilder builder;
    register_linear_ops(builder);
    register_conv_ops(builder);
    register_conv_transpose_ops(builder);
    register_pool_ops(builder);
    register_upsample_ops(builder);
    register_norm_ops(builder);
    register_eltwise_ops(builder);
    register_shape_ops(builder);
    register_sequence_ops(builder);
    register_attention_ops(builder);
    register_lstm_ops(builder);
    register_softmax_ops(builder);
    register_reduce_ops(builder);
    register_optimizer_ops(builder);
    register_swap_ops(builder);
    register_fused_ops(builder);
    register_comm_ops(builder);
    std::array<OpInfo, kNumOps> by_op;
    std::array<bool, kNumOps> seen{};
    for (OpInfo& info : builder.infos()) {
      const auto index = static_cast<size_t>(info.op);
      MEMFIT_CHECK(index < by_op.size() && !seen[index]);
      MEMFIT_CHECK(info.infer != nullptr && info.examples != nullptr);
      seen[index] = true;
      by_op[index] = std::move(info);
    }
    for (bool s : seen) MEMFIT_CHECK(s);
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

bool always_kept(const Node& node, size_t output) {
  const std::vector<int>& kept = op_info(node.op).kept_outputs;
  return std::find(kept.begin(), kept.end(), static_cast<int>(output)) != kept.end();
}

Node recompute_form(const Node& original) {
  const RecomputeFormFn form = op_info(original.op).recompute_form_of;
  return form ? form(original) : original;
}

}  // namespace memfit
