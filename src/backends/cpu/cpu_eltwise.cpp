// Activations, their gradients and scale on oneDNN eltwise primitives. All are
// elementwise, so every plain tensor is seen as one flat vector. oneDNN eltwise runs
// in place, which docs/ops.md allows for all of these but gelu.
#include <variant>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

using dnnl::algorithm;
using dnnl::memory;

// Plain tensors are seen as one flat vector; blocked ones (every operand of
// the node alike) keep their layout, so that oneDNN leaves the padding zero
// (sigmoid(0) is not).
memory::desc eltwise_md(const Graph& graph, const Node& node) {
  const Value& y = graph.value(node.outputs[0]);
  for (ValueId in : node.inputs) MEMFIT_CHECK(graph.value(in).layout == y.layout);
  if (y.layout == Layout::plain) return plain_md({y.elements()});
  return value_md(graph, node.outputs[0]);
}

// x -> y = f(x), with alpha the parameter of `alg` (the factor of scale).
std::unique_ptr<Kernel> forward_kernel(const memory::desc& md, algorithm alg, float alpha) {
  const dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, alg, md, alpha, 0);
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(dnnl::eltwise_forward::primitive_desc(desc, kernel_attr(), engine()),
              {input_arg(DNNL_ARG_SRC, 0, md), output_arg(DNNL_ARG_DST, 0, md)});
  return kernel;
}

// dy, and x or y (`data_arg` says which, as `alg` expects) -> dx.
std::unique_ptr<Kernel> backward_kernel(const memory::desc& md, algorithm alg, int data_arg) {
  const dnnl::eltwise_forward::primitive_desc hint(
      dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, md, 0, 0), kernel_attr(),
      engine());
  const dnnl::eltwise_backward::desc desc(alg, md, md, 0, 0);
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add(dnnl::eltwise_backward::primitive_desc(desc, kernel_attr(), engine(), hint),
              {input_arg(DNNL_ARG_DIFF_DST, 0, md), input_arg(data_arg, 1, md),
               output_arg(DNNL_ARG_DIFF_SRC, 0, md)});
  return kernel;
}

std::unique_ptr<Kernel> make_eltwise_kernel(const Graph& graph, const Node& node) {
  const memory::desc md = eltwise_md(graph, node);
  switch (node.op) {
    case OpKind::relu:
      return forward_kernel(md, algorithm::eltwise_relu, 0);
    case OpKind::gelu:
      return forward_kernel(md, algorithm::eltwise_gelu_erf, 0);
    case OpKind::tanh:
      return forward_kernel(md, algorithm::eltwise_tanh, 0);
    case OpKind::sigmoid:
      return forward_kernel(md, algorithm::eltwise_logistic, 0);
    case OpKind::scale:
      return forward_kernel(md, algorithm::eltwise_linear, std::get<ScaleAttrs>(node.attrs).alpha);
    // relu_grad, tanh_grad and sigmoid_grad get y, so they use the *_use_dst_for_bwd
    // algorithms, whose derivatives are written in terms of y; gelu_grad gets x.
    case OpKind::relu_grad:
      return backward_kernel(md, algorithm::eltwise_relu_use_dst_for_bwd, DNNL_ARG_DST);
    case OpKind::gelu_grad:
      return backward_kernel(md, algorithm::eltwise_gelu_erf, DNNL_ARG_SRC);
    case OpKind::tanh_grad:
      return backward_kernel(md, algorithm::eltwise_tanh_use_dst_for_bwd, DNNL_ARG_DST);
    case OpKind::sigmoid_grad:
      return backward_kernel(md, algorithm::eltwise_logistic_use_dst_for_bwd, DNNL_ARG_DST);
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

}  // namespace

MEMFIT_CPU_KERNEL(relu, make_eltwise_kernel)
MEMFIT_CPU_KERNEL(relu_grad, make_eltwise_kernel)
MEMFIT_CPU_KERNEL(gelu, make_eltwise_kernel)
MEMFIT_CPU_KERNEL(gelu_grad, make_eltwise_kernel)
MEMFIT_CPU_KERNEL(tanh, make_eltwise_kernel)
MEMFIT_CPU_KERNEL(tanh_grad, make_eltwise_kernel)
MEMFIT_CPU_KERNEL(sigmoid, make_eltwise_kernel)
MEMFIT_CPU_KERNEL(sigmoid_grad, make_eltwise_kernel)
MEMFIT_CPU_KERNEL(scale, make_eltwise_kernel)

}  // namespace memfit::cpu
