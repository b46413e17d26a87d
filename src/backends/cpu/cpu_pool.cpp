// Average pooling (2-D and 3-D) and its gradient on oneDNN pooling
// primitives, which take 4-D and 5-D tensors alike. global_avg_pool is average
// pooling with one H x W window. Max pooling: cpu_max_pool.cpp.
#include <variant>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

using dnnl::algorithm;
using dnnl::memory;

// Padding is symmetric; oneDNN accepts the floor in the output size. Windows
// never reach past the right padding, so include_pad divides by the whole
// window (KH * KW, or KD * KH * KW) everywhere, as docs/ops.md says.
struct PoolGeometry {
  algorithm alg = algorithm::pooling_avg_exclude_padding;
  memory::dims kernel;
  memory::dims strides;
  memory::dims padding;
};

// Pool2dAttrs, Pool3dAttrs and their Grad forms share these fields; each has
// one entry per spatial dimension.
template <class A>
PoolGeometry geometry(const A& attrs) {
  return {attrs.include_pad ? algorithm::pooling_avg_include_padding
                            : algorithm::pooling_avg_exclude_padding,
          {attrs.kernel.begin(), attrs.kernel.end()},
          {attrs.stride.begin(), attrs.stride.end()},
          {attrs.pad.begin(), attrs.pad.end()}};
}

// One window over the whole x (N, C, H, W).
PoolGeometry global_geometry(const Shape& x) {
  return {algorithm::pooling_avg_exclude_padding, {x[2], x[3]}, {1, 1}, {0, 0}};
}

dnnl::pooling_forward::primitive_desc forward_pd(dnnl::prop_kind prop, const memory::desc& x,
                                                 const memory::desc& y, const PoolGeometry& g) {
  const dnnl::pooling_forward::desc desc(prop, g.alg, x, y, g.strides, g.kernel, g.padding,
                                         g.padding);
  return {desc, kernel_attr(), engine()};
}

// x (N, C, [D,] H, W) -> y (N, C, [OD,] OH, OW), each in its value's layout.
std::unique_ptr<Kernel> forward_kernel(const memory::desc& x, const memory::desc& y,
                                       const PoolGeometry& g) {
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(forward_pd(dnnl::prop_kind::forward_inference, x, y, g),
              {input_arg(DNNL_ARG_SRC, 0, x), output_arg(DNNL_ARG_DST, 0, y)});
  return kernel;
}

// Average pooling: dy (N, C, [OD,] OH, OW) -> dx (N, C, [D,] H, W).
std::unique_ptr<Kernel> avg_backward_kernel(const memory::desc& dy, const memory::desc& dx,
                                            const PoolGeometry& g) {
  const dnnl::pooling_backward::desc desc(g.alg, dx, dy, g.strides, g.kernel, g.padding, g.padding);
  const dnnl::pooling_backward::primitive_desc pd(
      desc, kernel_attr(), engine(), forward_pd(dnnl::prop_kind::forward_training, dx, dy, g));
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(pd, {input_arg(DNNL_ARG_DIFF_DST, 0, dy), output_arg(DNNL_ARG_DIFF_SRC, 0, dx)});
  return kernel;
}

std::unique_ptr<Kernel> make_pool_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::avg_pool2d:
      return forward_kernel(input_md(graph, node, 0), output_md(graph, node, 0),
                            geometry(std::get<Pool2dAttrs>(node.attrs)));
    case OpKind::avg_pool3d:
      return forward_kernel(input_md(graph, node, 0), output_md(graph, node, 0),
                            geometry(std::get<Pool3dAttrs>(node.attrs)));
    case OpKind::global_avg_pool:
      return forward_kernel(input_md(graph, node, 0), output_md(graph, node, 0),
                            global_geometry(input_shape(graph, node, 0)));
    case OpKind::avg_pool2d_grad:
      return avg_backward_kernel(input_md(graph, node, 0), output_md(graph, node, 0),
                                 geometry(std::get<Pool2dGradAttrs>(node.attrs)));
    case OpKind::avg_pool3d_grad:
      return avg_backward_kernel(input_md(graph, node, 0), output_md(graph, node, 0),
                                 geometry(std::get<Pool3dGradAttrs>(node.attrs)));
    case OpKind::global_avg_pool_grad:
      return avg_backward_kernel(input_md(graph, node, 0), output_md(graph, node, 0),
                                 global_geometry(output_shape(graph, node, 0)));
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace

MEMFIT_CPU_KERNEL(avg_pool2d, make_pool_kernel)
MEMFIT_CPU_KERNEL(avg_pool2d_grad, make_pool_kernel)
MEMFIT_CPU_KERNEL(avg_pool3d, make_pool_kernel)
MEMFIT_CPU_KERNEL(avg_pool3d_grad, make_pool_kernel)
MEMFIT_CPU_KERNEL(global_avg_pool, make_pool_kernel)
MEMFIT_CPU_KERNEL(global_avg_pool_grad, make_pool_kernel)

}  // namespace memfit::cpu
