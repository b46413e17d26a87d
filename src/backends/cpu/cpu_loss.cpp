// softmax_cross_entropy and its gradient over logits (N, C) and i32 labels
// (N), rows split across threads. Per row, the maximum and the sum of
// exp(x - max) as the reference kernel takes them (the sum in double), but
// each exponential in float: the reference evaluates them in double, so the
// results agree within float rounding, not bit for bit. The loss adds the
// rows' terms in row order (a planned workspace holds them), so it does not
// depend on the thread count.
#include <cmath>
#include <memory>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

struct RowExp {
  float max = 0;
  double sum = 0;
};

RowExp row_exp(const float* row, int64_t classes) {
  RowExp e{row[0], 0.0};
  for (int64_t j = 1; j < classes; ++j) e.max = std::max(e.max, row[j]);
  for (int64_t j = 0; j < classes; ++j) e.sum += std::exp(row[j] - e.max);
  return e;
}

int64_t checked_label(const int32_t* labels, int64_t r, int64_t classes) {
  const int64_t label = labels[r];
  MEMFIT_CHECK(label >= 0 && label < classes);
  return label;
}

// logits, labels -> loss (): the mean over rows of log-sum-exp minus the label's logit.
class CrossEntropyKernel final : public Kernel {
 public:
  CrossEntropyKernel(int64_t rows, int64_t classes) : rows_(rows), classes_(classes) {}
  // One double per row, and room to align them (nothing promises an aligned workspace).
  size_t workspace_bytes() const override {
    return static_cast<size_t>(rows_) * sizeof(double) + alignof(double);
  }

  void run(const KernelArgs& args) override {
    const auto* logits = static_cast<const float*>(args.inputs[0]);
    const auto* labels = static_cast<const int32_t*>(args.inputs[1]);
    void* workspace = args.workspace;
    size_t space = workspace_bytes();
    auto* terms = static_cast<double*>(std::align(alignof(double), sizeof(double) * static_cast<size_t>(rows_),
                                                  workspace, space));
    MEMFIT_CHECK(terms != nullptr);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      const float* row = logits + r * classes_;
      const RowExp e = row_exp(row, classes_);
      terms[r] = static_cast<double>(e.max) + std::log(e.sum) - row[checked_label(labels, r, classes_)];
    }
    double total = 0;
    for (int64_t r = 0; r < rows_; ++r) total += terms[r];
    static_cast<float*>(args.outputs[0])[0] = static_cast<float>(total / static_cast<double>(rows_));
  }

 private:
  int64_t rows_, classes_;
};

// dloss, logits, labels -> dlogits = dloss (softmax(row) - onehot(label)) / N.
class CrossEntropyGradKernel final : public Kernel {
 public:
  CrossEntropyGradKernel(int64_t rows, int64_t classes) : rows_(rows), classes_(classes) {}

  void run(const KernelArgs& args) override {
    const double per_row = static_cast<const float*>(args.inputs[0])[0] / static_cast<double>(rows_);
    const auto* logits = static_cast<const float*>(args.inputs[1]);
    const auto* labels = static_cast<const int32_t*>(args.inputs[2]);
    auto* dlogits = static_cast<float*>(args.outputs[0]);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      const float* row = logits + r * classes_;
      float* out = dlogits + r * classes_;
      const RowExp e = row_exp(row, classes_);
      const auto scale = static_cast<float>(per_row / e.sum);
      const auto label = checked_label(labels, r, classes_);
      for (int64_t j = 0; j < classes_; ++j) out[j] = scale * std::exp(row[j] - e.max);
      out[label] -= static_cast<float>(per_row);
    }
  }

 private:
  int64_t rows_, classes_;
};

}  // namespace

std::unique_ptr<Kernel> make_loss_kernel(const Graph& graph, const Node& node) {
  const bool grad = node.op == OpKind::softmax_cross_entropy_grad;
  const Shape& logits = input_shape(graph, node, grad ? 1 : 0);
  MEMFIT_CHECK(logits.size() == 2);
  if (grad) return std::make_unique<CrossEntropyGradKernel>(logits[0], logits[1]);
  return std::make_unique<CrossEntropyKernel>(logits[0], logits[1]);
}

}  // namespace memfit::cpu
