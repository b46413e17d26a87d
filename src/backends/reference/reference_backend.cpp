// The reference backend: every node runs its plain-loop kernel on plain
// row-major buffers. Kernels keep their double accumulators on the host heap;
// they take no planned workspace.
#include <memory>
#include <utility>
#include <vector>

#include "backends/reference/ref_ops.h"
#include "backends/reference/reference_kernels.h"
#include "core/check.h"
#include "ops/op_table.h"

namespace memfit {

namespace {

// The kernel of each op, in the list's order.
constexpr RefKernelFn kKernels[] = {
#define MEMFIT_REF_KERNEL(id, attrs, min_inputs, max_inputs) &ref_##id,
    MEMFIT_OPS(MEMFIT_REF_KERNEL)
#undef MEMFIT_REF_KERNEL
};

// Owns a copy of its node and of its operand types, so it does not depend on
// the graph outliving the compiled executable.
class ReferenceKernel final : public Kernel {
 public:
  ReferenceKernel(Node node, std::vector<TensorType> in, std::vector<TensorType> out)
      : node_(std::move(node)),
        in_(std::move(in)),
        out_(std::move(out)),
        fn_(reference_kernel(node_.op)) {}

  void run(const KernelArgs& args) override {
    MEMFIT_CHECK(args.inputs.size() == in_.size() && args.outputs.size() == out_.size());
    fn_(RefCall{node_, in_, out_, args});
  }

 private:
  Node node_;
  std::vector<TensorType> in_;
  std::vector<TensorType> out_;
  RefKernelFn fn_;
};

class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }
  bool supports(const Graph&, const Node&) const override { return true; }

  Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, NodeId id) const override {
    const Node& node = graph.node(id);
    // Copy ops and the all-reduce's buckets move bytes in any layout.
    const bool moves_bytes = op_info(node.op).copy || std::holds_alternative<BucketAttrs>(node.attrs);
    if (!moves_bytes) {
      for (const std::vector<ValueId>* values : {&node.inputs, &node.outputs}) {
        for (ValueId v : *values) {
          if (graph.value(v).layout == Layout::plain) continue;
          return Status::error("the reference kernel of " + std::string(op_name(node.op)) +
                               " reads plain layouts only, but %" + graph.value(v).name +
                               " is in layout " + std::string(layout_name(graph.value(v).layout)));
        }
      }
    }
    std::vector<TensorType> in;
    for (ValueId v : node.inputs) in.push_back(graph.value(v).type);
    std::vector<TensorType> out;
    for (ValueId v : node.outputs) out.push_back(graph.value(v).type);
    std::unique_ptr<Kernel> kernel =
        std::make_unique<ReferenceKernel>(node, std::move(in), std::move(out));
    return kernel;
  }
};

}  // namespace

RefKernelFn reference_kernel(OpKind op) {
  MEMFIT_CHECK(static_cast<int>(op) < kNumOps);
  return kKernels[static_cast<int>(op)];
}

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

}  // namespace memfit
