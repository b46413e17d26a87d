// The cuda backend's normalization kernels: batch_norm, batch_norm_inference,
// layer_norm and their gradients. The shapes and attributes of a node fixed
// into a LaunchKernel over cuda_norm.cu's launchers, with the workspace their
// two-stage sums take.
#include "backends/cuda/cuda_kernels.h"

#ifdef MEMFIT_HAVE_CUDA

#include "backends/cuda/cuda_kernel_util.h"
#include "backends/cuda/cuda_norm_launchers.h"

namespace memfit::cuda {
namespace {

// x (N, C, spatial...) of a batch norm.
ChannelShape channel_shape(const Shape& x) {
  ChannelShape v;
  v.n = x[0];
  v.c = x[1];
  v.spatial = 1;
  for (size_t d = 2; d < x.size(); ++d) v.spatial *= x[d];
  v.chunks = batch_norm_chunks(v.n, v.spatial);
  return v;
}

bool norm_has_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::batch_norm:
    case OpKind::batch_norm_inference:
    case OpKind::batch_norm_grad:
    case OpKind::batch_norm_inference_grad:
    case OpKind::layer_norm:
    case OpKind::layer_norm_grad:
      return has_op_dtypes(graph, node);
    default:
      return false;
  }
}

Result<std::unique_ptr<Kernel>> make_norm_kernel(const Graph& graph, const Node& node,
                                                 std::shared_ptr<const Context> context) {
  LaunchKernel::Launch launch;
  size_t workspace = 0;
  switch (node.op) {
    case OpKind::batch_norm: {  // (x, gamma, beta, running_mean, running_var) -> (y, mean, var,
                                // ...)
      const auto attrs = std::get<BatchNormAttrs>(node.attrs);
      const ChannelShape shape = channel_shape(graph.value(node.inputs[0]).type.shape);
      workspace = batch_norm_workspace_bytes(shape);
      launch = [shape, attrs](const KernelArgs& a, void* stream) {
        const BatchNormArgs args{in(a, 0),  in(a, 1),  in(a, 2),  in(a, 3),  in(a, 4),
                                 out(a, 0), out(a, 1), out(a, 2), out(a, 3), out(a, 4)};
        launch_batch_norm(args, shape, attrs.eps, attrs.momentum, attrs.relu, a.workspace, stream);
      };
      break;
    }
    case OpKind::batch_norm_inference: {  // (x, gamma, beta, running_mean, running_var) -> y
      const auto attrs = std::get<BatchNormAttrs>(node.attrs);
      const ChannelShape shape = channel_shape(graph.value(node.inputs[0]).type.shape);
      launch = [shape, attrs](const KernelArgs& a, void* stream) {
        launch_batch_norm_inference(in(a, 0), in(a, 1), in(a, 2), in(a, 3), in(a, 4), out(a, 0),
                                    shape, attrs.eps, attrs.relu, stream);
      };
      break;
    }
    case OpKind::batch_norm_grad:              // (dy, x, gamma, mean, var) -> (dx, dgamma, dbeta)
    case OpKind::batch_norm_inference_grad: {  // (dy, x, gamma, running_mean, running_var)
      const auto attrs = std::get<BatchNormAttrs>(node.attrs);
      const bool inference = node.op == OpKind::batch_norm_inference_grad;
      const ChannelShape shape = channel_shape(graph.value(node.inputs[1]).type.shape);
      workspace = batch_norm_workspace_bytes(shape);
      launch = [shape, attrs, inference](const KernelArgs& a, void* stream) {
        const BatchNormGradArgs args{in(a, 0), in(a, 1),  in(a, 2),  in(a, 3),
                                     in(a, 4), out(a, 0), out(a, 1), out(a, 2)};
        launch_batch_norm_grad(args, shape, attrs.eps, inference, a.workspace, stream);
      };
      break;
    }
    case OpKind::layer_norm:         // (x, gamma, beta) -> (y, mean, rstd)
    case OpKind::layer_norm_grad: {  // (dy, x, gamma, mean, rstd) -> (dx, dgamma, dbeta)
      const bool gradient = node.op == OpKind::layer_norm_grad;
      const Shape& x = graph.value(node.inputs[gradient ? 1 : 0]).type.shape;
      const int64_t d = x.back();
      const int64_t rows = d == 0 ? 0 : num_elements(x) / d;
      if (gradient) {
        workspace = layer_norm_grad_workspace_bytes(rows, d);
        launch = [rows, d](const KernelArgs& a, void* stream) {
          launch_layer_norm_grad(in(a, 0), in(a, 1), in(a, 2), in(a, 3), in(a, 4), out(a, 0),
                                 out(a, 1), out(a, 2), rows, d, a.workspace, stream);
        };
      } else {
        const double eps = std::get<LayerNormAttrs>(node.attrs).eps;
        launch = [rows, d, eps](const KernelArgs& a, void* stream) {
          launch_layer_norm(in(a, 0), in(a, 1), in(a, 2), out(a, 0), out(a, 1), out(a, 2), rows, d,
                            eps, stream);
        };
      }
      break;
    }
    default:
      return no_kernel_for(node.op);
  }
  return launch_kernel(std::move(context), std::move(launch), workspace);
}

}  // namespace

MEMFIT_CUDA_KERNEL(batch_norm, norm_has_kernel, make_norm_kernel)
MEMFIT_CUDA_KERNEL(batch_norm_grad, norm_has_kernel, make_norm_kernel)
MEMFIT_CUDA_KERNEL(batch_norm_inference, norm_has_kernel, make_norm_kernel)
MEMFIT_CUDA_KERNEL(batch_norm_inference_grad, norm_has_kernel, make_norm_kernel)
MEMFIT_CUDA_KERNEL(layer_norm, norm_has_kernel, make_norm_kernel)
MEMFIT_CUDA_KERNEL(layer_norm_grad, norm_has_kernel, make_norm_kernel)

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
