// attention and attention_grad on the CPU: the tiled kernels of
// cpu_attention_tiles.h, whose per-thread tiles are the node's workspace
// (sized for the threads the step was compiled for).
#include <omp.h>

#include "backends/cpu/cpu_attention_tiles.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"

namespace memfit::cpu {
namespace {

class AttentionKernel final : public Kernel {
 public:
  AttentionKernel(const Graph& graph, const Node& node)
      : backward_(node.op == OpKind::attention_grad),
        key_mask_input_(backward_ ? 6 : 3),
        has_key_mask_(node.inputs.size() > key_mask_input_),
        threads_(omp_get_max_threads()) {
    const Shape& q = input_shape(graph, node, 0);
    const Shape& k = input_shape(graph, node, 1);
    const Shape& v = input_shape(graph, node, 2);
    shape_ = AttentionShape{q[0], q[1], q[2], k[2], q[3], v[3]};
    const auto& attrs = std::get<AttentionAttrs>(node.attrs);
    params_ = AttentionParams{attrs.scale, attrs.causal, attrs.offset, attrs.p, attrs.key, 0, 0};
  }

  size_t workspace_bytes() const override {
    return backward_ ? attention_backward_workspace(shape_, threads_)
                     : attention_forward_workspace(shape_, threads_);
  }

  void run(const KernelArgs& args) override {
    AttentionParams params = params_;
    params.seed = args.step.seed;
    params.micro_step = static_cast<uint64_t>(args.step.micro_step);
    auto in = [&](size_t i) { return static_cast<const float*>(args.inputs[i]); };
    auto out = [&](size_t i) { return static_cast<float*>(args.outputs[i]); };
    const auto* key_mask =
        has_key_mask_ ? static_cast<const int32_t*>(args.inputs[key_mask_input_]) : nullptr;
    // The threads the workspace was sized for.
    if (backward_) {
      attention_backward(shape_, params, in(0), in(1), in(2), in(3), in(4), in(5), key_mask,
                         out(0), out(1), out(2), args.workspace, threads_);
    } else {
      attention_forward(shape_, params, in(0), in(1), in(2), key_mask, out(0), out(1),
                        args.workspace, threads_);
    }
  }

 private:
  bool backward_;
  size_t key_mask_input_;
  bool has_key_mask_;
  int threads_;
  AttentionShape shape_;
  AttentionParams params_;
};

std::unique_ptr<Kernel> make_attention_kernel(const Graph& graph, const Node& node) {
  return std::make_unique<AttentionKernel>(graph, node);
}

}  // namespace

MEMFIT_CPU_KERNEL(attention, make_attention_kernel)
MEMFIT_CPU_KERNEL(attention_grad, make_attention_kernel)

}  // namespace memfit::cpu
