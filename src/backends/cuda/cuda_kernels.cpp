// The cuda backend's entries of every op (cuda_kernels.h: has_kernel,
// make_kernel), and the kernels of the ops that the files beside this one
// leave: pooling, activations, add, sub and mul, softmax and the
// cross-entropy, dropout, reductions, the optimizer updates, fill and the
// copies. Shapes, attributes and the launch parameters are fixed when a
// kernel is made; run() only launches.
#include "backends/cuda/cuda_kernels.h"

#ifdef MEMFIT_HAVE_CUDA

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/cublas_library.h"
#include "backends/cuda/cuda_kernel_util.h"
#include "backends/cuda/cuda_launchers.h"

namespace memfit::cuda {

Context::~Context() {
  if (blas != nullptr) (*cublas_library())->destroy(static_cast<cublasHandle_t>(blas));
  if (dnn != nullptr) cudnnDestroy(static_cast<cudnnHandle_t>(dnn));
}

Status no_kernel_for(OpKind op) {
  return Status::error("the cuda backend has no kernel for " + std::string(op_name(op)));
}

bool plain(const Graph& graph, const Node& node) {
  for (const auto* list : {&node.inputs, &node.outputs}) {
    for (ValueId v : *list) {
      if (graph.value(v).layout != Layout::plain) return false;
    }
  }
  return true;
}

namespace {

const memfit::Shape& shape_of(const Graph& graph, ValueId v) { return graph.value(v).type.shape; }

ReduceShape reduce_shape(const memfit::Shape& x, const std::vector<int64_t>& axes) {
  ReduceShape r;
  int64_t stride = 1;
  std::vector<int64_t> strides(x.size());
  for (size_t d = x.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= x[d];
  }
  for (size_t d = 0; d < x.size(); ++d) {
    const bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    if (reduced) {
      r.reduced_sizes[r.reduced_rank] = x[d];
      r.reduced_strides[r.reduced_rank++] = strides[d];
    } else {
      r.kept_sizes[r.kept_rank] = x[d];
      r.kept_strides[r.kept_rank++] = strides[d];
    }
  }
  return r;
}

// The pooling of x (N, C, [D,] H, W) into y (N, C, [OD,] OH, OW) with the
// window of `attrs` (Pool2dAttrs, Pool3dAttrs or their Grad forms).
template <class A>
PoolShape pool_shape(const memfit::Shape& x, const memfit::Shape& y, const A& attrs) {
  constexpr int kSpatial = static_cast<int>(std::tuple_size_v<decltype(attrs.kernel)>);
  PoolShape shape;
  shape.planes = x[0] * x[1];
  for (int i = 0; i < kSpatial; ++i) {
    const int d = 3 - kSpatial + i;
    shape.in[d] = x[static_cast<size_t>(2 + i)];
    shape.out[d] = y[static_cast<size_t>(2 + i)];
    shape.kernel[d] = attrs.kernel[static_cast<size_t>(i)];
    shape.stride[d] = attrs.stride[static_cast<size_t>(i)];
    shape.pad[d] = attrs.pad[static_cast<size_t>(i)];
  }
  shape.include_pad = attrs.include_pad;
  return shape;
}

// Global average pooling: an average over the whole (H, W) plane.
PoolShape global_pool_shape(const memfit::Shape& x) {
  PoolShape shape;
  shape.planes = x[0] * x[1];
  shape.in[1] = shape.kernel[1] = shape.stride[1] = x[2];
  shape.in[2] = shape.kernel[2] = shape.stride[2] = x[3];
  return shape;
}

// a's and b's strides in y's shape, NumPy's broadcasting (ref_util.h).
BroadcastShape broadcast_shape(const memfit::Shape& a, const memfit::Shape& b,
                               const memfit::Shape& y) {
  BroadcastShape shape;
  shape.rank = static_cast<int>(y.size());
  for (size_t d = 0; d < y.size(); ++d) shape.sizes[d] = y[d];
  for (const auto& [in, strides] :
       {std::pair{&a, shape.a_strides}, std::pair{&b, shape.b_strides}}) {
    const size_t lead = y.size() - in->size();
    int64_t stride = 1;
    for (size_t d = in->size(); d-- > 0;) {
      strides[lead + d] = (*in)[d] == 1 ? 0 : stride;
      stride *= (*in)[d];
    }
  }
  return shape;
}

// The entry of `op` (cuda_kernels.h).
const KernelEntry& kernel_entry(OpKind op) {
  static const KernelEntry entries[] = {
#define MEMFIT_CUDA_KERNEL_ENTRY(id, attrs, min_inputs, max_inputs) kernel_entry_##id(),
      MEMFIT_OPS(MEMFIT_CUDA_KERNEL_ENTRY)
#undef MEMFIT_CUDA_KERNEL_ENTRY
  };
  return entries[static_cast<size_t>(op)];
}

// The conditions of the kernels below beyond the op's dtypes.
bool reduce_has_kernel(const Graph& graph, const Node& node) {
  return has_op_dtypes(graph, node) && shape_of(graph, node.inputs[0]).size() <= kMaxDims;
}
bool binary_has_kernel(const Graph& graph, const Node& node) {
  return has_op_dtypes(graph, node) && shape_of(graph, node.outputs[0]).size() <= kMaxDims;
}
// Copies of any dtype, plain to plain (has_kernel's first test).
bool copy_has_kernel(const Graph&, const Node&) { return true; }

// The kernels of the ops the files beside this one leave: one launch each.
Result<std::unique_ptr<Kernel>> make_launch_kernel(const Graph& graph, const Node& node,
                                                   std::shared_ptr<const Context> context) {
  const int64_t count = node.outputs.empty() ? 0 : graph.value(node.outputs[0]).elements();
  const auto pool = [](Pool kind, bool gradient, const PoolShape& shape) {
    return [kind, gradient, shape](const KernelArgs& a, void* stream) {
      if (gradient) {
        launch_pool_grad(kind, in(a, 0), kind == Pool::max ? in(a, 1) : nullptr, out(a, 0), shape,
                         stream);
      } else {
        launch_pool(kind, in(a, 0), out(a, 0), shape, stream);
      }
    };
  };
  LaunchKernel::Launch launch;
  size_t workspace = 0;
  switch (node.op) {
    case OpKind::fill: {
      const float value = std::get<FillAttrs>(node.attrs).value;
      launch = [count, value](const KernelArgs& a, void* stream) {
        launch_fill(out(a, 0), count, value, stream);
      };
      break;
    }
    case OpKind::reshape:    // the same bytes; nothing to do in place
    case OpKind::reorder: {  // plain to plain: a copy
      const size_t bytes = graph.value(node.outputs[0]).bytes();
      launch = [bytes](const KernelArgs& a, void* stream) {
        if (a.inputs[0] == a.outputs[0]) return;
        cudaMemcpyAsync(a.outputs[0], a.inputs[0], bytes, cudaMemcpyDeviceToDevice,
                        static_cast<cudaStream_t>(stream));
      };
      break;
    }
    // The executor runs the swap copies on the device's swap stream itself;
    // these kernels copy on the compute stream where a copy runs as a node.
    case OpKind::to_host:
    case OpKind::to_device: {
      const size_t bytes = graph.value(node.outputs[0]).bytes();
      launch = [bytes](const KernelArgs& a, void* stream) {
        cudaMemcpyAsync(a.outputs[0], a.inputs[0], bytes, cudaMemcpyDefault,
                        static_cast<cudaStream_t>(stream));
      };
      break;
    }
    case OpKind::swap_wait:  // the executor waits for the copy's event; no data moves
      launch = [](const KernelArgs&, void*) {};
      break;
    case OpKind::relu:
    case OpKind::gelu:
    case OpKind::tanh:
    case OpKind::sigmoid:
    case OpKind::scale: {
      const Unary op = node.op == OpKind::relu      ? Unary::relu
                       : node.op == OpKind::gelu    ? Unary::gelu
                       : node.op == OpKind::tanh    ? Unary::tanh
                       : node.op == OpKind::sigmoid ? Unary::sigmoid
                                                    : Unary::scale;
      const double alpha = op == Unary::scale ? std::get<ScaleAttrs>(node.attrs).alpha : 0.0;
      launch = [op, count, alpha](const KernelArgs& a, void* stream) {
        launch_unary(op, in(a, 0), out(a, 0), count, alpha, stream);
      };
      break;
    }
    case OpKind::relu_grad:
    case OpKind::gelu_grad:
    case OpKind::tanh_grad:
    case OpKind::sigmoid_grad: {
      const UnaryGrad op = node.op == OpKind::relu_grad   ? UnaryGrad::relu
                           : node.op == OpKind::gelu_grad ? UnaryGrad::gelu
                           : node.op == OpKind::tanh_grad ? UnaryGrad::tanh
                                                          : UnaryGrad::sigmoid;
      launch = [op, count](const KernelArgs& a, void* stream) {
        launch_unary_grad(op, in(a, 0), in(a, 1), out(a, 0), count, stream);
      };
      break;
    }
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul: {
      const Binary op = node.op == OpKind::add   ? Binary::add
                        : node.op == OpKind::sub ? Binary::sub
                                                 : Binary::mul;
      const BroadcastShape shape =
          broadcast_shape(shape_of(graph, node.inputs[0]), shape_of(graph, node.inputs[1]),
                          shape_of(graph, node.outputs[0]));
      launch = [op, shape](const KernelArgs& a, void* stream) {
        launch_binary(op, in(a, 0), in(a, 1), out(a, 0), shape, stream);
      };
      break;
    }
    case OpKind::max_pool2d:
    case OpKind::avg_pool2d:
      launch = pool(node.op == OpKind::max_pool2d ? Pool::max : Pool::average, false,
                    pool_shape(shape_of(graph, node.inputs[0]), shape_of(graph, node.outputs[0]),
                               std::get<Pool2dAttrs>(node.attrs)));
      break;
    case OpKind::max_pool3d:
    case OpKind::avg_pool3d:
      launch = pool(node.op == OpKind::max_pool3d ? Pool::max : Pool::average, false,
                    pool_shape(shape_of(graph, node.inputs[0]), shape_of(graph, node.outputs[0]),
                               std::get<Pool3dAttrs>(node.attrs)));
      break;
    case OpKind::max_pool2d_grad:  // (dy, x) -> dx
      launch = pool(Pool::max, true,
                    pool_shape(shape_of(graph, node.inputs[1]), shape_of(graph, node.inputs[0]),
                               std::get<Pool2dAttrs>(node.attrs)));
      break;
    case OpKind::max_pool3d_grad:
      launch = pool(Pool::max, true,
                    pool_shape(shape_of(graph, node.inputs[1]), shape_of(graph, node.inputs[0]),
                               std::get<Pool3dAttrs>(node.attrs)));
      break;
    case OpKind::avg_pool2d_grad: {  // dy -> dx of attrs.shape
      const auto& attrs = std::get<Pool2dGradAttrs>(node.attrs);
      launch = pool(Pool::average, true,
                    pool_shape(attrs.shape, shape_of(graph, node.inputs[0]), attrs));
      break;
    }
    case OpKind::avg_pool3d_grad: {
      const auto& attrs = std::get<Pool3dGradAttrs>(node.attrs);
      launch = pool(Pool::average, true,
                    pool_shape(attrs.shape, shape_of(graph, node.inputs[0]), attrs));
      break;
    }
    case OpKind::global_avg_pool:
      launch = pool(Pool::average, false, global_pool_shape(shape_of(graph, node.inputs[0])));
      break;
    case OpKind::global_avg_pool_grad:
      launch = pool(Pool::average, true, global_pool_shape(shape_of(graph, node.outputs[0])));
      break;
    case OpKind::softmax:
    case OpKind::softmax_grad:
    case OpKind::log_softmax:
    case OpKind::log_softmax_grad: {
      const RowOp op = node.op == OpKind::softmax        ? RowOp::softmax
                       : node.op == OpKind::softmax_grad ? RowOp::softmax_grad
                       : node.op == OpKind::log_softmax  ? RowOp::log_softmax
                                                         : RowOp::log_softmax_grad;
      const bool gradient = op == RowOp::softmax_grad || op == RowOp::log_softmax_grad;
      const memfit::Shape& x = shape_of(graph, node.inputs[0]);
      const auto axis = static_cast<size_t>(std::get<AxisAttrs>(node.attrs).axis);
      int64_t outer = 1, inner = 1;
      for (size_t d = 0; d < axis; ++d) outer *= x[d];
      for (size_t d = axis + 1; d < x.size(); ++d) inner *= x[d];
      const int64_t len = x[axis];
      launch = [op, gradient, outer, len, inner](const KernelArgs& a, void* stream) {
        launch_rows(op, in(a, 0), gradient ? in(a, 1) : nullptr, out(a, 0), outer, len, inner,
                    stream);
      };
      break;
    }
    case OpKind::dropout: {
      const auto attrs = std::get<DropoutAttrs>(node.attrs);
      launch = [count, attrs](const KernelArgs& a, void* stream) {
        launch_dropout(in(a, 0), out(a, 0), count, attrs.p, a.step.seed,
                       static_cast<uint64_t>(a.step.micro_step), attrs.key, stream);
      };
      break;
    }
    case OpKind::reduce_sum:
    case OpKind::reduce_mean: {
      const ReduceShape shape =
          reduce_shape(shape_of(graph, node.inputs[0]), std::get<ReduceAttrs>(node.attrs).axes);
      int64_t reduced = 1;
      for (int d = 0; d < shape.reduced_rank; ++d) reduced *= shape.reduced_sizes[d];
      const double scale =
          node.op == OpKind::reduce_mean ? 1.0 / static_cast<double>(reduced) : 1.0;
      launch = [shape, scale](const KernelArgs& a, void* stream) {
        launch_reduce_sum(in(a, 0), out(a, 0), shape, scale, stream);
      };
      break;
    }
    case OpKind::softmax_cross_entropy: {  // (logits, labels) -> loss; a double per row
      const memfit::Shape& logits = shape_of(graph, node.inputs[0]);
      const int64_t rows = logits[0], classes = logits[1];
      workspace = static_cast<size_t>(rows) * sizeof(double);
      launch = [rows, classes](const KernelArgs& a, void* stream) {
        launch_softmax_cross_entropy(in(a, 0), static_cast<const int32_t*>(a.inputs[1]), out(a, 0),
                                     static_cast<double*>(a.workspace), rows, classes, stream);
      };
      break;
    }
    case OpKind::softmax_cross_entropy_grad: {  // (dloss, logits, labels) -> dlogits
      const memfit::Shape& logits = shape_of(graph, node.inputs[1]);
      const int64_t rows = logits[0], classes = logits[1];
      launch = [rows, classes](const KernelArgs& a, void* stream) {
        launch_softmax_cross_entropy_grad(in(a, 0), in(a, 1),
                                          static_cast<const int32_t*>(a.inputs[2]), out(a, 0), rows,
                                          classes, stream);
      };
      break;
    }
    case OpKind::sgd_update: {
      const auto attrs = std::get<SgdAttrs>(node.attrs);
      const bool velocity = attrs.momentum != 0.0f;
      launch = [count, attrs, velocity](const KernelArgs& a, void* stream) {
        launch_sgd_update(in(a, 0), in(a, 1), velocity ? in(a, 2) : nullptr, out(a, 0),
                          velocity ? out(a, 1) : nullptr, count,
                          static_cast<double>(attrs.lr) * a.step.lr_scale, attrs.momentum,
                          attrs.weight_decay, stream);
      };
      break;
    }
    case OpKind::adamw_update: {
      const auto attrs = std::get<AdamWAttrs>(node.attrs);
      launch = [count, attrs](const KernelArgs& a, void* stream) {
        const double t = static_cast<double>(a.step.optimizer_step + 1);
        launch_adamw_update(in(a, 0), in(a, 1), in(a, 2), in(a, 3), out(a, 0), out(a, 1), out(a, 2),
                            count, static_cast<double>(attrs.lr) * a.step.lr_scale, attrs.beta1,
                            attrs.beta2, attrs.eps, attrs.weight_decay,
                            1.0 - std::pow(static_cast<double>(attrs.beta1), t),
                            1.0 - std::pow(static_cast<double>(attrs.beta2), t), stream);
      };
      break;
    }
    default:
      return no_kernel_for(node.op);
  }
  return launch_kernel(std::move(context), std::move(launch), workspace);
}

}  // namespace

bool has_kernel(const Graph& graph, const Node& node) {
  if (!plain(graph, node)) return false;
  const KernelEntry& entry = kernel_entry(node.op);
  return entry.has != nullptr && entry.has(graph, node);
}

Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, const Node& node,
                                            std::shared_ptr<const Context> context) {
  if (!has_kernel(graph, node)) {
    return no_kernel_for(node.op);
  }
  return kernel_entry(node.op).make(graph, node, std::move(context));
}

MEMFIT_CUDA_KERNEL(fill, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(reshape, copy_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(reorder, copy_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(to_host, copy_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(to_device, copy_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(swap_wait, copy_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(relu, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(relu_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(gelu, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(gelu_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(tanh, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(tanh_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(sigmoid, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(sigmoid_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(scale, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(dropout, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(add, binary_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(sub, binary_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(mul, binary_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(max_pool2d, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(max_pool2d_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(avg_pool2d, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(avg_pool2d_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(max_pool3d, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(max_pool3d_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(avg_pool3d, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(avg_pool3d_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(global_avg_pool, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(global_avg_pool_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(softmax, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(softmax_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(log_softmax, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(log_softmax_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(softmax_cross_entropy, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(softmax_cross_entropy_grad, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(reduce_sum, reduce_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(reduce_mean, reduce_has_kernel, make_launch_kernel)
MEMFIT_CUDA_KERNEL(sgd_update, has_op_dtypes, make_launch_kernel)
MEMFIT_CUDA_KERNEL(adamw_update, has_op_dtypes, make_launch_kernel)

}  // namespace memfit::cuda

#else  // without CUDA: no backend is made, so no kernel is asked for

namespace memfit::cuda {

Context::~Context() = default;
bool has_kernel(const Graph&, const Node&) { return false; }
Result<std::unique_ptr<Kernel>> make_kernel(const Graph&, const Node&,
                                            std::shared_ptr<const Context>) {
  return Status::error("this memfit was built without CUDA");
}

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
