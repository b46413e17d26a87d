// The cuda backend's kernels of the sequence ops: lstm_cell, lstm_cell_grad,
// attention and attention_grad, f32 (the key mask i32) in the plain layout.
// Shapes and attributes are fixed when a kernel is made; run() only launches
// (cuda_sequence_launchers.h). attention and attention_grad take one double per
// query row of workspace: the rows' log-sum-exp, or do_i . o_i.
#include "backends/cuda/cuda_kernels.h"

#ifdef MEMFIT_HAVE_CUDA

#include <cstdint>
#include <string>
#include <utility>

#include "backends/cuda/cuda_kernel_util.h"
#include "backends/cuda/cuda_sequence_launchers.h"

namespace memfit::cuda {
namespace {

const memfit::Shape& shape_of(const Graph& graph, ValueId v) { return graph.value(v).type.shape; }

// q (B, H, Tq, D), k (B, H, Tk, D), v (B, H, Tk, Dv): the node's inputs 0 to 2.
AttentionShape attention_shape(const Graph& graph, const Node& node) {
  const memfit::Shape& q = shape_of(graph, node.inputs[0]);
  const memfit::Shape& k = shape_of(graph, node.inputs[1]);
  const memfit::Shape& v = shape_of(graph, node.inputs[2]);
  return AttentionShape{q[0], q[1], q[2], k[2], q[3], v[3]};
}

// The node's attributes and the step's dropout stream.
AttentionParams attention_params(const AttentionAttrs& attrs, const StepContext& step) {
  return AttentionParams{attrs.scale,
                         attrs.causal,
                         attrs.offset,
                         attrs.p,
                         attrs.key,
                         step.seed,
                         static_cast<uint64_t>(step.micro_step)};
}

// The key mask's input, -1 without one: attention (q, k, v, [key_mask]),
// attention_grad (q, k, v, o, lse, do, [key_mask]).
int key_mask_input(const Node& node) {
  const size_t at = node.op == OpKind::attention ? 3 : 6;
  return node.inputs.size() > at ? static_cast<int>(at) : -1;
}

// Whether `node` is one of the sequence ops with a kernel here.
bool sequence_has_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::lstm_cell:
    case OpKind::lstm_cell_grad:
      return plain(graph, node) && has_op_dtypes(graph, node);
    case OpKind::attention:
    case OpKind::attention_grad:
      return plain(graph, node) && has_op_dtypes(graph, node) &&
             attention_fits(attention_shape(graph, node));
    default:
      return false;
  }
}

Result<std::unique_ptr<Kernel>> make_sequence_kernel(const Graph& graph, const Node& node,
                                                     std::shared_ptr<const Context> context) {
  if (!sequence_has_kernel(graph, node)) {
    return no_kernel_for(node.op);
  }
  LaunchKernel::Launch launch;
  size_t workspace = 0;
  switch (node.op) {
    case OpKind::lstm_cell: {  // (gates (N, 4H) [, c_prev]) -> (h, c)
      const memfit::Shape& gates = shape_of(graph, node.inputs[0]);
      const int64_t rows = gates[0], hidden = gates[1] / 4;
      const bool has_prev = node.inputs.size() == 2;
      launch = [rows, hidden, has_prev](const KernelArgs& a, void* stream) {
        launch_lstm_cell(in(a, 0), has_prev ? in(a, 1) : nullptr, out(a, 0), out(a, 1), rows,
                         hidden, stream);
      };
      break;
    }
    case OpKind::lstm_cell_grad: {  // (dh, dc, gates, c [, c_prev]) -> (dgates [, dc_prev])
      const memfit::Shape& gates = shape_of(graph, node.inputs[2]);
      const int64_t rows = gates[0], hidden = gates[1] / 4;
      const bool has_prev = node.inputs.size() == 5;
      launch = [rows, hidden, has_prev](const KernelArgs& a, void* stream) {
        launch_lstm_cell_grad(in(a, 0), in(a, 1), in(a, 2), in(a, 3), has_prev ? in(a, 4) : nullptr,
                              out(a, 0), has_prev ? out(a, 1) : nullptr, rows, hidden, stream);
      };
      break;
    }
    case OpKind::attention:         // (q, k, v [, key_mask]) -> (o, lse)
    case OpKind::attention_grad: {  // (q, k, v, o, lse, do [, key_mask]) -> (dq, dk, dv)
      const bool gradient = node.op == OpKind::attention_grad;
      const AttentionShape shape = attention_shape(graph, node);
      const AttentionAttrs attrs = std::get<AttentionAttrs>(node.attrs);
      const int mask = key_mask_input(node);
      workspace = attention_workspace_bytes(shape);
      launch = [shape, attrs, mask, gradient](const KernelArgs& a, void* stream) {
        const auto* key_mask =
            mask >= 0 ? static_cast<const int32_t*>(a.inputs[static_cast<size_t>(mask)]) : nullptr;
        auto* scratch = static_cast<double*>(a.workspace);
        if (gradient) {
          launch_attention_grad(shape, attention_params(attrs, a.step), in(a, 0), in(a, 1),
                                in(a, 2), in(a, 3), in(a, 4), in(a, 5), key_mask, out(a, 0),
                                out(a, 1), out(a, 2), scratch, stream);
        } else {
          launch_attention(shape, attention_params(attrs, a.step), in(a, 0), in(a, 1), in(a, 2),
                           key_mask, out(a, 0), out(a, 1), scratch, stream);
        }
      };
      break;
    }
    default:
      return no_kernel_for(node.op);
  }
  return launch_kernel(std::move(context), std::move(launch), workspace);
}

}  // namespace

MEMFIT_CUDA_KERNEL(lstm_cell, sequence_has_kernel, make_sequence_kernel)
MEMFIT_CUDA_KERNEL(lstm_cell_grad, sequence_has_kernel, make_sequence_kernel)
MEMFIT_CUDA_KERNEL(attention, sequence_has_kernel, make_sequence_kernel)
MEMFIT_CUDA_KERNEL(attention_grad, sequence_has_kernel, make_sequence_kernel)

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
