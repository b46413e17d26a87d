// The cuda backend's 2-D convolutions on cuDNN (cuda_kernels.h): conv2d and
// its fused forms (conv2d_relu, conv2d_add) and both gradients. Each kernel
// describes its tensors once, asks cuDNN for its algorithms by heuristics
// and takes the first that is deterministic and computes in plain FP32
// (CUDNN_FMA_MATH: no TF32), and plans the workspace cuDNN says that
// algorithm needs. The bias, the residual and relu follow the convolution
// (launch_bias_add_relu); the bias gradient is a sum over N, H and W
// (launch_reduce_sum, in a fixed order).
#include "backends/cuda/cuda_kernels.h"

#ifdef MEMFIT_HAVE_CUDA

#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "backends/cuda/cuda_launch.h"

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

// The descriptors of one convolution: x (N, C, H, W), w (O, C/groups, KH, KW),
// y (N, O, OH, OW).
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
  Status create(const Shape& x_shape, const Shape& w_shape, const Shape& y_shape, Pair stride,
                Pair pad, Pair dilation, int64_t groups) {
    auto i = [](int64_t v) { return static_cast<int>(v); };
    MEMFIT_CUDNN_CALL(cudnnCreateTensorDescriptor(&x));
    MEMFIT_CUDNN_CALL(cudnnCreateTensorDescriptor(&y));
    MEMFIT_CUDNN_CALL(cudnnCreateFilterDescriptor(&w));
    MEMFIT_CUDNN_CALL(cudnnCreateConvolutionDescriptor(&conv));
    MEMFIT_CUDNN_CALL(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                 i(x_shape[0]), i(x_shape[1]), i(x_shape[2]),
                                                 i(x_shape[3])));
    MEMFIT_CUDNN_CALL(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT,
                                                 i(y_shape[0]), i(y_shape[1]), i(y_shape[2]),
                                                 i(y_shape[3])));
    MEMFIT_CUDNN_CALL(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                 i(w_shape[0]), i(w_shape[1]), i(w_shape[2]),
                                                 i(w_shape[3])));
    MEMFIT_CUDNN_CALL(cudnnSetConvolution2dDescriptor(conv, i(pad[0]), i(pad[1]), i(stride[0]),
                                                      i(stride[1]), i(dilation[0]), i(dilation[1]),
                                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    MEMFIT_CUDNN_CALL(cudnnSetConvolutionGroupCount(conv, i(groups)));
    MEMFIT_CUDNN_CALL(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH));
    return Status::ok();
  }
};

// The first of cuDNN's heuristic choices that ran its checks, is
// deterministic and uses plain FP32 arithmetic.
template <class Perf>
Result<Perf> first_deterministic(const Perf* perf, int count, const char* what) {
  for (int k = 0; k < count; ++k) {
    const bool tensor_ops = perf[k].mathType == CUDNN_TENSOR_OP_MATH ||
                            perf[k].mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].determinism == CUDNN_DETERMINISTIC &&
        !tensor_ops) {
      return perf[k];
    }
  }
  return Status::error(std::string("cuDNN offers no deterministic FP32 algorithm for ") + what);
}

class ConvKernel final : public Kernel {
 public:
  enum class Direction { forward, data, filter };
  ConvKernel(std::shared_ptr<const Context> context, Direction direction)
      : context_(std::move(context)), direction_(direction) {}

  // Describes the convolution and chooses its algorithm.
  Status create(const Graph& graph, const Node& node) {
    const auto shape = [&](ValueId v) -> const Shape& { return graph.value(v).type.shape; };
    auto dnn = static_cast<cudnnHandle_t>(context_->dnn);
    constexpr int kAsk = 16;
    int returned = 0;
    if (direction_ == Direction::forward) {
      const auto& a = std::get<Conv2dAttrs>(node.attrs);
      MEMFIT_RETURN_IF_ERROR(d_.create(shape(node.inputs[0]), shape(node.inputs[1]),
                                       shape(node.outputs[0]), a.stride, a.pad, a.dilation,
                                       a.groups));
      relu_ = node.op == OpKind::conv2d_relu;
      if (node.op == OpKind::conv2d_add) {
        residual_ = 2;
        if (node.inputs.size() == 4) bias_ = 3;
      } else if (node.inputs.size() == 3) {
        bias_ = 2;
      }
      y_count_ = graph.value(node.outputs[0]).elements();
      channels_ = shape(node.outputs[0])[1];
      inner_ = shape(node.outputs[0])[2] * shape(node.outputs[0])[3];
      cudnnConvolutionFwdAlgoPerf_t perf[kAsk];
      MEMFIT_CUDNN_CALL(cudnnGetConvolutionForwardAlgorithm_v7(dnn, d_.x, d_.w, d_.conv, d_.y, kAsk,
                                                               &returned, perf));
      MEMFIT_ASSIGN_OR_RETURN(auto chosen, first_deterministic(perf, returned, "conv2d"));
      forward_ = chosen.algo;
      MEMFIT_CUDNN_CALL(cudnnGetConvolutionForwardWorkspaceSize(dnn, d_.x, d_.w, d_.conv, d_.y,
                                                                forward_, &workspace_));
      return Status::ok();
    }
    const auto& a = std::get<Conv2dGradAttrs>(node.attrs);
    if (direction_ == Direction::data) {  // (dy, w) -> dx
      MEMFIT_RETURN_IF_ERROR(d_.create(a.shape, shape(node.inputs[1]), shape(node.inputs[0]),
                                       a.stride, a.pad, a.dilation, a.groups));
      cudnnConvolutionBwdDataAlgoPerf_t perf[kAsk];
      MEMFIT_CUDNN_CALL(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn, d_.w, d_.y, d_.conv, d_.x,
                                                                    kAsk, &returned, perf));
      MEMFIT_ASSIGN_OR_RETURN(auto chosen,
                              first_deterministic(perf, returned, "conv2d_grad_input"));
      data_ = chosen.algo;
      MEMFIT_CUDNN_CALL(cudnnGetConvolutionBackwardDataWorkspaceSize(dnn, d_.w, d_.y, d_.conv, d_.x,
                                                                     data_, &workspace_));
      return Status::ok();
    }
    // (dy, x) -> dw [, db]
    MEMFIT_RETURN_IF_ERROR(d_.create(shape(node.inputs[1]), a.shape, shape(node.inputs[0]),
                                     a.stride, a.pad, a.dilation, a.groups));
    if (a.bias) {
      const Shape& dy = shape(node.inputs[0]);
      db_.kept_rank = 1;
      db_.kept_sizes[0] = dy[1];
      db_.kept_strides[0] = dy[2] * dy[3];
      db_.reduced_rank = 2;
      db_.reduced_sizes[0] = dy[0];
      db_.reduced_strides[0] = dy[1] * dy[2] * dy[3];
      db_.reduced_sizes[1] = dy[2] * dy[3];
      db_.reduced_strides[1] = 1;
    }
    bias_gradient_ = a.bias;
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kAsk];
    MEMFIT_CUDNN_CALL(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn, d_.x, d_.y, d_.conv, d_.w,
                                                                    kAsk, &returned, perf));
    MEMFIT_ASSIGN_OR_RETURN(auto chosen, first_deterministic(perf, returned, "conv2d_grad_weight"));
    filter_ = chosen.algo;
    MEMFIT_CUDNN_CALL(cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn, d_.x, d_.y, d_.conv, d_.w,
                                                                     filter_, &workspace_));
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
        cudnnConvolutionForward(dnn, &one, d_.x, args.inputs[0], d_.w, args.inputs[1], d_.conv,
                                forward_, args.workspace, workspace_, &beta, d_.y, y);
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
        cudnnConvolutionBackwardData(dnn, &one, d_.w, args.inputs[1], d_.y, args.inputs[0], d_.conv,
                                     data_, args.workspace, workspace_, &beta, d_.x,
                                     args.outputs[0]);
        return;
      case Direction::filter:
        cudnnConvolutionBackwardFilter(dnn, &one, d_.x, args.inputs[1], d_.y, args.inputs[0],
                                       d_.conv, filter_, args.workspace, workspace_, &beta, d_.w,
                                       args.outputs[0]);
        if (bias_gradient_) {
          launch_reduce_sum(static_cast<const float*>(args.inputs[0]),
                            static_cast<float*>(args.outputs[1]), db_, 1.0, context_->stream);
        }
        return;
    }
  }

 private:
  std::shared_ptr<const Context> context_;
  Direction direction_;
  ConvDescriptors d_;
  cudnnConvolutionFwdAlgo_t forward_{};
  cudnnConvolutionBwdDataAlgo_t data_{};
  cudnnConvolutionBwdFilterAlgo_t filter_{};
  size_t workspace_ = 0;
  int bias_ = -1, residual_ = -1;
  bool relu_ = false, bias_gradient_ = false;
  int64_t y_count_ = 0, channels_ = 0, inner_ = 0;
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
      break;
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

Result<std::unique_ptr<Kernel>> make_conv_kernel(const Graph& graph, const Node& node,
                                                 std::shared_ptr<const Context> context) {
  const ConvKernel::Direction direction =
      node.op == OpKind::conv2d_grad_input    ? ConvKernel::Direction::data
      : node.op == OpKind::conv2d_grad_weight ? ConvKernel::Direction::filter
                                              : ConvKernel::Direction::forward;
  auto kernel = std::make_unique<ConvKernel>(std::move(context), direction);
  if (Status made = kernel->create(graph, node); !made.is_ok()) {
    return Status::error("node '" + node.name + "': " + made.message());
  }
  return std::unique_ptr<Kernel>(std::move(kernel));
}

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
