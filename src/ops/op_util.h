// Helpers shared by the op families: type checks, broadcasting, axes.
#pragma once

#include <string>
#include <vector>

#include "memfit/ir.h"
#include "ops/op_table.h"

namespace memfit::ops {

using Types = std::vector<TensorType>;

inline Status type_error(const std::string& what) { return Status::error(what); }

// No tensor may hold more elements, nor a window attribute exceed it, so that
// size arithmetic never overflows int64.
inline constexpr int64_t kMaxElements = int64_t{1} << 48;

// Error unless `type` is f32 with the given rank (-1: any rank), positive
// dimensions and at most kMaxElements elements.
Status expect_f32(const TensorType& type, int rank, const char* what);
// Error unless stride and dilation are in [1, kMaxElements] and pad in [0, kMaxElements].
Status expect_window(const Pair& stride, const Pair& pad, const Pair& dilation);
// NumPy broadcasting of two shapes; an error says which dimensions disagree.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// True when `from` broadcasts to `to` by NumPy rules.
bool broadcasts_to(const Shape& from, const Shape& to);
// An axis in [-rank, rank) made non-negative; error if out of range.
Result<int64_t> normalize_axis(int64_t axis, size_t rank);
// Output size of a sliding window: (in + 2 pad - dilation (k - 1) - 1) / stride + 1,
// or 0 when the (dilated) window is larger than the padded input.
int64_t window_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation);

// Common shape rules.
Result<Types> same_as_input(const Types& in, const Attrs&);  // one f32 output like input 0
Result<Types> same_as_all_inputs(const Types& in, const Attrs&);  // inputs agree; output like them

// The row of an embedding table that id number `position` of `node` names.
// An id outside [0, rows) stops the run with a message naming the node, the
// position and the id, before any memory outside the table is touched
// (clamping would train on wrong rows). Every backend's embedding kernels use it.
int64_t checked_table_row(const Node& node, int64_t id, int64_t position, int64_t rows);

// An op-table row for `op`; the family file fills in the rest.
OpInfo new_op(OpKind op);

// A few examples share these shapes.
TensorType f32(Shape shape);
OpExample example(std::vector<TensorType> inputs, Attrs attrs = NoAttrs{});

}  // namespace memfit::ops
