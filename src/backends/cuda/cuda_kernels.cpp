// The cuda backend's kernels (cuda_kernels.h) but the products
// (cublas_product.cpp) and the convolutions (cudnn_conv.cpp). Shapes,
// attributes and the launch parameters are fixed when a kernel is made;
// run() only launches.
#include "backends/cuda/cuda_kernels.h"

#ifdef MEMFIT_HAVE_CUDA

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backends/cuda/cublas_library.h"
#include "backends/cuda/cuda_launch.h"

namespace memfit::cuda {

Context::~Context() {
  if (blas != nullptr) (*cublas_library())->destroy(static_cast<cublasHandle_t>(blas));
  if (dnn != nullptr) cudnnDestroy(static_cast<cudnnHandle_t>(dnn));
}

namespace {

using ContextPtr = std::shared_ptr<const Context>;

const float* in(const KernelArgs& args, size_t i) {
  return static_cast<const float*>(args.inputs[i]);
}
float* out(const KernelArgs& args, size_t i) { return static_cast<float*>(args.outputs[i]); }

// A kernel that launches on the context's stream.
class CudaKernel : public Kernel {
 public:
  explicit CudaKernel(ContextPtr context) : context_(std::move(context)) {}

 protected:
  void* stream() const { return context_->stream; }
  const Context& context() const { return *context_; }

 private:
  ContextPtr context_;
};

class FillKernel final : public CudaKernel {
 public:
  FillKernel(ContextPtr context, int64_t count, float value)
      : CudaKernel(std::move(context)), count_(count), value_(value) {}
  void run(const KernelArgs& args) override { launch_fill(out(args, 0), count_, value_, stream()); }

 private:
  int64_t count_;
  float value_;
};

// reshape: the same bytes; nothing to do in place.
class CopyKernel final : public CudaKernel {
 public:
  CopyKernel(ContextPtr context, size_t bytes) : CudaKernel(std::move(context)), bytes_(bytes) {}
  void run(const KernelArgs& args) override {
    if (args.inputs[0] == args.outputs[0]) return;
    cudaMemcpyAsync(args.outputs[0], args.inputs[0], bytes_, cudaMemcpyDeviceToDevice,
                    static_cast<cudaStream_t>(stream()));
  }

 private:
  size_t bytes_;
};

class UnaryKernel final : public CudaKernel {
 public:
  UnaryKernel(ContextPtr context, Unary op, int64_t count, double alpha)
      : CudaKernel(std::move(context)), op_(op), count_(count), alpha_(alpha) {}
  void run(const KernelArgs& args) override {
    launch_unary(op_, in(args, 0), out(args, 0), count_, alpha_, stream());
  }

 private:
  Unary op_;
  int64_t count_;
  double alpha_;
};

class UnaryGradKernel final : public CudaKernel {
 public:
  UnaryGradKernel(ContextPtr context, UnaryGrad op, int64_t count)
      : CudaKernel(std::move(context)), op_(op), count_(count) {}
  void run(const KernelArgs& args) override {
    launch_unary_grad(op_, in(args, 0), in(args, 1), out(args, 0), count_, stream());
  }

 private:
  UnaryGrad op_;
  int64_t count_;
};

class BinaryKernel final : public CudaKernel {
 public:
  BinaryKernel(ContextPtr context, Binary op, BroadcastShape shape)
      : CudaKernel(std::move(context)), op_(op), shape_(shape) {}
  void run(const KernelArgs& args) override {
    launch_binary(op_, in(args, 0), in(args, 1), out(args, 0), shape_, stream());
  }

 private:
  Binary op_;
  BroadcastShape shape_;
};

// Max and average pooling (2-D, 3-D, global) and their gradients.
class PoolKernel final : public CudaKernel {
 public:
  PoolKernel(ContextPtr context, Pool pool, bool gradient, PoolShape shape)
      : CudaKernel(std::move(context)), pool_(pool), gradient_(gradient), shape_(shape) {}
  void run(const KernelArgs& args) override {
    if (!gradient_) {
      launch_pool(pool_, in(args, 0), out(args, 0), shape_, stream());
    } else {
      launch_pool_grad(pool_, in(args, 0), pool_ == Pool::max ? in(args, 1) : nullptr, out(args, 0),
                       shape_, stream());
    }
  }

 private:
  Pool pool_;
  bool gradient_;
  PoolShape shape_;
};

// softmax, log_softmax and their gradients along one axis.
class RowsKernel final : public CudaKernel {
 public:
  RowsKernel(ContextPtr context, RowOp op, int64_t outer, int64_t len, int64_t inner)
      : CudaKernel(std::move(context)), op_(op), outer_(outer), len_(len), inner_(inner) {}
  void run(const KernelArgs& args) override {
    const bool gradient = op_ == RowOp::softmax_grad || op_ == RowOp::log_softmax_grad;
    launch_rows(op_, in(args, 0), gradient ? in(args, 1) : nullptr, out(args, 0), outer_, len_,
                inner_, stream());
  }

 private:
  RowOp op_;
  int64_t outer_, len_, inner_;
};

class DropoutKernel final : public CudaKernel {
 public:
  DropoutKernel(ContextPtr context, int64_t count, DropoutAttrs attrs)
      : CudaKernel(std::move(context)), count_(count), attrs_(attrs) {}
  void run(const KernelArgs& args) override {
    launch_dropout(in(args, 0), out(args, 0), count_, attrs_.p, args.step.seed,
                   static_cast<uint64_t>(args.step.micro_step), attrs_.key, stream());
  }

 private:
  int64_t count_;
  DropoutAttrs attrs_;
};

// reduce_sum and reduce_mean (scale 1 / the reduced count).
class ReduceKernel final : public CudaKernel {
 public:
  ReduceKernel(ContextPtr context, ReduceShape shape, double scale)
      : CudaKernel(std::move(context)), shape_(shape), scale_(scale) {}
  void run(const KernelArgs& args) override {
    launch_reduce_sum(in(args, 0), out(args, 0), shape_, scale_, stream());
  }

 private:
  ReduceShape shape_;
  double scale_;
};

class CrossEntropyKernel final : public CudaKernel {
 public:
  CrossEntropyKernel(ContextPtr context, int64_t rows, int64_t classes)
      : CudaKernel(std::move(context)), rows_(rows), classes_(classes) {}
  size_t workspace_bytes() const override { return static_cast<size_t>(rows_) * sizeof(double); }
  void run(const KernelArgs& args) override {
    launch_softmax_cross_entropy(in(args, 0), static_cast<const int32_t*>(args.inputs[1]),
                                 out(args, 0), static_cast<double*>(args.workspace), rows_,
                                 classes_, stream());
  }

 private:
  int64_t rows_, classes_;
};

class CrossEntropyGradKernel final : public CudaKernel {
 public:
  CrossEntropyGradKernel(ContextPtr context, int64_t rows, int64_t classes)
      : CudaKernel(std::move(context)), rows_(rows), classes_(classes) {}
  void run(const KernelArgs& args) override {
    launch_softmax_cross_entropy_grad(in(args, 0), in(args, 1),
                                      static_cast<const int32_t*>(args.inputs[2]), out(args, 0),
                                      rows_, classes_, stream());
  }

 private:
  int64_t rows_, classes_;
};

class SgdKernel final : public CudaKernel {
 public:
  SgdKernel(ContextPtr context, int64_t count, SgdAttrs attrs)
      : CudaKernel(std::move(context)), count_(count), attrs_(attrs) {}
  void run(const KernelArgs& args) override {
    const bool velocity = attrs_.momentum != 0.0f;
    launch_sgd_update(in(args, 0), in(args, 1), velocity ? in(args, 2) : nullptr, out(args, 0),
                      velocity ? out(args, 1) : nullptr, count_,
                      static_cast<double>(attrs_.lr) * args.step.lr_scale, attrs_.momentum,
                      attrs_.weight_decay, stream());
  }

 private:
  int64_t count_;
  SgdAttrs attrs_;
};

class AdamWKernel final : public CudaKernel {
 public:
  AdamWKernel(ContextPtr context, int64_t count, AdamWAttrs attrs)
      : CudaKernel(std::move(context)), count_(count), attrs_(attrs) {}
  void run(const KernelArgs& args) override {
    const double t = static_cast<double>(args.step.optimizer_step + 1);
    launch_adamw_update(in(args, 0), in(args, 1), in(args, 2), in(args, 3), out(args, 0),
                        out(args, 1), out(args, 2), count_,
                        static_cast<double>(attrs_.lr) * args.step.lr_scale, attrs_.beta1,
                        attrs_.beta2, attrs_.eps, attrs_.weight_decay,
                        1.0 - std::pow(static_cast<double>(attrs_.beta1), t),
                        1.0 - std::pow(static_cast<double>(attrs_.beta2), t), stream());
  }

 private:
  int64_t count_;
  AdamWAttrs attrs_;
};

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

bool all_f32(const Graph& graph, const Node& node, int i32_input = -1) {
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const DType want = static_cast<int>(i) == i32_input ? DType::i32 : DType::f32;
    if (graph.value(node.inputs[i]).type.dtype != want) return false;
  }
  for (ValueId v : node.outputs) {
    if (graph.value(v).type.dtype != DType::f32) return false;
  }
  return true;
}

bool plain(const Graph& graph, const Node& node) {
  for (const auto* list : {&node.inputs, &node.outputs}) {
    for (ValueId v : *list) {
      if (graph.value(v).layout != Layout::plain) return false;
    }
  }
  return true;
}

}  // namespace

bool has_kernel(const Graph& graph, const Node& node) {
  if (!plain(graph, node)) return false;
  if (conv_has_kernel(graph, node)) return true;
  switch (node.op) {
    case OpKind::fill:
    case OpKind::relu:
    case OpKind::gelu:
    case OpKind::tanh:
    case OpKind::sigmoid:
    case OpKind::scale:
    case OpKind::relu_grad:
    case OpKind::gelu_grad:
    case OpKind::tanh_grad:
    case OpKind::sigmoid_grad:
    case OpKind::softmax:
    case OpKind::softmax_grad:
    case OpKind::log_softmax:
    case OpKind::log_softmax_grad:
    case OpKind::dropout:
    case OpKind::sgd_update:
    case OpKind::adamw_update:
    case OpKind::linear:
    case OpKind::linear_relu:
      return all_f32(graph, node);
    case OpKind::matmul:
      return all_f32(graph, node) && shape_of(graph, node.inputs[0]).size() >= 2;
    case OpKind::reduce_sum:
    case OpKind::reduce_mean:
      return all_f32(graph, node) && shape_of(graph, node.inputs[0]).size() <= kMaxDims;
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul:
      return all_f32(graph, node) && shape_of(graph, node.outputs[0]).size() <= kMaxDims;
    case OpKind::max_pool2d:
    case OpKind::max_pool2d_grad:
    case OpKind::avg_pool2d:
    case OpKind::avg_pool2d_grad:
    case OpKind::max_pool3d:
    case OpKind::max_pool3d_grad:
    case OpKind::avg_pool3d:
    case OpKind::avg_pool3d_grad:
    case OpKind::global_avg_pool:
    case OpKind::global_avg_pool_grad:
      return all_f32(graph, node);
    case OpKind::reshape:
      return true;
    case OpKind::softmax_cross_entropy:
      return all_f32(graph, node, 1);
    case OpKind::softmax_cross_entropy_grad:
      return all_f32(graph, node, 2);
    default:
      return false;
  }
}

Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, const Node& node,
                                            std::shared_ptr<const Context> context) {
  if (!has_kernel(graph, node)) {
    return Status::error("the cuda backend has no kernel for " + std::string(op_name(node.op)));
  }
  if (conv_has_kernel(graph, node)) return make_conv_kernel(graph, node, std::move(context));
  const int64_t count = graph.value(node.outputs[0]).elements();
  std::unique_ptr<Kernel> kernel;
  switch (node.op) {
    case OpKind::fill:
      kernel = std::make_unique<FillKernel>(context, count, std::get<FillAttrs>(node.attrs).value);
      break;
    case OpKind::reshape:
      kernel = std::make_unique<CopyKernel>(context, graph.value(node.outputs[0]).bytes());
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
      kernel = std::make_unique<UnaryKernel>(context, op, count, alpha);
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
      kernel = std::make_unique<UnaryGradKernel>(context, op, count);
      break;
    }
    case OpKind::add:
    case OpKind::sub:
    case OpKind::mul: {
      const Binary op = node.op == OpKind::add   ? Binary::add
                        : node.op == OpKind::sub ? Binary::sub
                                                 : Binary::mul;
      kernel = std::make_unique<BinaryKernel>(
          context, op,
          broadcast_shape(shape_of(graph, node.inputs[0]), shape_of(graph, node.inputs[1]),
                          shape_of(graph, node.outputs[0])));
      break;
    }
    case OpKind::max_pool2d:
    case OpKind::avg_pool2d:
      kernel = std::make_unique<PoolKernel>(
          context, node.op == OpKind::max_pool2d ? Pool::max : Pool::average, false,
          pool_shape(shape_of(graph, node.inputs[0]), shape_of(graph, node.outputs[0]),
                     std::get<Pool2dAttrs>(node.attrs)));
      break;
    case OpKind::max_pool3d:
    case OpKind::avg_pool3d:
      kernel = std::make_unique<PoolKernel>(
          context, node.op == OpKind::max_pool3d ? Pool::max : Pool::average, false,
          pool_shape(shape_of(graph, node.inputs[0]), shape_of(graph, node.outputs[0]),
                     std::get<Pool3dAttrs>(node.attrs)));
      break;
    case OpKind::max_pool2d_grad:  // (dy, x) -> dx
      kernel = std::make_unique<PoolKernel>(
          context, Pool::max, true,
          pool_shape(shape_of(graph, node.inputs[1]), shape_of(graph, node.inputs[0]),
                     std::get<Pool2dAttrs>(node.attrs)));
      break;
    case OpKind::max_pool3d_grad:
      kernel = std::make_unique<PoolKernel>(
          context, Pool::max, true,
          pool_shape(shape_of(graph, node.inputs[1]), shape_of(graph, node.inputs[0]),
                     std::get<Pool3dAttrs>(node.attrs)));
      break;
    case OpKind::avg_pool2d_grad: {  // dy -> dx of attrs.shape
      const auto& attrs = std::get<Pool2dGradAttrs>(node.attrs);
      kernel = std::make_unique<PoolKernel>(
          context, Pool::average, true,
          pool_shape(attrs.shape, shape_of(graph, node.inputs[0]), attrs));
      break;
    }
    case OpKind::avg_pool3d_grad: {
      const auto& attrs = std::get<Pool3dGradAttrs>(node.attrs);
      kernel = std::make_unique<PoolKernel>(
          context, Pool::average, true,
          pool_shape(attrs.shape, shape_of(graph, node.inputs[0]), attrs));
      break;
    }
    case OpKind::global_avg_pool:
      kernel = std::make_unique<PoolKernel>(context, Pool::average, false,
                                            global_pool_shape(shape_of(graph, node.inputs[0])));
      break;
    case OpKind::global_avg_pool_grad:
      kernel = std::make_unique<PoolKernel>(context, Pool::average, true,
                                            global_pool_shape(shape_of(graph, node.outputs[0])));
      break;
    case OpKind::softmax:
    case OpKind::softmax_grad:
    case OpKind::log_softmax:
    case OpKind::log_softmax_grad: {
      const RowOp op = node.op == OpKind::softmax        ? RowOp::softmax
                       : node.op == OpKind::softmax_grad ? RowOp::softmax_grad
                       : node.op == OpKind::log_softmax  ? RowOp::log_softmax
                                                         : RowOp::log_softmax_grad;
      const memfit::Shape& x = shape_of(graph, node.inputs[0]);
      const auto axis = static_cast<size_t>(std::get<AxisAttrs>(node.attrs).axis);
      int64_t outer = 1, inner = 1;
      for (size_t d = 0; d < axis; ++d) outer *= x[d];
      for (size_t d = axis + 1; d < x.size(); ++d) inner *= x[d];
      kernel = std::make_unique<RowsKernel>(context, op, outer, x[axis], inner);
      break;
    }
    case OpKind::dropout:
      kernel = std::make_unique<DropoutKernel>(context, count, std::get<DropoutAttrs>(node.attrs));
      break;
    case OpKind::reduce_sum:
    case OpKind::reduce_mean: {
      const memfit::Shape& x = shape_of(graph, node.inputs[0]);
      const ReduceShape shape = reduce_shape(x, std::get<ReduceAttrs>(node.attrs).axes);
      int64_t reduced = 1;
      for (int d = 0; d < shape.reduced_rank; ++d) reduced *= shape.reduced_sizes[d];
      const double scale =
          node.op == OpKind::reduce_mean ? 1.0 / static_cast<double>(reduced) : 1.0;
      kernel = std::make_unique<ReduceKernel>(context, shape, scale);
      break;
    }
    case OpKind::softmax_cross_entropy: {
      const memfit::Shape& logits = shape_of(graph, node.inputs[0]);
      kernel = std::make_unique<CrossEntropyKernel>(context, logits[0], logits[1]);
      break;
    }
    case OpKind::softmax_cross_entropy_grad: {
      const memfit::Shape& logits = shape_of(graph, node.inputs[1]);
      kernel = std::make_unique<CrossEntropyGradKernel>(context, logits[0], logits[1]);
      break;
    }
    case OpKind::sgd_update:
      kernel = std::make_unique<SgdKernel>(context, count, std::get<SgdAttrs>(node.attrs));
      break;
    case OpKind::adamw_update:
      kernel = std::make_unique<AdamWKernel>(context, count, std::get<AdamWAttrs>(node.attrs));
      break;
    case OpKind::matmul:
    case OpKind::linear:
    case OpKind::linear_relu:
      return make_product_kernel(graph, node, std::move(context));
    default:
      break;
  }
  return kernel;
}

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
