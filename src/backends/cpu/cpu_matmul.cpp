// matmul and linear on oneDNN's matmul primitive. Transposed operands are
// read in place through strided descriptors, never copied.
#include <utility>
#include <variant>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

using dnnl::memory;

// The matrix operand stored row-major as `stored`, seen as `rank` dims
// (..., rows, cols). Missing leading dims get size 1, which oneDNN broadcasts
// (a 2-D b shared by every batch); a transposed operand swaps the last two
// dims together with their strides.
memory::desc matrix_md(const Shape& stored, bool transposed, size_t rank) {
  Shape dims(rank - stored.size(), 1);
  dims.insert(dims.end(), stored.begin(), stored.end());
  memory::dims strides(rank);
  int64_t stride = 1;
  for (size_t i = rank; i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  if (transposed) {
    std::swap(dims[rank - 2], dims[rank - 1]);
    std::swap(strides[rank - 2], strides[rank - 1]);
  }
  return memory::desc(to_dims(dims), memory::data_type::f32, strides);
}

// a (..., M, K), b (..., K, N) or (K, N), each possibly stored transposed -> y (..., M, N).
std::unique_ptr<Kernel> matmul_kernel(const Graph& graph, const Node& node) {
  const auto& attrs = std::get<MatmulAttrs>(node.attrs);
  const Shape& y_shape = output_shape(graph, node, 0);
  const memory::desc a = matrix_md(input_shape(graph, node, 0), attrs.trans_a, y_shape.size());
  const memory::desc b = matrix_md(input_shape(graph, node, 1), attrs.trans_b, y_shape.size());
  const memory::desc y = plain_md(y_shape);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, y), kernel_attr(), engine());
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(pd, {input_arg(DNNL_ARG_SRC, 0, a), input_arg(DNNL_ARG_WEIGHTS, 1, b),
                   output_arg(DNNL_ARG_DST, 0, y)});
  return kernel;
}

// x (N, I), w (O, I), optional b (O) -> y (N, O) = x w^T + b: w is the
// transposed weights operand, b a (1, O) bias broadcast over the rows.
std::unique_ptr<Kernel> linear_kernel(const Graph& graph, const Node& node) {
  const memory::desc x = plain_md(input_shape(graph, node, 0));
  const memory::desc w = matrix_md(input_shape(graph, node, 1), true, 2);
  const Shape& y_shape = output_shape(graph, node, 0);
  const memory::desc y = plain_md(y_shape);
  std::vector<ArgBuffer> args = {input_arg(DNNL_ARG_SRC, 0, x), input_arg(DNNL_ARG_WEIGHTS, 1, w),
                                 output_arg(DNNL_ARG_DST, 0, y)};
  const bool bias = node.inputs.size() == 3;
  const memory::desc b = plain_md({1, y_shape[1]});
  if (bias) args.push_back(input_arg(DNNL_ARG_BIAS, 2, b));
  const dnnl::matmul::desc desc =
      bias ? dnnl::matmul::desc(x, w, b, y) : dnnl::matmul::desc(x, w, y);
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(dnnl::matmul::primitive_desc(desc, kernel_attr(), engine()), args);
  return kernel;
}

}  // namespace

std::unique_ptr<Kernel> make_matmul_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::matmul:
      return matmul_kernel(graph, node);
    case OpKind::linear:
      return linear_kernel(graph, node);
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace memfit::cpu
