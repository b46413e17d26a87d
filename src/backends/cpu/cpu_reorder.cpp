// reorder on oneDNN's reorder primitive: x in its layout -> y in its own
// (plain, c8, c16, oi8, oi16). A blocked output gets zeros in its padding.
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"

namespace memfit::cpu {
namespace {

std::unique_ptr<Kernel> make_reorder_kernel(const Graph& graph, const Node& node) {
  auto kernel = std::make_unique<PrimitiveKernel>();
  kernel->add_reorder(input_arg(DNNL_ARG_FROM, 0, input_md(graph, node, 0)),
                      output_arg(DNNL_ARG_TO, 0, output_md(graph, node, 0)));
  return kernel;
}

}  // namespace

MEMFIT_CPU_KERNEL(reorder, make_reorder_kernel)

}  // namespace memfit::cpu
