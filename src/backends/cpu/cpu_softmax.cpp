// softmax and log_softmax along one axis, and their gradients, on oneDNN's
// softmax_v2 primitives (softmax_accurate subtracts the maximum first). All run
// in place, as docs/ops.md allows.
#include <variant>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

using dnnl::algorithm;
using dnnl::memory;

dnnl::softmax_v2_forward::primitive_desc forward_pd(dnnl::prop_kind prop, algorithm alg,
                                                    const memory::desc& md, int axis) {
  const dnnl::softmax_v2_forward::desc desc(prop, alg, md, md, axis);
  return {desc, kernel_attr(), engine()};
}

// x -> y.
std::unique_ptr<Kernel> forward_kernel(const memory::desc& md, algorithm alg, int axis) {
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(forward_pd(dnnl::prop_kind::forward_inference, alg, md, axis),
              {input_arg(DNNL_ARG_SRC, 0, md), output_arg(DNNL_ARG_DST, 0, md)});
  return kernel;
}

// dy, y -> dx; y is the output of the forward op (log-probabilities for softmax_log).
std::unique_ptr<Kernel> backward_kernel(const memory::desc& md, algorithm alg, int axis) {
  const dnnl::softmax_v2_backward::desc desc(alg, md, md, md, axis);
  const dnnl::softmax_v2_backward::primitive_desc pd(
      desc, kernel_attr(), engine(), forward_pd(dnnl::prop_kind::forward_training, alg, md, axis));
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(pd, {input_arg(DNNL_ARG_DIFF_DST, 0, md), input_arg(DNNL_ARG_DST, 1, md),
                   output_arg(DNNL_ARG_DIFF_SRC, 0, md)});
  return kernel;
}

std::unique_ptr<Kernel> make_softmax_kernel(const Graph& graph, const Node& node) {
  const Shape& shape = output_shape(graph, node, 0);
  const memory::desc md = plain_md(shape);
  const int axis = static_cast<int>(std::get<AxisAttrs>(node.attrs).axis);
  switch (node.op) {
    case OpKind::softmax:
      return forward_kernel(md, algorithm::softmax_accurate, axis);
    case OpKind::log_softmax:
      return forward_kernel(md, algorithm::softmax_log, axis);
    case OpKind::softmax_grad:
      return backward_kernel(md, algorithm::softmax_accurate, axis);
    case OpKind::log_softmax_grad:
      return backward_kernel(md, algorithm::softmax_log, axis);
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace

MEMFIT_CPU_KERNEL(softmax, make_softmax_kernel)
MEMFIT_CPU_KERNEL(softmax_grad, make_softmax_kernel)
MEMFIT_CPU_KERNEL(log_softmax, make_softmax_kernel)
MEMFIT_CPU_KERNEL(log_softmax_grad, make_softmax_kernel)

}  // namespace memfit::cpu
