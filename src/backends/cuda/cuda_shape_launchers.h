// The launchers of memfit's CUDA kernels of the data-movement and sequence ops (cuda_shape.cu):
// transpose, broadcast_to, slice, concat, split, pad and their gradients,
// where, causal_mask, upsample and its gradient, embedding and its gradient.
// Plain C++ types only, as cuda_launchers.h: each function launches on `stream`
// (a cudaStream_t) and returns at once. Tensors are dense and row-major.
// Sums follow the reference kernels (src/backends/reference/) term for term:
// in double, in the reference's order, rounded to float once, without
// atomics, so that every run gives the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/cuda/cuda_launchers.h"

namespace memfit::cuda {

// A strided copy of 4-byte elements (f32 or i32): for every coordinate c of
// the space `sizes` (`rank` dimensions),
//   y[y_offset + sum_d c_d y_strides[d]] = x[x_offset + sum_d c_d x_strides[d]].
// transpose, broadcast_to (stride 0 along a repeated dimension), slice, split
// (x strided), concat (y strided, one call per input) and pad_grad are all
// this copy. x and y must not overlap.
struct CopyShape {
  int rank = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t x_strides[kMaxDims] = {}, y_strides[kMaxDims] = {};
  int64_t x_offset = 0, y_offset = 0;
};
void launch_copy(const void* x, void* y, const CopyShape& shape, void* stream);

// pad: y (y_sizes) = value, except y[c + before] = x[c] for every coordinate
// c of x (x_sizes); rank 0 copies the one element.
struct PadShape {
  int rank = 0;
  int64_t y_sizes[kMaxDims] = {}, x_sizes[kMaxDims] = {}, before[kMaxDims] = {};
};
void launch_pad(const float* x, float* y, const PadShape& shape, float value, void* stream);

// slice_grad, dx seen as (outer, len, inner) around the axis and dy as
// (outer, end - start, inner): dx[o, j, i] = dy[o, j - start, i] for j in
// [start, end), 0 elsewhere; with acc (of dx's shape; it may be dx), acc
// outside and acc + dy (a float add) inside.
void launch_slice_grad(const float* dy, const float* acc, float* dx, int64_t outer, int64_t len,
                       int64_t inner, int64_t start, int64_t end, void* stream);

// where: y[i] = cond[offset(i)] != 0 ? a[i] : b[i], offset(i) the offset
// that i's coordinates in `sizes` reach with cond_strides (0 along a
// dimension cond broadcasts). y may be a or b.
struct WhereShape {
  int rank = 0;
  int64_t sizes[kMaxDims] = {}, cond_strides[kMaxDims] = {};
};
void launch_where(const int32_t* cond, const float* a, const float* b, float* y,
                  const WhereShape& shape, void* stream);

// causal_mask, x seen as (batch, tq, tk) (count elements): element (b, i, j)
// becomes `value` where j > i + offset, else x's. y may be x.
void launch_causal_mask(const float* x, float* y, int64_t count, int64_t tq, int64_t tk,
                        int64_t offset, float value, void* stream);

// upsample of `planes` (N C) volumes (in[0], in[1], in[2]) = (D, H, W) by
// integer factors `scale` into (D scale[0], H scale[1], W scale[2]); a 1-D or
// 2-D upsample has leading dimensions of size 1 and factor 1. Nearest:
// y[o] = x[o / scale]; linear (PyTorch's align_corners=false): per
// dimension two taps at floor(c) and min(floor(c) + 1, n - 1), c = max((o +
// 0.5) / scale - 0.5, 0), weights 1 - (c - floor(c)) and c - floor(c); every
// output sums its 2^3 taps (weights multiplied z y x) in double, in the
// reference's order and without fused multiply-adds.
struct UpsampleShape {
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1}, scale[3] = {1, 1, 1};
  bool linear = false;
};
void launch_upsample(const float* x, float* y, const UpsampleShape& shape, void* stream);
// The transpose: dx[i] = sum of weight * dy[o] over the outputs o and taps
// that read i, outputs in ascending order and taps in their order within
// one, in double: ref_upsample_grad's scatter, gathered one thread per dx
// element.
void launch_upsample_grad(const float* dy, float* dx, const UpsampleShape& shape, void* stream);

// embedding: y[n, :] = table[ids[n], :] for n < count, the table (rows,
// dim). An id outside [0, rows) gives a row of NaN.
void launch_embedding(const int32_t* ids, const float* table, float* y, int64_t count, int64_t rows,
                      int64_t dim, void* stream);

// The workspace launch_embedding_grad needs for `count` ids into `rows` rows.
size_t embedding_grad_workspace(int64_t count, int64_t rows);
// embedding_grad: dtable[r, :] = the sum over n with ids[n] = r, n
// ascending, of dy[n, :], in double, rounded once (0 for rows no id names);
// with acc (it may be dtable), float(acc + that float), added in double.
// The positions are sorted by (id, n) in the workspace first (bitonic sort:
// the keys are distinct, so the result is unique), then one thread per
// element of dtable sums its row's positions in order. Any id outside
// [0, rows) makes the whole of dtable NaN. count and rows below 2^31.
void launch_embedding_grad(const float* dy, const int32_t* ids, const float* acc, float* dtable,
                           int64_t count, int64_t rows, int64_t dim, void* workspace, void* stream);

}  // namespace memfit::cuda
