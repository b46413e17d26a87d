// add, sub and mul of two f32 tensors: one flat loop over the elements when
// both have the output's shape, split across the OpenMP threads oneDNN uses.
// oneDNN's binary primitive is not used because it allows the output to alias
// only its first input, while the op table lets it alias either (add's
// gradient sums write over whichever operand dies); here each element is read
// before it is written, so either works. Broadcasting operands (numpy's
// rule: shapes aligned on the right, a dimension of 1 repeats) are read
// through strides of 0 along their repeated dimensions, row by row of the
// output.
//
// The results equal the reference kernels' bit for bit: those compute in
// double and round once to float, and for a single +, - or * of two floats
// that gives the correctly rounded float result, as float arithmetic does.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

template <typename Op>
void apply(const float* a, const float* b, float* y, int64_t count, Op op) {
#pragma omp parallel for simd schedule(static) if (worth_threads(static_cast<size_t>(count) * 3 * sizeof(float)))
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

// Operands of other shapes than the output's: for each row of y (all
// dimensions but the last), each operand's row starts at its strided offset
// and steps by 1 along the last dimension, or by 0 where it repeats.
class BroadcastBinaryKernel final : public Kernel {
 public:
  BroadcastBinaryKernel(OpKind op, const Shape& a, const Shape& b, const Shape& y) : op_(op) {
    const size_t rank = y.size();
    MEMFIT_CHECK(rank > 0);
    dims_.assign(y.begin(), y.end() - 1);
    len_ = y[rank - 1];
    rows_ = num_elements(y) / std::max<int64_t>(len_, 1);
    for (const Shape* operand : {&a, &b}) {
      // Strides of the operand over y's dimensions: 0 where it repeats.
      std::vector<int64_t> strides(rank, 0);
      int64_t stride = 1;
      for (size_t k = 0; k < operand->size(); ++k) {
        const size_t d = operand->size() - 1 - k;  // from the right
        const size_t yd = rank - 1 - k;
        if ((*operand)[d] != 1) strides[yd] = stride;
        stride *= (*operand)[d];
      }
      step_.push_back(strides[rank - 1]);
      strides.pop_back();
      row_strides_.push_back(strides);
    }
  }

  void run(const KernelArgs& args) override {
    switch (op_) {
      case OpKind::add:
        apply(args, [](float p, float q) { return p + q; });
        break;
      case OpKind::sub:
        apply(args, [](float p, float q) { return p - q; });
        break;
      case OpKind::mul:
        apply(args, [](float p, float q) { return p * q; });
        break;
      default:
        MEMFIT_CHECK(false);
    }
  }

 private:
  template <class Op>
  void apply(const KernelArgs& args, Op op) const {
    const auto* a = static_cast<const float*>(args.inputs[0]);
    const auto* b = static_cast<const float*>(args.inputs[1]);
    auto* y = static_cast<float*>(args.outputs[0]);
    const int64_t sa = step_[0], sb = step_[1];
#pragma omp parallel for schedule(static) if (worth_threads(static_cast<size_t>(rows_ * len_) * 3 * sizeof(float)))
    for (int64_t row = 0; row < rows_; ++row) {
      int64_t rest = row, at_a = 0, at_b = 0;
      for (size_t d = dims_.size(); d-- > 0;) {
        const int64_t coordinate = rest % dims_[d];
        rest /= dims_[d];
        at_a += coordinate * row_strides_[0][d];
        at_b += coordinate * row_strides_[1][d];
      }
      float* out = y + row * len_;
      for (int64_t j = 0; j < len_; ++j) out[j] = op(a[at_a + j * sa], b[at_b + j * sb]);
    }
  }

  OpKind op_;
  std::vector<int64_t> dims_;  // y's dimensions but the last
  int64_t len_ = 1, rows_ = 0;
  std::vector<int64_t> step_;                      // per operand: its stride along y's last dimension
  std::vector<std::vector<int64_t>> row_strides_;  // per operand: its strides along dims_
};

std::unique_ptr<Kernel> make_binary_kernel(const Graph& graph, const Node& node) {
  const Shape& a = graph.value(node.inputs[0]).type.shape;
  const Shape& b = graph.value(node.inputs[1]).type.shape;
  const Value& out = graph.value(node.outputs[0]);
  const Shape& y = out.type.shape;
  if (a == y && b == y) {
    // Operands in one blocked layout are added element for element, padding
    // included (zeros give zeros).
    MEMFIT_CHECK(graph.value(node.inputs[0]).layout == out.layout &&
                 graph.value(node.inputs[1]).layout == out.layout);
    return std::make_unique<SameShapeBinaryKernel>(node.op,
                                                   stored_elements(y, out.layout));
  }
  MEMFIT_CHECK(out.layout == Layout::plain);
  return std::make_unique<BroadcastBinaryKernel>(node.op, a, b, y);
}

}  // namespace

MEMFIT_CPU_KERNEL(add, make_binary_kernel)
MEMFIT_CPU_KERNEL(sub, make_binary_kernel)
MEMFIT_CPU_KERNEL(mul, make_binary_kernel)

}  // namespace memfit::cpu
