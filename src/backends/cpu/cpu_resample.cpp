// upsample and its gradient on oneDNN resampling primitives (3-D to 5-D tensors).
//
// oneDNN's rules agree with the reference (PyTorch's, align_corners=false) for
// integer factors s. Nearest: oneDNN reads round((o + 0.5) / s - 0.5); with
// o = q s + r, 0 <= r < s, the argument lies in (q - 0.5, q + 0.5), so it reads
// q = floor(o / s) as PyTorch does. Linear: both take the source coordinate
// (o + 0.5) / s - 0.5 and clamp reads to the edges; below 0 PyTorch clamps the
// coordinate and oneDNN the two indices, which reads x[0] with total weight 1
// either way, and likewise past the end. cpu_backend_test checks both modes.
#include <variant>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

using dnnl::algorithm;
using dnnl::memory;

algorithm resampling_algorithm(const UpsampleAttrs& attrs) {
  return attrs.linear ? algorithm::resampling_linear : algorithm::resampling_nearest;
}

// The factors are implied by the shapes (each an exact integer ratio).
dnnl::resampling_forward::primitive_desc forward_pd(dnnl::prop_kind prop, algorithm alg,
                                                    const memory::desc& x, const memory::desc& y) {
  const dnnl::resampling_forward::desc desc(prop, alg, x, y);
  return {desc, kernel_attr(), engine()};
}

// x (N, C, S...) -> y (N, C, S scale...).
std::unique_ptr<Kernel> forward_kernel(const Shape& x_shape, const Shape& y_shape, algorithm alg) {
  const memory::desc x = plain_md(x_shape);
  const memory::desc y = plain_md(y_shape);
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(forward_pd(dnnl::prop_kind::forward_inference, alg, x, y),
              {input_arg(DNNL_ARG_SRC, 0, x), output_arg(DNNL_ARG_DST, 0, y)});
  return kernel;
}

// dy (N, C, S scale...) -> dx (N, C, S...).
std::unique_ptr<Kernel> backward_kernel(const Shape& dy_shape, const Shape& dx_shape,
                                        algorithm alg) {
  const memory::desc dy = plain_md(dy_shape);
  const memory::desc dx = plain_md(dx_shape);
  const dnnl::resampling_backward::desc desc(alg, dx, dy);
  const dnnl::resampling_backward::primitive_desc pd(
      desc, kernel_attr(), engine(), forward_pd(dnnl::prop_kind::forward_training, alg, dx, dy));
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(pd, {input_arg(DNNL_ARG_DIFF_DST, 0, dy), output_arg(DNNL_ARG_DIFF_SRC, 0, dx)});
  return kernel;
}

std::unique_ptr<Kernel> make_resample_kernel(const Graph& graph, const Node& node) {
  const algorithm alg = resampling_algorithm(std::get<UpsampleAttrs>(node.attrs));
  switch (node.op) {
    case OpKind::upsample:
      return forward_kernel(input_shape(graph, node, 0), output_shape(graph, node, 0), alg);
    case OpKind::upsample_grad:
      return backward_kernel(input_shape(graph, node, 0), output_shape(graph, node, 0), alg);
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace

MEMFIT_CPU_KERNEL(upsample, make_resample_kernel)
MEMFIT_CPU_KERNEL(upsample_grad, make_resample_kernel)

}  // namespace memfit::cpu
