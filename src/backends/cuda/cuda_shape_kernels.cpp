// The cuda backend's kernels of the data-movement and sequence ops
// (launching cuda_shape_launchers.h's kernels): transpose, broadcast_to,
// slice, slice_grad, concat, split, pad, pad_grad, where, causal_mask,
// upsample, upsample_grad, embedding, embedding_grad, on plain (row-major)
// values. Each node's shapes become the launch's index arithmetic
// when its kernel is made: neighbouring dimensions that both sides walk as
// one are merged (a transpose of (B, T, H, D) to (B, H, T, D) copies
// 3-D rows of D elements), so most copies need only a few dimensions.
#include "backends/cuda/cuda_kernels.h"

#ifdef MEMFIT_HAVE_CUDA

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_kernel_util.h"
#include "backends/cuda/cuda_shape_launchers.h"

namespace memfit::cuda {
namespace {

using Strides = std::vector<int64_t>;

const memfit::Shape& shape_of(const Graph& graph, ValueId v) { return graph.value(v).type.shape; }

Strides row_major(const memfit::Shape& shape) {
  Strides strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

// Strides in x of shape `x` read as broadcast to `y` (NumPy, aligned on the
// right): 0 along a dimension x lacks or holds once.
Strides broadcast_strides(const memfit::Shape& x, const memfit::Shape& y) {
  const Strides x_strides = row_major(x);
  Strides strides(y.size(), 0);
  const size_t lead = y.size() - x.size();
  for (size_t d = 0; d < x.size(); ++d) strides[lead + d] = x[d] == 1 ? 0 : x_strides[d];
  return strides;
}

// A space of `sizes` walked with two sets of strides, x's and y's.
struct Walk {
  memfit::Shape sizes;
  Strides x_strides, y_strides;
};

// The same walk with dimensions of size 1 dropped and each dimension merged
// into the one before it where both strides continue it (outer stride =
// inner stride * inner size): the same elements, in the same order.
Walk merged(const Walk& walk) {
  Walk out;
  for (size_t d = 0; d < walk.sizes.size(); ++d) {
    const int64_t size = walk.sizes[d];
    if (size == 1) continue;
    if (!out.sizes.empty() && out.x_strides.back() == walk.x_strides[d] * size &&
        out.y_strides.back() == walk.y_strides[d] * size) {
      out.sizes.back() *= size;
      out.x_strides.back() = walk.x_strides[d];
      out.y_strides.back() = walk.y_strides[d];
      continue;
    }
    out.sizes.push_back(size);
    out.x_strides.push_back(walk.x_strides[d]);
    out.y_strides.push_back(walk.y_strides[d]);
  }
  return out;
}

// The copy of `walk` (merged), none when it keeps more than kMaxDims dimensions.
std::optional<CopyShape> copy_shape(const Walk& walk, int64_t x_offset, int64_t y_offset) {
  const Walk m = merged(walk);
  if (m.sizes.size() > static_cast<size_t>(kMaxDims)) return std::nullopt;
  CopyShape shape;
  shape.rank = static_cast<int>(m.sizes.size());
  for (size_t d = 0; d < m.sizes.size(); ++d) {
    shape.sizes[d] = m.sizes[d];
    shape.x_strides[d] = m.x_strides[d];
    shape.y_strides[d] = m.y_strides[d];
  }
  shape.x_offset = x_offset;
  shape.y_offset = y_offset;
  return shape;
}

// y (dense, shape y) gathered from x at x_offset + the coordinates times x_strides.
std::optional<CopyShape> gather(const memfit::Shape& y, const Strides& x_strides,
                                int64_t x_offset) {
  return copy_shape(Walk{y, x_strides, row_major(y)}, x_offset, 0);
}

// transpose: dimension i of y walks x with x's stride of dimension perm[i].
std::optional<CopyShape> transpose_copy(const memfit::Shape& x, const memfit::Shape& y,
                                        const std::vector<int64_t>& perm) {
  const Strides x_strides = row_major(x);
  Strides strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = x_strides[static_cast<size_t>(perm[i])];
  return gather(y, strides, 0);
}

// pad_grad: dx[c] = dy[c + before].
std::optional<CopyShape> pad_grad_copy(const memfit::Shape& dy, const memfit::Shape& dx,
                                       const memfit::Shape& before) {
  const Strides dy_strides = row_major(dy);
  int64_t origin = 0;
  for (size_t d = 0; d < dx.size(); ++d) origin += before[d] * dy_strides[d];
  return gather(dx, dy_strides, origin);
}

// A value seen as (outer, len, inner) around `axis`.
struct AxisView {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisView axis_view(const memfit::Shape& shape, int64_t axis) {
  AxisView view;
  const auto a = static_cast<size_t>(axis);
  for (size_t d = 0; d < a; ++d) view.outer *= shape[d];
  view.len = shape[a];
  for (size_t d = a + 1; d < shape.size(); ++d) view.inner *= shape[d];
  return view;
}

// Elements [x_start, x_start + len) along the axis of x (x_len long) to
// [y_start, y_start + len) along the axis of y (y_len long), for every outer
// and inner index: slice and split (y_start 0), concat (x_start 0). Three
// dimensions at most, so always a copy.
CopyShape axis_copy(int64_t outer, int64_t inner, int64_t len, int64_t x_len, int64_t x_start,
                    int64_t y_len, int64_t y_start) {
  return *copy_shape(
      Walk{{outer, len, inner}, {x_len * inner, inner, 1}, {y_len * inner, inner, 1}},
      x_start * inner, y_start * inner);
}

// pad: dimensions without padding merged into the one before them (their
// elements then move in whole runs); none when more than kMaxDims remain.
std::optional<PadShape> pad_shape(const memfit::Shape& x, const memfit::Shape& y,
                                  const PadAttrs& attrs) {
  memfit::Shape x_sizes, y_sizes, before;
  for (size_t d = 0; d < x.size(); ++d) {
    if (!x_sizes.empty() && attrs.before[d] == 0 && attrs.after[d] == 0) {
      x_sizes.back() *= x[d];
      y_sizes.back() *= y[d];
      before.back() *= x[d];
      continue;
    }
    x_sizes.push_back(x[d]);
    y_sizes.push_back(y[d]);
    before.push_back(attrs.before[d]);
  }
  if (x_sizes.size() > static_cast<size_t>(kMaxDims)) return std::nullopt;
  PadShape shape;
  shape.rank = static_cast<int>(x_sizes.size());
  for (size_t d = 0; d < x_sizes.size(); ++d) {
    shape.x_sizes[d] = x_sizes[d];
    shape.y_sizes[d] = y_sizes[d];
    shape.before[d] = before[d];
  }
  return shape;
}

// where: cond's strides broadcast to y, dimensions merged as a copy's.
std::optional<WhereShape> where_shape(const memfit::Shape& cond, const memfit::Shape& y) {
  const Walk m = merged(Walk{y, broadcast_strides(cond, y), row_major(y)});
  if (m.sizes.size() > static_cast<size_t>(kMaxDims)) return std::nullopt;
  WhereShape shape;
  shape.rank = static_cast<int>(m.sizes.size());
  for (size_t d = 0; d < m.sizes.size(); ++d) {
    shape.sizes[d] = m.sizes[d];
    shape.cond_strides[d] = m.x_strides[d];
  }
  return shape;
}

// x (N, C, S1[, S2[, S3]]), the small side of upsample: its spatial
// dimensions last among (D, H, W), the missing ones of size 1, factor 1.
UpsampleShape upsample_shape(const memfit::Shape& x, const UpsampleAttrs& attrs) {
  UpsampleShape shape;
  shape.planes = x[0] * x[1];
  shape.linear = attrs.linear;
  const size_t spatial = x.size() - 2;
  for (size_t i = 0; i < spatial; ++i) {
    shape.in[3 - spatial + i] = x[2 + i];
    shape.scale[3 - spatial + i] = attrs.scale[i];
  }
  return shape;
}

constexpr int64_t k2To31 = int64_t{1} << 31;

// Whether these kernels serve `node`: one of the ops above, every operand
// plain, f32 (slice: f32 or i32; where's cond and embedding's ids i32), and
// a shape the kernels take (at most kMaxDims dimensions once neighbouring
// dimensions that move together are merged; embedding_grad: fewer than 2^31
// ids and rows).
bool shape_has_kernel(const Graph& graph, const Node& node) {
  if (!plain(graph, node)) return false;
  switch (node.op) {
    case OpKind::slice_grad:
    case OpKind::concat:
    case OpKind::split:
    case OpKind::causal_mask:
    case OpKind::upsample:
    case OpKind::upsample_grad:
      return has_op_dtypes(graph, node);
    case OpKind::slice: {  // 4-byte elements copied as they are: f32 or i32
      const DType dtype = graph.value(node.inputs[0]).type.dtype;
      return (dtype == DType::f32 || dtype == DType::i32) &&
             graph.value(node.outputs[0]).type.dtype == dtype;
    }
    case OpKind::transpose:
      return has_op_dtypes(graph, node) &&
             transpose_copy(shape_of(graph, node.inputs[0]), shape_of(graph, node.outputs[0]),
                            std::get<PermAttrs>(node.attrs).perm)
                 .has_value();
    case OpKind::broadcast_to: {
      const memfit::Shape& y = shape_of(graph, node.outputs[0]);
      return has_op_dtypes(graph, node) &&
             gather(y, broadcast_strides(shape_of(graph, node.inputs[0]), y), 0).has_value();
    }
    case OpKind::pad:
      return has_op_dtypes(graph, node) &&
             pad_shape(shape_of(graph, node.inputs[0]), shape_of(graph, node.outputs[0]),
                       std::get<PadAttrs>(node.attrs))
                 .has_value();
    case OpKind::pad_grad:
      return has_op_dtypes(graph, node) &&
             pad_grad_copy(shape_of(graph, node.inputs[0]), shape_of(graph, node.outputs[0]),
                           std::get<PadAttrs>(node.attrs).before)
                 .has_value();
    case OpKind::where:
      return has_op_dtypes(graph, node) &&
             where_shape(shape_of(graph, node.inputs[0]), shape_of(graph, node.outputs[0]))
                 .has_value();
    case OpKind::embedding:
      return has_op_dtypes(graph, node);
    case OpKind::embedding_grad:
      return has_op_dtypes(graph, node) && graph.value(node.inputs[1]).elements() < k2To31 &&
             shape_of(graph, node.outputs[0])[0] < k2To31;
    default:
      return false;
  }
}

Result<std::unique_ptr<Kernel>> make_shape_kernel(const Graph& graph, const Node& node,
                                                  std::shared_ptr<const Context> context) {
  if (!shape_has_kernel(graph, node)) {
    return no_kernel_for(node.op);
  }
  const memfit::Shape& x = shape_of(graph, node.inputs[0]);
  const memfit::Shape& y = shape_of(graph, node.outputs[0]);
  const auto copy = [](const CopyShape& shape) {
    return [shape](const KernelArgs& a, void* stream) {
      launch_copy(a.inputs[0], a.outputs[0], shape, stream);
    };
  };
  LaunchKernel::Launch launch;
  size_t workspace = 0;
  switch (node.op) {
    case OpKind::transpose:
      launch = copy(*transpose_copy(x, y, std::get<PermAttrs>(node.attrs).perm));
      break;
    case OpKind::broadcast_to:
      launch = copy(*gather(y, broadcast_strides(x, y), 0));
      break;
    case OpKind::pad_grad:  // dy -> dx
      launch = copy(*pad_grad_copy(x, y, std::get<PadAttrs>(node.attrs).before));
      break;
    case OpKind::slice: {
      const auto& attrs = std::get<SliceAttrs>(node.attrs);
      const AxisView xv = axis_view(x, attrs.axis), yv = axis_view(y, attrs.axis);
      launch = copy(axis_copy(xv.outer, xv.inner, yv.len, xv.len, attrs.start, yv.len, 0));
      break;
    }
    case OpKind::split: {  // output k: x's elements from the sum of the sizes before it
      const int64_t axis = std::get<SplitAttrs>(node.attrs).axis;
      const AxisView xv = axis_view(x, axis);
      std::vector<CopyShape> pieces;
      int64_t start = 0;
      for (ValueId out : node.outputs) {
        const int64_t len = shape_of(graph, out)[static_cast<size_t>(axis)];
        pieces.push_back(axis_copy(xv.outer, xv.inner, len, xv.len, start, len, 0));
        start += len;
      }
      launch = [pieces](const KernelArgs& a, void* stream) {
        for (size_t k = 0; k < pieces.size(); ++k)
          launch_copy(a.inputs[0], a.outputs[k], pieces[k], stream);
      };
      break;
    }
    case OpKind::concat: {  // input k: y's elements from the sum of the lengths before it
      const int64_t axis = std::get<AxisAttrs>(node.attrs).axis;
      const AxisView yv = axis_view(y, axis);
      std::vector<CopyShape> pieces;
      int64_t start = 0;
      for (ValueId in : node.inputs) {
        const int64_t len = shape_of(graph, in)[static_cast<size_t>(axis)];
        pieces.push_back(axis_copy(yv.outer, yv.inner, len, len, 0, yv.len, start));
        start += len;
      }
      launch = [pieces](const KernelArgs& a, void* stream) {
        for (size_t k = 0; k < pieces.size(); ++k)
          launch_copy(a.inputs[k], a.outputs[0], pieces[k], stream);
      };
      break;
    }
    case OpKind::slice_grad: {  // (dy[, acc]) -> dx
      const auto& attrs = std::get<SliceAttrs>(node.attrs);
      const AxisView dx = axis_view(y, attrs.axis);
      const bool acc = node.inputs.size() == 2;
      launch = [dx, acc, start = attrs.start, end = attrs.end](const KernelArgs& a, void* stream) {
        launch_slice_grad(in(a, 0), acc ? in(a, 1) : nullptr, out(a, 0), dx.outer, dx.len, dx.inner,
                          start, end, stream);
      };
      break;
    }
    case OpKind::pad: {
      const auto& attrs = std::get<PadAttrs>(node.attrs);
      const PadShape shape = *pad_shape(x, y, attrs);
      launch = [shape, value = attrs.value](const KernelArgs& a, void* stream) {
        launch_pad(in(a, 0), out(a, 0), shape, value, stream);
      };
      break;
    }
    case OpKind::where: {  // (cond i32, a, b) -> y
      const WhereShape shape = *where_shape(x, y);
      launch = [shape](const KernelArgs& a, void* stream) {
        launch_where(static_cast<const int32_t*>(a.inputs[0]), in(a, 1), in(a, 2), out(a, 0), shape,
                     stream);
      };
      break;
    }
    case OpKind::causal_mask: {  // x (..., Tq, Tk)
      const auto attrs = std::get<CausalMaskAttrs>(node.attrs);
      const int64_t count = graph.value(node.inputs[0]).elements();
      const int64_t tq = x[x.size() - 2], tk = x[x.size() - 1];
      launch = [attrs, count, tq, tk](const KernelArgs& a, void* stream) {
        launch_causal_mask(in(a, 0), out(a, 0), count, tq, tk, attrs.offset, attrs.value, stream);
      };
      break;
    }
    case OpKind::upsample: {
      const UpsampleShape shape = upsample_shape(x, std::get<UpsampleAttrs>(node.attrs));
      launch = [shape](const KernelArgs& a, void* stream) {
        launch_upsample(in(a, 0), out(a, 0), shape, stream);
      };
      break;
    }
    case OpKind::upsample_grad: {  // dy -> dx, dx the small side
      const UpsampleShape shape = upsample_shape(y, std::get<UpsampleAttrs>(node.attrs));
      launch = [shape](const KernelArgs& a, void* stream) {
        launch_upsample_grad(in(a, 0), out(a, 0), shape, stream);
      };
      break;
    }
    case OpKind::embedding: {  // (ids i32 (...), table (V, D)) -> (..., D)
      const memfit::Shape& table = shape_of(graph, node.inputs[1]);
      const int64_t count = graph.value(node.inputs[0]).elements();
      const int64_t rows = table[0], dim = table[1];
      launch = [count, rows, dim](const KernelArgs& a, void* stream) {
        launch_embedding(static_cast<const int32_t*>(a.inputs[0]), in(a, 1), out(a, 0), count, rows,
                         dim, stream);
      };
      break;
    }
    case OpKind::embedding_grad: {  // (dy (..., D), ids i32 (...)[, acc (V, D)]) -> (V, D)
      const int64_t count = graph.value(node.inputs[1]).elements();
      const int64_t rows = y[0], dim = y[1];
      const bool acc = node.inputs.size() == 3;
      workspace = embedding_grad_workspace(count, rows);
      launch = [count, rows, dim, acc](const KernelArgs& a, void* stream) {
        launch_embedding_grad(in(a, 0), static_cast<const int32_t*>(a.inputs[1]),
                              acc ? in(a, 2) : nullptr, out(a, 0), count, rows, dim, a.workspace,
                              stream);
      };
      break;
    }
    default:
      return no_kernel_for(node.op);
  }
  return launch_kernel(std::move(context), std::move(launch), workspace);
}

}  // namespace

MEMFIT_CUDA_KERNEL(transpose, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(broadcast_to, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(slice, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(slice_grad, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(concat, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(split, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(pad, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(pad_grad, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(where, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(causal_mask, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(upsample, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(upsample_grad, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(embedding, shape_has_kernel, make_shape_kernel)
MEMFIT_CUDA_KERNEL(embedding_grad, shape_has_kernel, make_shape_kernel)

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
