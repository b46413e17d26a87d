// The cuda backend's products on cuBLAS (cuda_kernels.h): matmul, linear
// and linear_relu as one strided batched SGEMM in the planned workspace,
// the bias and relu after it.
#include "backends/cuda/cuda_kernels.h"

#ifdef MEMFIT_HAVE_CUDA

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/cuda/cublas_library.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_kernel_util.h"
#include "backends/cuda/cuda_launchers.h"
#include "memory/memory_plan.h"

namespace memfit::cuda {
namespace {

constexpr size_t kBlasAlignment = 256;  // cublasSetWorkspace's
static_assert(kBlasAlignment % kArenaAlignment == 0);

// y = a b (+ c) for matmul (batched, b shared when 2-D), y = x w^T (+ bias)
// (+ c) (then relu) for linear and linear_relu: cuBLAS's product in its
// planned workspace, then the bias and relu by launch_bias_add_relu. memfit
// is row-major and cuBLAS column-major: y^T = b^T a^T, so cuBLAS computes
// with the operands swapped.
class ProductKernel final : public Kernel {
 public:
  struct Shape {
    int64_t batch = 1, m = 0, n = 0, k = 0;
    bool trans_a = false, trans_b = false;
    int64_t b_batch_stride = 0;
    int bias = -1, add = -1;  // the inputs that hold them, or -1
    bool relu = false;
  };
  ProductKernel(std::shared_ptr<const Context> context, Shape shape)
      : context_(std::move(context)), shape_(shape) {}
  // cuBLAS takes a workspace aligned to 256 bytes; a planned slice is
  // aligned to kArenaAlignment, so the slice is that much larger.
  size_t workspace_bytes() const override {
    return context_->blas_workspace_bytes + kBlasAlignment - kArenaAlignment;
  }
  void run(const KernelArgs& args) override {
    auto blas = static_cast<cublasHandle_t>(context_->blas);
    const CublasLibrary& cublas = **cublas_library();  // opened: the backend made the handle
    const auto s = static_cast<cudaStream_t>(context_->stream);
    float* y = out(args, 0);
    float beta = 0.0f;
    if (shape_.add >= 0) {
      // The product goes onto c: y starts as c.
      const float* c = in(args, static_cast<size_t>(shape_.add));
      if (c != y) {
        cudaMemcpyAsync(y, c,
                        static_cast<size_t>(shape_.batch * shape_.m * shape_.n) * sizeof(float),
                        cudaMemcpyDeviceToDevice, s);
      }
      beta = 1.0f;
    }
    const auto at = reinterpret_cast<uintptr_t>(args.workspace);
    auto* workspace = reinterpret_cast<void*>((at + kBlasAlignment - 1) / kBlasAlignment *
                                              kBlasAlignment);  // within the slice's padding
    const auto check = [&](cublasStatus_t status, const char* call) {
      if (status == CUBLAS_STATUS_SUCCESS) return true;
      report_error(*context_->device,
                   Status::error(std::string(call) + ": " + cublas.status_string(status)));
      return false;
    };
    // Refused, cuBLAS would keep the workspace it had: another node's slice.
    if (!check(cublas.set_workspace(blas, workspace, context_->blas_workspace_bytes),
               "cublasSetWorkspace")) {
      return;
    }
    const float alpha = 1.0f;
    const int m = static_cast<int>(shape_.n), n = static_cast<int>(shape_.m),
              k = static_cast<int>(shape_.k);
    check(cublas.sgemm_strided_batched(blas, shape_.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                       shape_.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha,
                                       in(args, 1), shape_.trans_b ? k : m, shape_.b_batch_stride,
                                       in(args, 0), shape_.trans_a ? n : k, shape_.m * shape_.k,
                                       &beta, y, m, shape_.m * shape_.n,
                                       static_cast<int>(shape_.batch)),
          "cublasSgemmStridedBatched");
    if (shape_.bias >= 0 || shape_.relu) {
      launch_bias_add_relu(
          y, shape_.bias >= 0 ? in(args, static_cast<size_t>(shape_.bias)) : nullptr, nullptr,
          shape_.batch * shape_.m * shape_.n, shape_.n, 1, shape_.relu, context_->stream);
    }
  }

 private:
  std::shared_ptr<const Context> context_;
  Shape shape_;
};

ProductKernel::Shape product_shape(const Graph& graph, const Node& node) {
  ProductKernel::Shape s;
  const memfit::Shape& a = graph.value(node.inputs[0]).type.shape;
  const memfit::Shape& b = graph.value(node.inputs[1]).type.shape;
  if (node.op == OpKind::matmul) {
    const auto& attrs = std::get<MatmulAttrs>(node.attrs);
    const size_t rank = a.size();
    s.trans_a = attrs.trans_a;
    s.trans_b = attrs.trans_b;
    s.m = s.trans_a ? a[rank - 1] : a[rank - 2];
    s.k = s.trans_a ? a[rank - 2] : a[rank - 1];
    s.n = s.trans_b ? b[b.size() - 2] : b[b.size() - 1];
    for (size_t d = 0; d + 2 < rank; ++d) s.batch *= a[d];
    s.b_batch_stride = b.size() == 2 ? 0 : s.k * s.n;
    if (node.inputs.size() == 3) s.add = 2;
    return s;
  }
  // linear, linear_relu: x (N, I), w (O, I), optional bias (O), c (N, O).
  s.m = a[0];
  s.k = a[1];
  s.n = b[0];
  s.trans_b = true;
  if (node.inputs.size() >= 3) s.bias = 2;
  if (node.inputs.size() == 4) s.add = 3;
  s.relu = node.op == OpKind::linear_relu;
  return s;
}

// matmul: a of rank 2 or more (cuBLAS's strided batches over the rest).
bool matmul_has_kernel(const Graph& graph, const Node& node) {
  return has_op_dtypes(graph, node) && graph.value(node.inputs[0]).type.shape.size() >= 2;
}

Result<std::unique_ptr<Kernel>> make_product_kernel(const Graph& graph, const Node& node,
                                                    std::shared_ptr<const Context> context) {
  return std::unique_ptr<Kernel>(
      std::make_unique<ProductKernel>(std::move(context), product_shape(graph, node)));
}

}  // namespace

MEMFIT_CUDA_KERNEL(matmul, matmul_has_kernel, make_product_kernel)
MEMFIT_CUDA_KERNEL(linear, has_op_dtypes, make_product_kernel)
MEMFIT_CUDA_KERNEL(linear_relu, has_op_dtypes, make_product_kernel)

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
