// Data movement: reshape, transpose, concat, split, slice, slice_grad and
// fill, as OpenMP loops of contiguous copies. Exact copies, so the results
// equal the reference kernels' bit for bit.
#include <cstring>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"
#include "core/check.h"

namespace memfit::cpu {
namespace {

int64_t product(const Shape& shape, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= shape[i];
  return p;
}

// y = x with its dimensions permuted: y's dimension i is x's dimension perm[i].
// Trailing dimensions that the permutation keeps in place are copied as one
// contiguous run; the rest are walked by an odometer over y's leading
// dimensions, split across threads.
class TransposeKernel final : public Kernel {
 public:
  TransposeKernel(const Shape& x, const std::vector<int64_t>& perm, size_t element)
      : element_(element) {
    const size_t rank = x.size();
    std::vector<int64_t> x_strides(rank, 1);
    for (size_t i = rank; i-- > 1;) x_strides[i - 1] = x_strides[i] * x[i];
    // The run: the longest suffix with perm[i] == i.
    size_t kept = rank;
    while (kept > 0 && perm[kept - 1] == static_cast<int64_t>(kept - 1)) --kept;
    run_ = product(x, kept, rank);
    for (size_t i = 0; i < kept; ++i) {
      dims_.push_back(x[static_cast<size_t>(perm[i])]);
      strides_.push_back(x_strides[static_cast<size_t>(perm[i])]);
    }
    rows_ = 1;
    for (int64_t d : dims_) rows_ *= d;
  }

  void run(const KernelArgs& args) override {
    const auto* x = static_cast<const char*>(args.inputs[0]);
    auto* y = static_cast<char*>(args.outputs[0]);
    const size_t run_bytes = static_cast<size_t>(run_) * element_;
#pragma omp parallel for schedule(static) if (worth_threads(static_cast<size_t>(rows_) * run_bytes))
    for (int64_t row = 0; row < rows_; ++row) {
      // The x offset of y's row `row` (its index over y's leading dimensions).
      int64_t rest = row, offset = 0;
      for (size_t d = dims_.size(); d-- > 0;) {
        offset += rest % dims_[d] * strides_[d];
        rest /= dims_[d];
      }
      std::memcpy(y + static_cast<size_t>(row) * run_bytes,
                  x + static_cast<size_t>(offset) * element_, run_bytes);
    }
  }

 private:
  size_t element_;
  int64_t run_ = 1, rows_ = 1;
  std::vector<int64_t> dims_, strides_;  // y's leading dimensions, and x's strides along them
};

// Around the axis, x is (outer, len, inner): slice copies elements
// [start, end) of len from each outer row; slice_grad writes dy there and
// zeros elsewhere, or, given acc (f32), adds dy into acc there (in place when
// the planner gave dx acc's buffer).
class SliceKernel final : public Kernel {
 public:
  SliceKernel(bool grad, const Shape& full, const SliceAttrs& attrs, size_t element)
      : grad_(grad), element_(element) {
    const auto axis = static_cast<size_t>(attrs.axis);
    MEMFIT_CHECK(axis < full.size());
    outer_ = product(full, 0, axis);
    inner_ = product(full, axis + 1, full.size());
    len_ = full[axis];
    start_ = attrs.start;
    part_ = attrs.end - attrs.start;
  }

  void run(const KernelArgs& args) override {
    const size_t block = static_cast<size_t>(part_ * inner_) * element_;
    const size_t row = static_cast<size_t>(len_ * inner_) * element_;
    const size_t before = static_cast<size_t>(start_ * inner_) * element_;
    const auto* in = static_cast<const char*>(args.inputs[0]);
    auto* out = static_cast<char*>(args.outputs[0]);
    if (grad_ && args.inputs.size() == 2) {
      accumulate(static_cast<const float*>(args.inputs[0]), static_cast<const float*>(args.inputs[1]),
                 static_cast<float*>(args.outputs[0]));
      return;
    }
#pragma omp parallel for schedule(static) if (worth_threads(static_cast<size_t>(outer_) * row))
    for (int64_t o = 0; o < outer_; ++o) {
      const auto k = static_cast<size_t>(o);
      if (grad_) {
        char* dx = out + k * row;
        std::memset(dx, 0, before);
        std::memcpy(dx + before, in + k * block, block);
        std::memset(dx + before + block, 0, row - before - block);
      } else {
        std::memcpy(out + k * block, in + k * row + before, block);
      }
    }
  }

 private:
  void accumulate(const float* dy, const float* acc, float* dx) const {
    const int64_t row = len_ * inner_, block = part_ * inner_;
    if (dx != acc) {
      const auto bytes = static_cast<size_t>(outer_ * row) * sizeof(float);
      std::memcpy(dx, acc, bytes);
    }
#pragma omp parallel for schedule(static) if (worth_threads(static_cast<size_t>(outer_ * block) * sizeof(float)))
    for (int64_t o = 0; o < outer_; ++o) {
      float* out = dx + o * row + start_ * inner_;
      const float* part = dy + o * block;
#pragma omp simd
      for (int64_t j = 0; j < block; ++j) out[j] += part[j];
    }
  }

  bool grad_;
  size_t element_;
  int64_t outer_ = 1, inner_ = 1, len_ = 1, start_ = 0, part_ = 0;
};

// y = x's bytes; nothing to do when the planner wrote y in place over x.
class ReshapeKernel final : public Kernel {
 public:
  explicit ReshapeKernel(size_t bytes) : bytes_(bytes) {}
  void run(const KernelArgs& args) override {
    if (args.outputs[0] != args.inputs[0]) std::memcpy(args.outputs[0], args.inputs[0], bytes_);
  }

 private:
  size_t bytes_;
};

// Around the axis, the joined tensor is (outer, len, inner) and piece k is
// (outer, len_k, inner): concat gathers the pieces' blocks into each outer
// row, split scatters them out.
class ConcatKernel final : public Kernel {
 public:
  ConcatKernel(bool split, const Shape& joined, int64_t axis, std::vector<int64_t> lens, size_t element)
      : split_(split), lens_(std::move(lens)) {
    const auto a = static_cast<size_t>(axis);
    outer_ = product(joined, 0, a);
    const size_t inner = static_cast<size_t>(product(joined, a + 1, joined.size())) * element;
    row_ = static_cast<size_t>(joined[a]) * inner;
    for (int64_t len : lens_) {
      offsets_.push_back(blocks_.empty() ? 0 : offsets_.back() + blocks_.back());
      blocks_.push_back(static_cast<size_t>(len) * inner);
    }
  }

  void run(const KernelArgs& args) override {
    const auto pieces = static_cast<int64_t>(blocks_.size());
#pragma omp parallel for collapse(2) schedule(static) if (worth_threads(static_cast<size_t>(outer_) * row_))
    for (int64_t o = 0; o < outer_; ++o) {
      for (int64_t k = 0; k < pieces; ++k) {
        const auto piece = static_cast<size_t>(k);
        const size_t block = blocks_[piece];
        char* joined = static_cast<char*>(split_ ? args.inputs[0] : args.outputs[0]) +
                       static_cast<size_t>(o) * row_ + offsets_[piece];
        char* part = static_cast<char*>(split_ ? args.outputs[piece] : args.inputs[piece]) +
                     static_cast<size_t>(o) * block;
        if (split_) {
          std::memcpy(part, joined, block);
        } else {
          std::memcpy(joined, part, block);
        }
      }
    }
  }

 private:
  bool split_;
  std::vector<int64_t> lens_;
  int64_t outer_ = 1;
  size_t row_ = 0;
  std::vector<size_t> blocks_, offsets_;  // per piece: bytes per outer row, and where they start
};

class FillKernel final : public Kernel {
 public:
  FillKernel(float value, int64_t count) : value_(value), count_(count) {}
  void run(const KernelArgs& args) override {
    auto* y = static_cast<float*>(args.outputs[0]);
#pragma omp parallel for simd schedule(static) if (worth_threads(static_cast<size_t>(count_) * sizeof(float)))
    for (int64_t i = 0; i < count_; ++i) y[i] = value_;
  }

 private:
  float value_;
  int64_t count_;
};

std::unique_ptr<Kernel> make_shape_kernel(const Graph& graph, const Node& node) {
  if (node.op == OpKind::fill) {
    // Blocked (only a fill of zeros is), the padding is filled too.
    const Value& y = graph.value(node.outputs[0]);
    return std::make_unique<FillKernel>(std::get<FillAttrs>(node.attrs).value,
                                        stored_elements(y.type.shape, y.layout));
  }
  const size_t element = dtype_size(graph.value(node.inputs[0]).type.dtype);
  switch (node.op) {
    case OpKind::transpose:
      return std::make_unique<TransposeKernel>(input_shape(graph, node, 0),
                                               std::get<PermAttrs>(node.attrs).perm, element);
    case OpKind::slice:
      return std::make_unique<SliceKernel>(false, input_shape(graph, node, 0),
                                           std::get<SliceAttrs>(node.attrs), element);
    case OpKind::slice_grad:
      return std::make_unique<SliceKernel>(true, output_shape(graph, node, 0),
                                           std::get<SliceAttrs>(node.attrs), element);
    case OpKind::reshape:
      return std::make_unique<ReshapeKernel>(graph.value(node.outputs[0]).bytes());
    case OpKind::concat:
    case OpKind::split: {
      const bool split = node.op == OpKind::split;
      const int64_t axis = split ? std::get<SplitAttrs>(node.attrs).axis
                                 : std::get<AxisAttrs>(node.attrs).axis;
      std::vector<int64_t> lens;
      for (ValueId piece : split ? node.outputs : node.inputs) {
        lens.push_back(graph.value(piece).type.shape[static_cast<size_t>(axis)]);
      }
      const Shape& joined = split ? input_shape(graph, node, 0) : output_shape(graph, node, 0);
      return std::make_unique<ConcatKernel>(split, joined, axis, std::move(lens), element);
    }
    default:
      MEMFIT_CHECK(false);
      return nullptr;
  }
}

// The copies move the bytes of any dtype as they are; fill writes f32.
bool any_dtype(const Graph&, const Node&) { return true; }

}  // namespace

MEMFIT_CPU_KERNEL(reshape, make_shape_kernel, any_dtype)
MEMFIT_CPU_KERNEL(transpose, make_shape_kernel, any_dtype)
MEMFIT_CPU_KERNEL(concat, make_shape_kernel, any_dtype)
MEMFIT_CPU_KERNEL(split, make_shape_kernel, any_dtype)
MEMFIT_CPU_KERNEL(slice, make_shape_kernel, any_dtype)
MEMFIT_CPU_KERNEL(slice_grad, make_shape_kernel, any_dtype)
MEMFIT_CPU_KERNEL(fill, make_shape_kernel, any_dtype)

}  // namespace memfit::cpu
