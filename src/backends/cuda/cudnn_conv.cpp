// The cuda backend's convolutions on cuDNN (cuda_kernels.h): conv2d and its
// fused forms (conv2d_relu, conv2d_add), conv3d, both gradients of each, and
// the transposed convolutions (conv_transpose2d, conv_transpose3d: the data
// gradient of the convolution that maps their output space back to their
// input space, ops_conv_transpose.cpp). Each kernel describes its tensors
// once, asks cuDNN for its algorithms by heuristics and takes the first that
// is deterministic and computes in plain FP32 (CUDNN_FMA_MATH: no TF32; with
// --fastest-kernels, the first that runs, on TF32 tensor cores too), and
// plans the workspace cuDNN says that algorithm needs. The bias, the residual
// and relu follow the convolution (launch_bias_add_relu); the bias gradient
// is a sum over N and space (launch_reduce_sum, in a fixed order).
#include "backends/cuda/cuda_kernels.h"

#ifdef MEMFIT_HAVE_CUDA

#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>
#include <vector>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_launchers.h"
#include "ops/conv_util.h"

namespace memfit::cuda {
namespace {

Status dnn_failed(const char* call, cudnnStatus_t status) {
  return Status::error(std::string("cuDNN: ") + call + ": " + cudnnGetErrorString(status));
}

#define MEMFIT_CUDNN_CALL(call)                                                \
  do {                                                                         \
    if (const cudnnStatus_t status_ = (call); status_ != CUDNN_STATUS_SUCCESS) \
      return dnn_failed(#call, status_);                                       \
  } while (0)

// The descriptors of one convolution of rank R (2 or 3): x (N, C, S...),
// w (O, C/groups, K...), y (N, O, S'...), packed row-major.
struct ConvDescriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ConvDescriptors() = default;
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;
  ~ConvDescriptors() {
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
  }
  // `fastest`: cuDNN may pick any math (TF32 tensor cores too); otherwise
  // only plain FP32 (CUDNN_FMA_MATH).
  Status create(const Shape& x_shape, const Shape& w_shape, const Shape& y_shape,
                const ops::ConvWindow& win, bool fastest) {
    const auto ints = [](const std::vector<int64_t>& v) {
      return std::vector<int>(v.begin(), v.end());
    };
    const int rank = static_cast<int>(x_shape.size());
    MEMFIT_CUDNN_CALL(cudnnCreateTensorDescriptor(&x));
    MEMFIT_CUDNN_CALL(cudnnCreateTensorDescriptor(&y));
    MEMFIT_CUDNN_CALL(cudnnCreateFilterDescriptor(&w));
    MEMFIT_CUDNN_CALL(cudnnCreateConvolutionDescriptor(&conv));
    for (const auto& [desc, shape] : {std::pair{x, &x_shape}, std::pair{y, &y_shape}}) {
      const std::vector<int> dims = ints(*shape);
      std::vector<int> strides(dims.size(), 1);
      for (size_t d = dims.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * dims[d + 1];
      MEMFIT_CUDNN_CALL(
          cudnnSetTensorNdDescriptor(desc, CUDNN_DATA_FLOAT, rank, dims.data(), strides.data()));
    }
    const std::vector<int> w_dims = ints(w_shape);
    MEMFIT_CUDNN_CALL(
        cudnnSetFilterNdDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, rank, w_dims.data()));
    const std::vector<int> pad = ints(win.pad), stride = ints(win.stride),
                           dilation = ints(win.dilation);
    MEMFIT_CUDNN_CALL(cudnnSetConvolutionNdDescriptor(conv, rank - 2, pad.data(), stride.data(),
                                                      dilation.data(), CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT));
    MEMFIT_CUDNN_CALL(cudnnSetConvolutionGroupCount(conv, static_cast<int>(win.groups)));
    // FMA: plain FP32 (cuDNN's default math allows TF32 on Ampere and
    // newer); tensor ops: TF32 for FP32 data, never a conversion to FP16.
    MEMFIT_CUDNN_CALL(
        cudnnSetConvolutionMathType(conv, fastest ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH));
    return Status::ok();
  }
};

// The window of a node's attributes, whichever convolution op it is.
ops::ConvWindow window_of(const Node& node) {
  return std::visit(
      [](const auto& a) -> ops::ConvWindow {
        if constexpr (requires {
                        a.stride;
                        a.groups;
                      }) {
          return ops::conv_window(a);
        } else {
          return {};
        }
      },
      node.attrs);
}

// The kept (channel) and reduced (N and space) axes of a bias gradient from
// dy (N, O, S...): db[o] = sum over n and s of dy.
ReduceShape bias_gradient_shape(const Shape& dy) {
  int64_t inner = 1;
  for (size_t d = 2; d < dy.size(); ++d) inner *= dy[d];
  ReduceShape db;
  db.kept_rank = 1;
  db.kept_sizes[0] = dy[1];
  db.kept_strides[0] = inner;
  db.reduced_rank = 2;
  db.reduced_sizes[0] = dy[0];
  db.reduced_strides[0] = dy[1] * inner;
  db.reduced_sizes[1] = inner;
  db.reduced_strides[1] = 1;
  return db;
}

// The first of cuDNN's heuristic choices that ran its checks, does not
// convert FP32 to FP16, and whose workspace cuDNN can size (`workspace`,
// into `bytes`) in the math type it is set to; unless `fastest`, one that is
// deterministic and computed in plain FP32, CUDNN_FMA_MATH: first those
// cuDNN lists in FMA math, then those in its default math (which allows
// TF32) set to FMA. The convolution's math type is left as the chosen one's.
template <class Perf, class Workspace>
Result<Perf> choose(const Perf* perf, int count, bool fastest, cudnnConvolutionDescriptor_t conv,
                    Workspace workspace, size_t& bytes, const char* what) {
  for (const cudnnMathType_t listed : {CUDNN_FMA_MATH, CUDNN_DEFAULT_MATH}) {
    for (int k = 0; k < count; ++k) {
      const cudnnMathType_t math = perf[k].mathType;
      if (perf[k].status != CUDNN_STATUS_SUCCESS) continue;
      if (math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      if (!fastest && (perf[k].determinism != CUDNN_DETERMINISTIC || math != listed)) continue;
      if (cudnnSetConvolutionMathType(conv, fastest ? math : CUDNN_FMA_MATH) !=
              CUDNN_STATUS_SUCCESS ||
          workspace(perf[k].algo, &bytes) != CUDNN_STATUS_SUCCESS) {
        continue;
      }
      return perf[k];
    }
    if (fastest) break;  // one pass, in cuDNN's order
  }
  return Status::error(std::string("cuDNN offers no ") +
                       (fastest ? "algorithm" : "deterministic FP32 algorithm") + " for " + what);
}

class ConvKernel final : public Kernel {
 public:
  enum class Direction { forward, data, filter };
  // `transposed`: a transposed convolution, computed as a data gradient.
  ConvKernel(std::shared_ptr<const Context> context, Direction direction, bool transposed)
      : context_(std::move(context)), direction_(direction), transposed_(transposed) {}

  // Describes the convolution and chooses its algorithm.
  Status create(const Graph& graph, const Node& node) {
    const auto shape = [&](ValueId v) -> const Shape& { return graph.value(v).type.shape; };
    auto dnn = static_cast<cudnnHandle_t>(context_->dnn);
    const ops::ConvWindow win = window_of(node);
    constexpr int kAsk = 16;
    int returned = 0;
    const auto epilogue = [&](const Shape& y) {  // the bias and relu after cuDNN
      y_count_ = num_elements(y);
      channels_ = y[1];
      inner_ = y_count_ / (y[0] * y[1]);
    };
    if (direction_ == Direction::forward) {
      MEMFIT_RETURN_IF_ERROR(d_.create(shape(node.inputs[0]), shape(node.inputs[1]),
                                       shape(node.outputs[0]), win, context_->fastest));
      relu_ = node.op == OpKind::conv2d_relu;
      if (node.op == OpKind::conv2d_add) {
        residual_ = 2;
        if (node.inputs.size() == 4) bias_ = 3;
      } else if (node.inputs.size() == 3) {
        bias_ = 2;
      }
      epilogue(shape(node.outputs[0]));
      cudnnConvolutionFwdAlgoPerf_t perf[kAsk];
      MEMFIT_CUDNN_CALL(cudnnGetConvolutionForwardAlgorithm_v7(dnn, d_.x, d_.w, d_.conv, d_.y, kAsk,
                                                               &returned, perf));
      const auto sized = [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(dnn, d_.x, d_.w, d_.conv, d_.y, algo, bytes);
      };
      MEMFIT_ASSIGN_OR_RETURN(auto chosen, choose(perf, returned, context_->fastest, d_.conv, sized,
                                                  workspace_, "the convolution"));
      forward_ = chosen.algo;
      return Status::ok();
    }
    if (direction_ == Direction::data) {
      if (transposed_) {  // (x, w [, b]) -> y: the data gradient of c (y-space -> x-space)
        MEMFIT_RETURN_IF_ERROR(d_.create(shape(node.outputs[0]), shape(node.inputs[1]),
                                         shape(node.inputs[0]), win, context_->fastest));
        if (node.inputs.size() == 3) bias_ = 2;
        epilogue(shape(node.outputs[0]));
      } else {  // (dy, w) -> dx of attrs.shape
        MEMFIT_RETURN_IF_ERROR(d_.create(shape(node.outputs[0]), shape(node.inputs[1]),
                                         shape(node.inputs[0]), win, context_->fastest));
      }
      cudnnConvolutionBwdDataAlgoPerf_t perf[kAsk];
      MEMFIT_CUDNN_CALL(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, d_.w, d_.y, d_.conv, d_.x,
                                                                    kAsk, &returned, perf));
      const auto sized = [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(dnn, d_.w, d_.y, d_.conv, d_.x, algo,
                                                            bytes);
      };
      MEMFIT_ASSIGN_OR_RETURN(auto chosen, choose(perf, returned, context_->fastest, d_.conv, sized,
                                                  workspace_, "the convolution's data gradient"));
      data_ = chosen.algo;
      return Status::ok();
    }
    // (dy, x) -> dw [, db]
    MEMFIT_RETURN_IF_ERROR(d_.create(shape(node.inputs[1]), shape(node.outputs[0]),
                                     shape(node.inputs[0]), win, context_->fastest));
    bias_gradient_ = node.outputs.size() == 2;
    if (bias_gradient_) db_ = bias_gradient_shape(shape(node.inputs[0]));
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kAsk];
    MEMFIT_CUDNN_CALL(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, d_.x, d_.y, d_.conv, d_.w,
                                                                    kAsk, &returned, perf));
    const auto sized = [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
      return cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn, d_.x, d_.y, d_.conv, d_.w, algo,
                                                            bytes);
    };
    MEMFIT_ASSIGN_OR_RETURN(auto chosen, choose(perf, returned, context_->fastest, d_.conv, sized,
                                                workspace_, "the convolution's weight gradient"));
    filter_ = chosen.algo;
    return Status::ok();
  }

  size_t workspace_bytes() const override { return workspace_; }

  void run(const KernelArgs& args) override {
    auto dnn = static_cast<cudnnHandle_t>(context_->dnn);
    const float one = 1.0f;
    float beta = 0.0f;
    switch (direction_) {
      case Direction::forward: {
        auto* y = static_cast<float*>(args.outputs[0]);
        if (residual_ >= 0) {
          // The convolution goes onto the residual: y starts as r.
          const void* r = args.inputs[static_cast<size_t>(residual_)];
          if (r != y) {
            cudaMemcpyAsync(y, r, static_cast<size_t>(y_count_) * sizeof(float),
                            cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(context_->stream));
          }
          beta = 1.0f;
        }
        check(
            cudnnConvolutionForward(dnn, &one, d_.x, args.inputs[0], d_.w, args.inputs[1], d_.conv,
                                    forward_, args.workspace, workspace_, &beta, d_.y, y),
            "cudnnConvolutionForward");
        if (bias_ >= 0 || relu_) {
          launch_bias_add_relu(
              y,
              bias_ >= 0 ? static_cast<const float*>(args.inputs[static_cast<size_t>(bias_)])
                         : nullptr,
              nullptr, y_count_, channels_, inner_, relu_, context_->stream);
        }
        return;
      }
      case Direction::data:
        check(cudnnConvolutionBackwardData(dnn, &one, d_.w, args.inputs[1], d_.y, args.inputs[0],
                                           d_.conv, data_, args.workspace, workspace_, &beta, d_.x,
                                           args.outputs[0]),
              "cudnnConvolutionBackwardData");
        if (bias_ >= 0) {
          launch_bias_add_relu(static_cast<float*>(args.outputs[0]),
                               static_cast<const float*>(args.inputs[static_cast<size_t>(bias_)]),
                               nullptr, y_count_, channels_, inner_, false, context_->stream);
        }
        return;
      case Direction::filter:
        check(cudnnConvolutionBackwardFilter(dnn, &one, d_.x, args.inputs[1], d_.y, args.inputs[0],
                                             d_.conv, filter_, args.workspace, workspace_, &beta,
                                             d_.w, args.outputs[0]),
              "cudnnConvolutionBackwardFilter");
        if (bias_gradient_) {
          launch_reduce_sum(static_cast<const float*>(args.inputs[0]),
                            static_cast<float*>(args.outputs[1]), db_, 1.0, context_->stream);
        }
        return;
    }
  }

 private:
  // A failed call leaves its output unwritten: the step's synchronize says so.
  void check(cudnnStatus_t status, const char* call) const {
    if (status == CUDNN_STATUS_SUCCESS) return;
    report_error(*context_->device,
                 Status::error(std::string(call) + ": " + cudnnGetErrorString(status)));
  }

  std::shared_ptr<const Context> context_;
  Direction direction_;
  bool transposed_ = false;
  ConvDescriptors d_;
  cudnnConvolutionFwdAlgo_t forward_{};
  cudnnConvolutionBwdDataAlgo_t data_{};
  cudnnConvolutionBwdFilterAlgo_t filter_{};
  size_t workspace_ = 0;
  int bias_ = -1, residual_ = -1;
  bool relu_ = false, bias_gradient_ = false;
  int64_t y_count_ = 0, channels_ = 0, inner_ = 0;  // the output, for the epilogue
  ReduceShape db_;
};

}  // namespace

bool conv_has_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::conv2d:
    case OpKind::conv2d_relu:
    case OpKind::conv2d_add:
    case OpKind::conv2d_grad_input:
    case OpKind::conv2d_grad_weight:
    case OpKind::conv3d:
    case OpKind::conv3d_grad_input:
    case OpKind::conv3d_grad_weight:
      break;
    case OpKind::conv_transpose2d:
    case OpKind::conv_transpose3d: {
      // Where output_padding reaches the stride, the convolution of y's
      // shape is larger than x, and no data gradient of cuDNN's has x's shape.
      const Shape& x = graph.value(node.inputs[0]).type.shape;
      const Result<Shape> back =
          ops::conv_output(graph.value(node.outputs[0]).type.shape,
                           graph.value(node.inputs[1]).type.shape, window_of(node));
      if (!back || *back != x) return false;
      break;
    }
    default:
      return false;
  }
  for (const auto* list : {&node.inputs, &node.outputs}) {
    for (ValueId v : *list) {
      const Value& value = graph.value(v);
      if (value.type.dtype != DType::f32 || value.layout != Layout::plain) return false;
    }
  }
  return true;
}

namespace {

Result<std::unique_ptr<Kernel>> make_conv_kernel(const Graph& graph, const Node& node,
                                                 std::shared_ptr<const Context> context) {
  const bool transposed =
      node.op == OpKind::conv_transpose2d || node.op == OpKind::conv_transpose3d;
  const ConvKernel::Direction direction =
      node.op == OpKind::conv2d_grad_input || node.op == OpKind::conv3d_grad_input || transposed
          ? ConvKernel::Direction::data
      : node.op == OpKind::conv2d_grad_weight || node.op == OpKind::conv3d_grad_weight
          ? ConvKernel::Direction::filter
          : ConvKernel::Direction::forward;
  auto kernel = std::make_unique<ConvKernel>(std::move(context), direction, transposed);
  if (Status made = kernel->create(graph, node); !made.is_ok()) {
    return Status::error("node '" + node.name + "': " + made.message());
  }
  return std::unique_ptr<Kernel>(std::move(kernel));
}

}  // namespace

MEMFIT_CUDA_KERNEL(conv2d, conv_has_kernel, make_conv_kernel)
MEMFIT_CUDA_KERNEL(conv2d_relu, conv_has_kernel, make_conv_kernel)
MEMFIT_CUDA_KERNEL(conv2d_add, conv_has_kernel, make_conv_kernel)
MEMFIT_CUDA_KERNEL(conv2d_grad_input, conv_has_kernel, make_conv_kernel)
MEMFIT_CUDA_KERNEL(conv2d_grad_weight, conv_has_kernel, make_conv_kernel)
MEMFIT_CUDA_KERNEL(conv3d, conv_has_kernel, make_conv_kernel)
MEMFIT_CUDA_KERNEL(conv3d_grad_input, conv_has_kernel, make_conv_kernel)
MEMFIT_CUDA_KERNEL(conv3d_grad_weight, conv_has_kernel, make_conv_kernel)
MEMFIT_CUDA_KERNEL(conv_transpose2d, conv_has_kernel, make_conv_kernel)
MEMFIT_CUDA_KERNEL(conv_transpose3d, conv_has_kernel, make_conv_kernel)

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA

#ifndef MEMFIT_HAVE_CUDA  // without CUDA: no backend is made, so no convolution is asked for

namespace memfit::cuda {

bool conv_has_kernel(const Graph&, const Node&) { return false; }

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
