// softmax_cross_entropy and its gradient over logits (N, C) and i32 labels
// (N), on oneDNN's softmax_v2 primitives (vectorized for the machine's ISA;
// softmax_accurate and softmax_log subtract the row maximum first):
// - the loss runs log-softmax over blocks of rows into a planned workspace
//   (at most kBlockFloats floats, so a (700, 10000) batch of logits does not
//   need a second 28 MB buffer) and adds the rows' -log p[label] in double,
//   in row order, so it does not depend on the thread count;
// - the gradient runs softmax straight into dlogits, then scales each row by
//   dloss / N and subtracts dloss / N at the label.
// oneDNN sums the exponentials in float where the reference sums them in
// double: the results agree within float rounding, not bit for bit.
#include <algorithm>
#include <cstdint>
#include <memory>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

using dnnl::memory;

constexpr int64_t kBlockFloats = int64_t{1} << 20;  // 4 MiB of log-probabilities at a time
constexpr size_t kAlignment = 64;

size_t aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

int64_t checked_label(const int32_t* labels, int64_t r, int64_t classes) {
  const int64_t label = labels[r];
  MEMFIT_CHECK(label >= 0 && label < classes);
  return label;
}

// A softmax_v2 forward primitive over (rows, classes) in place of its own.
struct RowSoftmax {
  RowSoftmax(int64_t rows, int64_t classes, dnnl::algorithm alg) {
    const memory::desc md = plain_md({rows, classes});
    const dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, md, md, 1);
    const dnnl::softmax_v2_forward::primitive_desc pd(desc, kernel_attr(), engine());
    primitive = dnnl::softmax_v2_forward(pd);
    src = memory(md, engine(), DNNL_MEMORY_NONE);
    dst = memory(md, engine(), DNNL_MEMORY_NONE);
    scratchpad = memory(pd.scratchpad_desc(), engine(), DNNL_MEMORY_NONE);
    scratchpad_bytes = pd.scratchpad_desc().get_size();
  }

  void run(const float* from, float* to, void* scratch) {
    src.set_data_handle(const_cast<float*>(from));
    dst.set_data_handle(to);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
    if (scratchpad_bytes > 0) {
      scratchpad.set_data_handle(scratch);
      args.emplace(DNNL_ARG_SCRATCHPAD, scratchpad);
    }
    primitive.execute(stream(), args);
    stream().wait();
  }

  dnnl::primitive primitive;
  memory src, dst, scratchpad;
  size_t scratchpad_bytes = 0;
};

// logits, labels -> loss (): the mean over rows of -log softmax(row)[label].
// Workspace: the block's log-probabilities, the rows' terms (double), the
// primitives' scratchpad.
class CrossEntropyKernel final : public Kernel {
 public:
  CrossEntropyKernel(int64_t rows, int64_t classes)
      : rows_(rows),
        classes_(classes),
        block_rows_(std::clamp<int64_t>(kBlockFloats / classes, 1, rows)),
        block_(block_rows_, classes, dnnl::algorithm::softmax_log) {
    const int64_t rest = rows_ % block_rows_;
    if (rest > 0) rest_ = std::make_unique<RowSoftmax>(rest, classes, dnnl::algorithm::softmax_log);
    terms_offset_ = aligned(static_cast<size_t>(block_rows_ * classes_) * sizeof(float));
    scratch_offset_ = aligned(terms_offset_ + static_cast<size_t>(rows_) * sizeof(double));
    scratch_bytes_ = std::max(block_.scratchpad_bytes, rest_ ? rest_->scratchpad_bytes : size_t{0});
  }

  size_t workspace_bytes() const override { return scratch_offset_ + scratch_bytes_ + kAlignment; }

  void run(const KernelArgs& args) override {
    const auto* logits = static_cast<const float*>(args.inputs[0]);
    const auto* labels = static_cast<const int32_t*>(args.inputs[1]);
    // Nothing promises an aligned workspace: align its start.
    auto* base = reinterpret_cast<std::byte*>(
        aligned(reinterpret_cast<uintptr_t>(static_cast<std::byte*>(args.workspace))));
    auto* log_p = reinterpret_cast<float*>(base);
    auto* terms = reinterpret_cast<double*>(base + terms_offset_);
    void* scratch = base + scratch_offset_;
    for (int64_t first = 0; first < rows_; first += block_rows_) {
      const int64_t count = std::min(block_rows_, rows_ - first);
      RowSoftmax& softmax = count == block_rows_ ? block_ : *rest_;
      softmax.run(logits + first * classes_, log_p, scratch);
      for (int64_t r = 0; r < count; ++r) {
        terms[first + r] =
            -static_cast<double>(log_p[r * classes_ + checked_label(labels, first + r, classes_)]);
      }
    }
    double total = 0;
    for (int64_t r = 0; r < rows_; ++r) total += terms[r];
    static_cast<float*>(args.outputs[0])[0] = static_cast<float>(total / static_cast<double>(rows_));
  }

 private:
  int64_t rows_, classes_, block_rows_;
  RowSoftmax block_;
  std::unique_ptr<RowSoftmax> rest_;
  size_t terms_offset_ = 0, scratch_offset_ = 0, scratch_bytes_ = 0;
};

// dloss, logits, labels -> dlogits = dloss (softmax(row) - onehot(label)) / N.
class CrossEntropyGradKernel final : public Kernel {
 public:
  CrossEntropyGradKernel(int64_t rows, int64_t classes)
      : rows_(rows), classes_(classes), softmax_(rows, classes, dnnl::algorithm::softmax_accurate) {}

  size_t workspace_bytes() const override {
    return softmax_.scratchpad_bytes > 0 ? softmax_.scratchpad_bytes + kAlignment : 0;
  }

  void run(const KernelArgs& args) override {
    const double per_row_d = static_cast<const float*>(args.inputs[0])[0] / static_cast<double>(rows_);
    const auto per_row = static_cast<float>(per_row_d);
    const auto* logits = static_cast<const float*>(args.inputs[1]);
    const auto* labels = static_cast<const int32_t*>(args.inputs[2]);
    auto* dlogits = static_cast<float*>(args.outputs[0]);
    void* scratch = args.workspace == nullptr
                        ? nullptr
                        : reinterpret_cast<void*>(aligned(reinterpret_cast<uintptr_t>(args.workspace)));
    softmax_.run(logits, dlogits, scratch);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      float* out = dlogits + r * classes_;
      for (int64_t j = 0; j < classes_; ++j) out[j] *= per_row;
      out[checked_label(labels, r, classes_)] -= per_row;
    }
  }

 private:
  int64_t rows_, classes_;
  RowSoftmax softmax_;
};

std::unique_ptr<Kernel> make_loss_kernel(const Graph& graph, const Node& node) {
  const bool grad = node.op == OpKind::softmax_cross_entropy_grad;
  const Shape& logits = input_shape(graph, node, grad ? 1 : 0);
  MEMFIT_CHECK(logits.size() == 2);
  if (grad) return std::make_unique<CrossEntropyGradKernel>(logits[0], logits[1]);
  return std::make_unique<CrossEntropyKernel>(logits[0], logits[1]);
}

}  // namespace

MEMFIT_CPU_KERNEL(softmax_cross_entropy, make_loss_kernel)
MEMFIT_CPU_KERNEL(softmax_cross_entropy_grad, make_loss_kernel)

}  // namespace memfit::cpu
