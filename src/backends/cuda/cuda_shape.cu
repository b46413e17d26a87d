// memfit's data-movement and sequence CUDA kernels (cuda_shape_launchers.h).
// Copies are one thread per destination element; the gradients that sum
// (upsample_grad, embedding_grad) gather one thread per output element and
// add its terms in the reference's order, in double, without atomics.
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "backends/cuda/cuda_grid.cuh"
#include "backends/cuda/cuda_shape_launchers.h"

namespace memfit::cuda {
namespace {

// ---- Strided copy ----

// One thread per element of the copy's space; Word is 4, 8 or 16 bytes (the
// shape already counted in Words) and Index 32 or 64 bits, whichever holds
// every index and offset.
template <class Word, class Index>
__global__ void copy_kernel(const Word* x, Word* y, CopyShape s, Index count) {
  for (Index i = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index rest = i;
    Index x_at = static_cast<Index>(s.x_offset), y_at = static_cast<Index>(s.y_offset);
    for (int d = s.rank - 1; d >= 0; --d) {
      const auto size = static_cast<Index>(s.sizes[d]);
      const Index c = rest % size;
      rest /= size;
      x_at += c * static_cast<Index>(s.x_strides[d]);
      y_at += c * static_cast<Index>(s.y_strides[d]);
    }
    y[y_at] = x[x_at];
  }
}

// The largest of 4, 2, 1 elements that the copy can move as one word: the
// innermost dimension contiguous on both sides, and every size, stride,
// offset and pointer a multiple of it.
int vector_width(const void* x, const void* y, const CopyShape& s) {
  if (s.rank == 0 || s.x_strides[s.rank - 1] != 1 || s.y_strides[s.rank - 1] != 1) return 1;
  for (int width = 4; width > 1; width /= 2) {
    bool fits = s.sizes[s.rank - 1] % width == 0 && s.x_offset % width == 0 &&
                s.y_offset % width == 0 &&
                reinterpret_cast<uintptr_t>(x) % (width * sizeof(float)) == 0 &&
                reinterpret_cast<uintptr_t>(y) % (width * sizeof(float)) == 0;
    for (int d = 0; d + 1 < s.rank; ++d) {
      fits = fits && s.x_strides[d] % width == 0 && s.y_strides[d] % width == 0;
    }
    if (fits) return width;
  }
  return 1;
}

template <class Word>
void copy_words(const void* x, void* y, const CopyShape& s, void* stream) {
  int64_t count = 1, x_last = s.x_offset, y_last = s.y_offset;
  for (int d = 0; d < s.rank; ++d) {
    count *= s.sizes[d];
    x_last += (s.sizes[d] - 1) * s.x_strides[d];
    y_last += (s.sizes[d] - 1) * s.y_strides[d];
  }
  const auto* from = static_cast<const Word*>(x);
  auto* to = static_cast<Word*>(y);
  constexpr int64_t k32 = int64_t{1} << 31;
  if (count < k32 && x_last < k32 && y_last < k32) {
    copy_kernel<Word, uint32_t><<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(
        from, to, s, static_cast<uint32_t>(count));
  } else {
    copy_kernel<Word, int64_t>
        <<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(from, to, s, count);
  }
}

// ---- pad, slice_grad, where, causal_mask ----

__global__ void pad_kernel(const float* x, float* y, PadShape s, float value, int64_t count) {
  MEMFIT_FOR_EACH(i, count) {
    int64_t rest = i, x_at = 0, x_stride = 1;
    bool inside = true;
    for (int d = s.rank - 1; d >= 0; --d) {
      const int64_t c = rest % s.y_sizes[d] - s.before[d];
      rest /= s.y_sizes[d];
      inside = inside && c >= 0 && c < s.x_sizes[d];
      x_at += c * x_stride;
      x_stride *= s.x_sizes[d];
    }
    y[i] = inside ? x[x_at] : value;
  }
}

__global__ void slice_grad_kernel(const float* dy, const float* acc, float* dx, int64_t outer,
                                  int64_t len, int64_t inner, int64_t start, int64_t end) {
  const int64_t plane = len * inner, dy_plane = (end - start) * inner;
  MEMFIT_FOR_EACH(i, outer * plane) {
    const int64_t o = i / plane, r = i % plane, j = r / inner;
    const float base = acc != nullptr ? acc[i] : 0.0f;
    if (j >= start && j < end) {
      const float part = dy[o * dy_plane + r - start * inner];
      dx[i] = acc != nullptr ? base + part : part;
    } else {
      dx[i] = base;
    }
  }
}

__global__ void where_kernel(const int32_t* cond, const float* a, const float* b, float* y,
                             WhereShape s, int64_t count) {
  MEMFIT_FOR_EACH(i, count) {
    int64_t rest = i, at = 0;
    for (int d = s.rank - 1; d >= 0; --d) {
      at += rest % s.sizes[d] * s.cond_strides[d];
      rest /= s.sizes[d];
    }
    y[i] = cond[at] != 0 ? a[i] : b[i];
  }
}

__global__ void causal_mask_kernel(const float* x, float* y, int64_t count, int64_t tq, int64_t tk,
                                   int64_t offset, float value) {
  MEMFIT_FOR_EACH(i, count) {
    const int64_t j = i % tk, row = i / tk % tq;
    // j > row + offset, without overflowing for any offset.
    y[i] = j - row > offset ? value : x[i];
  }
}

// ---- upsample ----

// The taps of output coordinate o along a dimension of n inputs and factor
// s: y[o] = sum over t < count of weight[t] x[index[t]]. ref_upsample's
// dimension_taps, each double operation rounded as the reference rounds it.
struct Taps {
  int count;
  int64_t index[2];
  double weight[2];
};

__device__ Taps taps_of(int64_t o, int64_t n, int64_t s, bool linear) {
  if (!linear) return Taps{1, {o / s, 0}, {1.0, 0.0}};
  const double c = fmax(
      __dsub_rn(__ddiv_rn(__dadd_rn(static_cast<double>(o), 0.5), static_cast<double>(s)), 0.5),
      0.0);
  const auto l = static_cast<int64_t>(floor(c));
  const double lambda = __dsub_rn(c, static_cast<double>(l));
  return Taps{2, {l, l + 1 < n - 1 ? l + 1 : n - 1}, {__dsub_rn(1.0, lambda), lambda}};
}

// weight_z weight_y weight_x, multiplied left to right as the reference does.
__device__ double tap_weight(const Taps& z, int a, const Taps& y, int b, const Taps& x, int c) {
  return __dmul_rn(__dmul_rn(z.weight[a], y.weight[b]), x.weight[c]);
}

// Whether a tap of `t` reads input coordinate i.
__device__ bool reads(const Taps& t, int64_t i) {
  return t.index[0] == i || (t.count == 2 && t.index[1] == i);
}

__global__ void upsample_kernel(const float* x, float* y, UpsampleShape s) {
  const int64_t out1 = s.in[1] * s.scale[1], out2 = s.in[2] * s.scale[2];
  const int64_t out_volume = s.in[0] * s.scale[0] * out1 * out2;
  const int64_t in_volume = s.in[0] * s.in[1] * s.in[2];
  MEMFIT_FOR_EACH(i, s.planes * out_volume) {
    const int64_t o = i % out_volume;
    const float* volume = x + i / out_volume * in_volume;
    const Taps tz = taps_of(o / (out1 * out2), s.in[0], s.scale[0], s.linear);
    const Taps ty = taps_of(o / out2 % out1, s.in[1], s.scale[1], s.linear);
    const Taps tx = taps_of(o % out2, s.in[2], s.scale[2], s.linear);
    double sum = 0.0;
#pragma unroll
    for (int a = 0; a < 2; ++a) {
      if (a == tz.count) break;
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        if (b == ty.count) break;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          if (c == tx.count) break;
          const int64_t at = (tz.index[a] * s.in[1] + ty.index[b]) * s.in[2] + tx.index[c];
          sum = __dadd_rn(
              sum, __dmul_rn(tap_weight(tz, a, ty, b, tx, c), static_cast<double>(volume[at])));
        }
      }
    }
    y[i] = static_cast<float>(sum);
  }
}

// The outputs along a dimension (n inputs, factor s) that may read input i:
// a superset of those with a tap at i (floor(c) is i - 1 or i for them).
struct Range {
  int64_t begin, end;
};
__device__ Range readers(int64_t i, int64_t n, int64_t s) {
  const int64_t begin = (i - 1) * s, end = (i + 2) * s;
  return Range{begin > 0 ? begin : 0, end < n * s ? end : n * s};
}

// One thread per dx element (iz, iy, ix) of a plane: the outputs (oz, oy, ox)
// in ascending order, and within one the taps (a, b, c) in order, that read
// it; ref_upsample_grad adds them into that element in this same order.
__global__ void upsample_grad_kernel(const float* dy, float* dx, UpsampleShape s) {
  const int64_t out1 = s.in[1] * s.scale[1], out2 = s.in[2] * s.scale[2];
  const int64_t out_volume = s.in[0] * s.scale[0] * out1 * out2;
  const int64_t in_volume = s.in[0] * s.in[1] * s.in[2];
  MEMFIT_FOR_EACH(i, s.planes * in_volume) {
    const float* plane_dy = dy + i / in_volume * out_volume;
    const int64_t at = i % in_volume;
    const int64_t iz = at / (s.in[1] * s.in[2]), iy = at / s.in[2] % s.in[1], ix = at % s.in[2];
    const Range rz = readers(iz, s.in[0], s.scale[0]), ry = readers(iy, s.in[1], s.scale[1]),
                rx = readers(ix, s.in[2], s.scale[2]);
    double sum = 0.0;
    for (int64_t oz = rz.begin; oz < rz.end; ++oz) {
      const Taps tz = taps_of(oz, s.in[0], s.scale[0], s.linear);
      if (!reads(tz, iz)) continue;
      for (int64_t oy = ry.begin; oy < ry.end; ++oy) {
        const Taps ty = taps_of(oy, s.in[1], s.scale[1], s.linear);
        if (!reads(ty, iy)) continue;
        for (int64_t ox = rx.begin; ox < rx.end; ++ox) {
          const Taps tx = taps_of(ox, s.in[2], s.scale[2], s.linear);
          if (!reads(tx, ix)) continue;
          const auto d = static_cast<double>(plane_dy[(oz * out1 + oy) * out2 + ox]);
#pragma unroll
          for (int a = 0; a < 2; ++a) {
            if (a == tz.count) break;
            if (tz.index[a] != iz) continue;
#pragma unroll
            for (int b = 0; b < 2; ++b) {
              if (b == ty.count) break;
              if (ty.index[b] != iy) continue;
#pragma unroll
              for (int c = 0; c < 2; ++c) {
                if (c == tx.count) break;
                if (tx.index[c] != ix) continue;
                sum = __dadd_rn(sum, __dmul_rn(tap_weight(tz, a, ty, b, tx, c), d));
              }
            }
          }
        }
      }
    }
    dx[i] = static_cast<float>(sum);
  }
}

// ---- embedding ----

__global__ void embedding_kernel(const int32_t* ids, const float* table, float* y, int64_t count,
                                 int64_t rows, int64_t dim) {
  MEMFIT_FOR_EACH(i, count * dim) {
    const int64_t id = ids[i / dim];
    y[i] = id >= 0 && id < rows ? table[id * dim + i % dim] : NAN;
  }
}

// Sorting elements per block of bitonic_block_kernel: two per thread.
constexpr int64_t kSortTile = 2 * kThreads;

// keys[n] = (ids[n] << 32) | n for n < count, an id outside [0, rows) taken
// as `rows` (sorted after every valid one); ~0 after count, up to `padded`.
__global__ void sort_keys_kernel(const int32_t* ids, uint64_t* keys, int64_t count, int64_t padded,
                                 int64_t rows) {
  MEMFIT_FOR_EACH(n, padded) {
    if (n >= count) {
      keys[n] = ~uint64_t{0};
      continue;
    }
    const int64_t id = ids[n];
    const uint64_t row = static_cast<uint64_t>(id >= 0 && id < rows ? id : rows);
    keys[n] = row << 32 | static_cast<uint64_t>(n);
  }
}

// The element pair (i, i + j) of compare-exchange t in a bitonic step of
// distance j: the pairs of all t < size / 2 cover every element once.
__device__ int64_t pair_first(int64_t t, int64_t j) { return t / j * 2 * j + t % j; }

// Puts keys[i] and keys[i + j] in ascending order when element i of the
// whole array lies in an ascending run of the merge of size k, else in
// descending order.
__device__ void compare_exchange(uint64_t* keys, int64_t i, int64_t j, int64_t first, int64_t k) {
  const uint64_t a = keys[i], b = keys[i + j];
  const bool ascending = ((first + i) & k) == 0;
  if (ascending ? a > b : a < b) {
    keys[i] = b;
    keys[i + j] = a;
  }
}

// One step (merge size k, distance j >= kSortTile) over the whole array.
__global__ void bitonic_step_kernel(uint64_t* keys, int64_t padded, int64_t k, int64_t j) {
  MEMFIT_FOR_EACH(t, padded / 2) compare_exchange(keys, pair_first(t, j), j, 0, k);
}

// The steps of distance below kSortTile, in shared memory, one tile of
// kSortTile keys per block: for each merge size k from k_first to k_last
// (powers of 2), the distances min(k / 2, kThreads) down to 1.
__global__ void bitonic_block_kernel(uint64_t* keys, int64_t k_first, int64_t k_last) {
  __shared__ uint64_t tile[kSortTile];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kSortTile;
  tile[threadIdx.x] = keys[first + threadIdx.x];
  tile[threadIdx.x + kThreads] = keys[first + kThreads + threadIdx.x];
  __syncthreads();
  for (int64_t k = k_first; k <= k_last; k *= 2) {
    for (int64_t j = k / 2 < kThreads ? k / 2 : kThreads; j > 0; j /= 2) {
      compare_exchange(tile, pair_first(threadIdx.x, j), j, first, k);
      __syncthreads();
    }
  }
  keys[first + threadIdx.x] = tile[threadIdx.x];
  keys[first + kThreads + threadIdx.x] = tile[threadIdx.x + kThreads];
}

// starts[r] for r <= rows: the first sorted position whose row is at least
// r (binary search), so row r's positions are sorted[starts[r], starts[r + 1])
// and starts[rows] counts the valid ids.
__global__ void row_starts_kernel(const uint64_t* keys, int64_t* starts, int64_t count,
                                  int64_t rows) {
  MEMFIT_FOR_EACH(r, rows + 1) {
    const uint64_t target = static_cast<uint64_t>(r) << 32;
    int64_t low = 0, high = count;
    while (low < high) {
      const int64_t mid = low + (high - low) / 2;
      if (keys[mid] < target) {
        low = mid + 1;
      } else {
        high = mid;
      }
    }
    starts[r] = low;
  }
}

// One thread per dtable element (r, d): dy[n, d] over row r's positions n,
// ascending, summed in double from 0.
__global__ void embedding_grad_kernel(const float* dy, const uint64_t* keys, const int64_t* starts,
                                      const float* acc, float* dtable, int64_t count, int64_t rows,
                                      int64_t dim) {
  const bool valid = starts[rows] == count;
  MEMFIT_FOR_EACH(i, rows * dim) {
    if (!valid) {
      dtable[i] = NAN;
      continue;
    }
    const int64_t r = i / dim, d = i % dim;
    double sum = 0.0;
#pragma unroll 4
    for (int64_t k = starts[r]; k < starts[r + 1]; ++k) {
      const auto n = static_cast<int64_t>(keys[k] & 0xffffffffu);
      sum += static_cast<double>(dy[n * dim + d]);
    }
    dtable[i] = acc != nullptr ? static_cast<float>(static_cast<double>(acc[i]) +
                                                    static_cast<double>(static_cast<float>(sum)))
                               : static_cast<float>(sum);
  }
}

// The sort's length: a power of 2, at least one tile.
int64_t padded_count(int64_t count) {
  int64_t padded = kSortTile;
  while (padded < count) padded *= 2;
  return padded;
}

}  // namespace

void launch_copy(const void* x, void* y, const CopyShape& shape, void* stream) {
  const int width = vector_width(x, y, shape);
  if (width == 1) return copy_words<uint32_t>(x, y, shape, stream);
  CopyShape words = shape;  // counted in words of `width` elements
  words.sizes[words.rank - 1] /= width;
  for (int d = 0; d + 1 < words.rank; ++d) {
    words.x_strides[d] /= width;
    words.y_strides[d] /= width;
  }
  words.x_offset /= width;
  words.y_offset /= width;
  if (width == 4) return copy_words<uint4>(x, y, words, stream);
  copy_words<uint2>(x, y, words, stream);
}

void launch_pad(const float* x, float* y, const PadShape& shape, float value, void* stream) {
  int64_t count = 1;
  for (int d = 0; d < shape.rank; ++d) count *= shape.y_sizes[d];
  pad_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(x, y, shape, value, count);
}

void launch_slice_grad(const float* dy, const float* acc, float* dx, int64_t outer, int64_t len,
                       int64_t inner, int64_t start, int64_t end, void* stream) {
  slice_grad_kernel<<<blocks_for(outer * len * inner), kThreads, 0, as_stream(stream)>>>(
      dy, acc, dx, outer, len, inner, start, end);
}

void launch_where(const int32_t* cond, const float* a, const float* b, float* y,
                  const WhereShape& shape, void* stream) {
  int64_t count = 1;
  for (int d = 0; d < shape.rank; ++d) count *= shape.sizes[d];
  where_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(cond, a, b, y, shape, count);
}

void launch_causal_mask(const float* x, float* y, int64_t count, int64_t tq, int64_t tk,
                        int64_t offset, float value, void* stream) {
  causal_mask_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(x, y, count, tq, tk,
                                                                            offset, value);
}

void launch_upsample(const float* x, float* y, const UpsampleShape& shape, void* stream) {
  int64_t count = shape.planes;
  for (int d = 0; d < 3; ++d) count *= shape.in[d] * shape.scale[d];
  upsample_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(x, y, shape);
}

void launch_upsample_grad(const float* dy, float* dx, const UpsampleShape& shape, void* stream) {
  const int64_t count = shape.planes * shape.in[0] * shape.in[1] * shape.in[2];
  upsample_grad_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(dy, dx, shape);
}

void launch_embedding(const int32_t* ids, const float* table, float* y, int64_t count, int64_t rows,
                      int64_t dim, void* stream) {
  embedding_kernel<<<blocks_for(count * dim), kThreads, 0, as_stream(stream)>>>(ids, table, y,
                                                                                count, rows, dim);
}

size_t embedding_grad_workspace(int64_t count, int64_t rows) {
  return static_cast<size_t>(padded_count(count)) * sizeof(uint64_t) +
         static_cast<size_t>(rows + 1) * sizeof(int64_t);
}

void launch_embedding_grad(const float* dy, const int32_t* ids, const float* acc, float* dtable,
                           int64_t count, int64_t rows, int64_t dim, void* workspace,
                           void* stream) {
  const cudaStream_t s = as_stream(stream);
  const int64_t padded = padded_count(count);
  auto* keys = static_cast<uint64_t*>(workspace);
  auto* starts = reinterpret_cast<int64_t*>(keys + padded);
  const auto tiles = static_cast<unsigned>(padded / kSortTile);
  sort_keys_kernel<<<blocks_for(padded), kThreads, 0, s>>>(ids, keys, count, padded, rows);
  // Bitonic sort: merges of size k = 2, 4, ..., padded, each a series of
  // compare-exchanges at distances k / 2, k / 4, ..., 1; the distances below
  // a tile run in shared memory.
  bitonic_block_kernel<<<tiles, kThreads, 0, s>>>(keys, 2, kSortTile);
  for (int64_t k = 2 * kSortTile; k <= padded; k *= 2) {
    for (int64_t j = k / 2; j >= kSortTile; j /= 2) {
      bitonic_step_kernel<<<blocks_for(padded / 2), kThreads, 0, s>>>(keys, padded, k, j);
    }
    bitonic_block_kernel<<<tiles, kThreads, 0, s>>>(keys, k, k);
  }
  row_starts_kernel<<<blocks_for(rows + 1), kThreads, 0, s>>>(keys, starts, count, rows);
  embedding_grad_kernel<<<blocks_for(rows * dim), kThreads, 0, s>>>(dy, keys, starts, acc, dtable,
                                                                    count, rows, dim);
}

}  // namespace memfit::cuda
