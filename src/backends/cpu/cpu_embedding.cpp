// embedding on the CPU: y[n, :] = table[ids[n], :], rows copied on threads
// after every id is checked against the table, as the reference kernel does.
// embedding_grad on the CPU: dtable = 0, then every row that some id names gets
// the sum of the dy rows that name it, added in double in the order of their
// positions and rounded once, as the reference kernel does (so the bits are
// the reference's), without its (V, D) buffer of doubles. Zeroing the table,
// most of whose rows no id names, and the named rows are split across threads.
// Given acc (fuse_gradient_sums's form), dtable starts as acc (nothing to copy
// in place) and the named rows add their sums in float, as the add they
// replace does.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "ops/op_util.h"

namespace memfit::cpu {
namespace {

class EmbeddingGradKernel final : public Kernel {
 public:
  EmbeddingGradKernel(const Node& node, int64_t rows, int64_t dim, int64_t count)
      : node_(node), rows_(rows), dim_(dim), count_(count) {}

  void run(const KernelArgs& args) override {
    const auto* dy = static_cast<const float*>(args.inputs[0]);   // (..., D)
    const auto* ids = static_cast<const int32_t*>(args.inputs[1]);  // (...)
    auto* dtable = static_cast<float*>(args.outputs[0]);           // (V, D)
    // Positions grouped by id, each group in position order.
    std::vector<int64_t> order(static_cast<size_t>(count_));
    std::iota(order.begin(), order.end(), 0);
    for (int64_t n = 0; n < count_; ++n) ops::checked_table_row(node_, ids[n], n, rows_);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
    std::vector<int64_t> starts;  // first index in `order` of each distinct id
    for (int64_t i = 0; i < count_; ++i) {
      if (i == 0 || ids[order[i]] != ids[order[i - 1]]) starts.push_back(i);
    }
    starts.push_back(count_);
    const auto groups = static_cast<int64_t>(starts.size()) - 1;
    const auto row_bytes = static_cast<size_t>(dim_) * sizeof(float);
    const float* acc = args.inputs.size() == 3 ? static_cast<const float*>(args.inputs[2]) : nullptr;
#pragma omp parallel
    {
      if (acc == nullptr) {
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows_; ++r) std::memset(dtable + r * dim_, 0, row_bytes);
      } else if (acc != dtable) {
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows_; ++r) std::memcpy(dtable + r * dim_, acc + r * dim_, row_bytes);
      }
#pragma omp for schedule(static)
      for (int64_t g = 0; g < groups; ++g) {
        float* row = dtable + static_cast<int64_t>(ids[order[starts[g]]]) * dim_;
        for (int64_t d = 0; d < dim_; ++d) {
          double sum = 0.0;
          for (int64_t i = starts[g]; i < starts[g + 1]; ++i) sum += dy[order[i] * dim_ + d];
          row[d] = acc == nullptr ? static_cast<float>(sum) : row[d] + static_cast<float>(sum);
        }
      }
    }
  }

 private:
  Node node_;  // for the message on an id outside the table
  int64_t rows_, dim_, count_;
};

class EmbeddingKernel final : public Kernel {
 public:
  EmbeddingKernel(const Node& node, int64_t rows, int64_t dim, int64_t count)
      : node_(node), rows_(rows), dim_(dim), count_(count) {}

  void run(const KernelArgs& args) override {
    const auto* ids = static_cast<const int32_t*>(args.inputs[0]);  // (...)
    const auto* table = static_cast<const float*>(args.inputs[1]);  // (V, D)
    auto* y = static_cast<float*>(args.outputs[0]);                 // (..., D)
    for (int64_t n = 0; n < count_; ++n) ops::checked_table_row(node_, ids[n], n, rows_);
    const auto row_bytes = static_cast<size_t>(dim_) * sizeof(float);
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < count_; ++n) {
      std::memcpy(y + n * dim_, table + static_cast<int64_t>(ids[n]) * dim_, row_bytes);
    }
  }

 private:
  Node node_;  // for the message on an id outside the table
  int64_t rows_, dim_, count_;
};

std::unique_ptr<Kernel> make_embedding_kernel(const Graph& graph, const Node& node) {
  const Shape& table = graph.value(node.inputs[1]).type.shape;
  return std::make_unique<EmbeddingKernel>(node, table[0], table[1],
                                           graph.value(node.inputs[0]).elements());
}

std::unique_ptr<Kernel> make_embedding_grad_kernel(const Graph& graph, const Node& node) {
  const Shape& table = graph.value(node.outputs[0]).type.shape;
  return std::make_unique<EmbeddingGradKernel>(node, table[0], table[1],
                                               graph.value(node.inputs[1]).elements());
}

}  // namespace

MEMFIT_CPU_KERNEL(embedding, make_embedding_kernel)
MEMFIT_CPU_KERNEL(embedding_grad, make_embedding_grad_kernel)

}  // namespace memfit::cpu
