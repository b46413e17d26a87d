// add, sub and mul of two f32 tensors that both have the output's shape: one
// flat loop over the elements, split across the OpenMP threads oneDNN uses.
// oneDNN's binary primitive is not used because it allows the output to alias
// only its first input, while the op table lets it alias either (add's
// gradient sums write over whichever operand dies); here each element is read
// before it is written, so either works. Broadcasting shapes stay with the
// reference kernels (the backend's supports() says which).
//
// The results equal the reference kernels' bit for bit: those compute in
// double and round once to float, and for a single +, - or * of two floats
// that gives the correctly rounded float result, as float arithmetic does.
#include <cstdint>

#include "backends/cpu/cpu_kernels.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

template <typename Op>
void apply(const float* a, const float* b, float* y, int64_t count, Op op) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < count; ++i) y[i] = op(a[i], b[i]);
}

class SameShapeBinaryKernel final : public Kernel {
 public:
  SameShapeBinaryKernel(OpKind op, int64_t count) : op_(op), count_(count) {}

  void run(const KernelArgs& args) override {
    const auto* a = static_cast<const float*>(args.inputs[0]);
    const auto* b = static_cast<const float*>(args.inputs[1]);
    auto* y = static_cast<float*>(args.outputs[0]);
    switch (op_) {
      case OpKind::add:
        apply(a, b, y, count_, [](float p, float q) { return p + q; });
        break;
      case OpKind::sub:
        apply(a, b, y, count_, [](float p, float q) { return p - q; });
        break;
      case OpKind::mul:
        apply(a, b, y, count_, [](float p, float q) { return p * q; });
        break;
      default:
        MEMFIT_CHECK(false);
    }
  }

 private:
  OpKind op_;
  int64_t count_;
};

}  // namespace

bool binary_supported(const Graph& graph, const Node& node) {
  const TensorType& out = graph.value(node.outputs[0]).type;
  return graph.value(node.inputs[0]).type.shape == out.shape &&
         graph.value(node.inputs[1]).type.shape == out.shape;
}

std::unique_ptr<Kernel> make_binary_kernel(const Graph& graph, const Node& node) {
  MEMFIT_CHECK(binary_supported(graph, node));
  return std::make_unique<SameShapeBinaryKernel>(node.op,
                                                 graph.value(node.outputs[0]).elements());
}

}  // namespace memfit::cpu
