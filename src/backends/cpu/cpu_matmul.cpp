// matmul and linear on oneDNN's matmul primitive. Transposed operands are
// read in place through strided descriptors, never copied. A matmul with a
// third input c (a linear with a fourth) adds the product into it with a sum
// post-op: y holds c first (it is c when the planner wrote y in place), then
// y += product. oneDNN may add c to partial sums over blocks of K, so the
// result agrees with a matmul (linear) followed by an add within float
// rounding, not always bit for bit. linear_relu applies its ReLU as an
// eltwise post-op, on the float result: the bits of linear then relu.
#include <cstring>
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

// The attributes of a matmul primitive, with a sum post-op when it adds into
// y and a ReLU after it for linear_relu.
dnnl::primitive_attr matmul_attr(bool add_into, bool relu = false) {
  return post_op_attr(add_into, relu);
}

std::unique_ptr<PrimitiveKernel> primitive_kernel(const Graph& graph, const Node& node,
                                                  bool add_into, size_t c_input) {
  if (!add_into) return std::make_unique<PrimitiveKernel>();
  return std::make_unique<AddIntoKernel>(graph.value(node.outputs[0]).bytes(), c_input);
}

// a (..., M, K), b (..., K, N) or (K, N), each possibly stored transposed
// [, c like y] -> y (..., M, N) [+ c].
std::unique_ptr<Kernel> matmul_kernel(const Graph& graph, const Node& node) {
  const auto& attrs = std::get<MatmulAttrs>(node.attrs);
  const Shape& y_shape = output_shape(graph, node, 0);
  const memory::desc a = matrix_md(input_shape(graph, node, 0), attrs.trans_a, y_shape.size());
  const memory::desc b = matrix_md(input_shape(graph, node, 1), attrs.trans_b, y_shape.size());
  const memory::desc y = plain_md(y_shape);
  const bool add_into = node.inputs.size() == 3;
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, y), matmul_attr(add_into),
                                        engine());
  std::unique_ptr<PrimitiveKernel> kernel = primitive_kernel(graph, node, add_into, 2);
  kernel->add(pd, {input_arg(DNNL_ARG_SRC, 0, a), input_arg(DNNL_ARG_WEIGHTS, 1, b),
                   output_arg(DNNL_ARG_DST, 0, y)});
  return kernel;
}

// x (N, I), w (O, I), optional b (O) [, c (N, O)] -> y (N, O) = x w^T + b [+ c]:
// w is the transposed weights operand, b a (1, O) bias broadcast over the rows.
// linear_relu: y = relu(x w^T + b), the ReLU an eltwise post-op.
std::unique_ptr<Kernel> linear_kernel(const Graph& graph, const Node& node) {
  const memory::desc x = plain_md(input_shape(graph, node, 0));
  const memory::desc w = matrix_md(input_shape(graph, node, 1), true, 2);
  const Shape& y_shape = output_shape(graph, node, 0);
  const memory::desc y = plain_md(y_shape);
  std::vector<ArgBuffer> args = {input_arg(DNNL_ARG_SRC, 0, x), input_arg(DNNL_ARG_WEIGHTS, 1, w),
                                 output_arg(DNNL_ARG_DST, 0, y)};
  const bool bias = node.inputs.size() >= 3;
  const bool add_into = node.inputs.size() == 4;
  const memory::desc b = plain_md({1, y_shape[1]});
  if (bias) args.push_back(input_arg(DNNL_ARG_BIAS, 2, b));
  const dnnl::matmul::desc desc =
      bias ? dnnl::matmul::desc(x, w, b, y) : dnnl::matmul::desc(x, w, y);
  std::unique_ptr<PrimitiveKernel> kernel = primitive_kernel(graph, node, add_into, 3);
  const bool relu = node.op == OpKind::linear_relu;
  kernel->add(dnnl::matmul::primitive_desc(desc, matmul_attr(add_into, relu), engine()), args);
  return kernel;
}

std::unique_ptr<Kernel> make_matmul_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::matmul:
      return matmul_kernel(graph, node);
    case OpKind::linear:
    case OpKind::linear_relu:
      return linear_kernel(graph, node);
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace

MEMFIT_CPU_KERNEL(matmul, make_matmul_kernel)
MEMFIT_CPU_KERNEL(linear, make_matmul_kernel)
MEMFIT_CPU_KERNEL(linear_relu, make_matmul_kernel)

}  // namespace memfit::cpu
