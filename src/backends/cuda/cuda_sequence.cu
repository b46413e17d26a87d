// memfit's CUDA kernels of the sequence ops (cuda_sequence_launchers.h): the
// LSTM cell and fused attention, and their gradients, in double as the
// reference kernels, every sum in a fixed order.
//
// The attention kernels share one tiling. A block of kThreads = 256 threads
// owns kRows = 32 rows, 8 threads per row; thread (r, g) = (t / 8, t % 8)
// holds, for each tile of kCols = 64 rows of the other side, the 8 dot
// products of its row with rows g, g + 8, ..., g + 56 of the tile. The dot
// products run through shared memory in chunks of 32 columns, each thread
// adding its products in ascending column order. The block then multiplies
// the tile's weights (kRows x kCols, in double in shared memory) into
// kCols columns of a matrix, each thread owning columns g, g + 8, ...,
// g + 56 of its row and adding the tile's rows in ascending order.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/cuda_grid.cuh"
#include "backends/cuda/cuda_sequence_launchers.h"
#include "core/random.h"

namespace memfit::cuda {
namespace {

// ---------------------------------------------------------------- LSTM cell

// As ref_lstm.cpp: sigmoid and tanh written with exp, in double.
__device__ double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ double tanh_of(double x) { return 1.0 - 2.0 / (exp(2.0 * x) + 1.0); }

__global__ void lstm_cell_kernel(const float* gates, const float* c_prev, float* h, float* c,
                                 int64_t hidden, int64_t count) {
  MEMFIT_FOR_EACH(at, count) {
    const float* a = gates + at / hidden * 4 * hidden + at % hidden;
    const double i = sigmoid(a[0]), f = sigmoid(a[hidden]), g = tanh_of(a[2 * hidden]),
                 o = sigmoid(a[3 * hidden]);
    const double cell = f * (c_prev != nullptr ? static_cast<double>(c_prev[at]) : 0.0) + i * g;
    c[at] = static_cast<float>(cell);
    h[at] = static_cast<float>(o * tanh_of(cell));
  }
}

// With tc = tanh(c): dc_total = dc + dh o (1 - tc^2); da_i = dc_total g i (1 - i),
// da_f = dc_total c_prev f (1 - f), da_g = dc_total i (1 - g^2),
// da_o = dh tc o (1 - o); dc_prev = dc_total f.
__global__ void lstm_cell_grad_kernel(const float* dh, const float* dc, const float* gates,
                                      const float* c, const float* c_prev, float* dgates,
                                      float* dc_prev, int64_t hidden, int64_t count) {
  MEMFIT_FOR_EACH(at, count) {
    const int64_t g_at = at / hidden * 4 * hidden + at % hidden;
    const double i = sigmoid(gates[g_at]), f = sigmoid(gates[g_at + hidden]),
                 g = tanh_of(gates[g_at + 2 * hidden]), o = sigmoid(gates[g_at + 3 * hidden]);
    const double tc = tanh_of(c[at]);
    const double dh_at = dh[at];
    const double cp = c_prev != nullptr ? static_cast<double>(c_prev[at]) : 0.0;
    const double d_cell = dc[at] + dh_at * o * (1.0 - tc * tc);
    dgates[g_at] = static_cast<float>(d_cell * g * i * (1.0 - i));
    dgates[g_at + hidden] = static_cast<float>(d_cell * cp * f * (1.0 - f));
    dgates[g_at + 2 * hidden] = static_cast<float>(d_cell * i * (1.0 - g * g));
    dgates[g_at + 3 * hidden] = static_cast<float>(dh_at * tc * o * (1.0 - o));
    if (dc_prev != nullptr) dc_prev[at] = static_cast<float>(d_cell * f);
  }
}

// ---------------------------------------------------------------- attention

constexpr int kRows = static_cast<int>(kAttentionRows);  // rows a block owns
constexpr int kCols = static_cast<int>(kAttentionCols);  // rows of a tile, columns of a block
constexpr int kGroup = 8;                                // threads per row
constexpr int kPer = kCols / kGroup;                     // tile rows (columns) per thread
constexpr int kChunk = 32;                               // dot-product columns per step
static_assert(kRows * kGroup == kThreads, "one block is kRows groups of kGroup threads");

// The score of a masked key (kAttentionMaskValue, include/memfit/attrs.h).
constexpr double kMaskValue = -1e9;

// A block's shared memory: the chunks of a dot product's two sides, or (at
// other times) a tile of kCols rows and kCols columns of a matrix, and the
// tile's weights. Rows are padded to an odd count of 4-byte words, so the
// threads of a warp read distinct banks.
struct TileMemory {
  union {
    struct {
      float a[kRows][kChunk + 1];
      float b[kCols][kChunk + 1];
    } dots;
    float cols[kCols][kCols + 1];
  };
  double weights[kRows][kCols + 1];
};

__device__ int row_of_thread() { return static_cast<int>(threadIdx.x) / kGroup; }
__device__ int group_of_thread() { return static_cast<int>(threadIdx.x) % kGroup; }

// acc[m] += a_r . b_(g + 8m) for this thread's (r, g): a holds a_rows rows
// and b holds b_rows rows, each of len floats; missing rows read as zeros.
// Each product of two floats is exact in double; a thread adds them in
// ascending column order. Ends with a barrier, so the caller may reuse the
// shared memory.
__device__ void dot_tile(const float* a, int64_t a_rows, const float* b, int64_t b_rows,
                         int64_t len, TileMemory& sm, double (&acc)[kPer]) {
  const int r = row_of_thread(), g = group_of_thread();
  for (int64_t c0 = 0; c0 < len; c0 += kChunk) {
    const int64_t width = len - c0 < kChunk ? len - c0 : kChunk;
    for (int e = static_cast<int>(threadIdx.x); e < kRows * kChunk; e += kThreads) {
      const int row = e / kChunk, col = e % kChunk;
      sm.dots.a[row][col] = row < a_rows && col < width ? a[row * len + c0 + col] : 0.0f;
    }
    for (int e = static_cast<int>(threadIdx.x); e < kCols * kChunk; e += kThreads) {
      const int row = e / kChunk, col = e % kChunk;
      sm.dots.b[row][col] = row < b_rows && col < width ? b[row * len + c0 + col] : 0.0f;
    }
    __syncthreads();
    if (r < a_rows && b_rows <= kGroup) {  // only b row g, if any
#pragma unroll 8
      for (int col = 0; col < kChunk; ++col) {
        acc[0] += static_cast<double>(sm.dots.a[r][col]) * static_cast<double>(sm.dots.b[g][col]);
      }
    } else if (r < a_rows) {
#pragma unroll 4
      for (int col = 0; col < kChunk; ++col) {
        const double x = sm.dots.a[r][col];
#pragma unroll
        for (int m = 0; m < kPer; ++m) {
          acc[m] += x * static_cast<double>(sm.dots.b[g + kGroup * m][col]);
        }
      }
    }
    __syncthreads();
  }
}

// sm.cols = columns c0 .. c0 + kCols - 1 of rows 0 .. rows - 1 of x (rows of
// width floats); zeros outside.
__device__ void load_cols(const float* x, int64_t rows, int64_t width, int64_t c0, TileMemory& sm) {
  for (int e = static_cast<int>(threadIdx.x); e < kCols * kCols; e += kThreads) {
    const int row = e / kCols, col = e % kCols;
    sm.cols[row][col] = row < rows && c0 + col < width ? x[row * width + c0 + col] : 0.0f;
  }
}

// acc[m] += sum over t < count of weights[r][t] cols[t][g + 8m], t
// ascending, for the rows r < rows.
__device__ void multiply_tile(const TileMemory& sm, int64_t rows, int64_t count,
                              double (&acc)[kPer]) {
  const int r = row_of_thread(), g = group_of_thread();
  if (r >= rows) return;
#pragma unroll 4
  for (int t = 0; t < count; ++t) {
    const double w = sm.weights[r][t];
#pragma unroll
    for (int m = 0; m < kPer; ++m) acc[m] += w * static_cast<double>(sm.cols[t][g + kGroup * m]);
  }
}

// One attention's sizes, masks and dropout.
struct Attention {
  AttentionShape s;
  AttentionParams p;
  const int32_t* key_mask;  // (batch, tk) or null

  // Keys 0 .. causal_kept(i) - 1 pass the causal mask for query i.
  __device__ int64_t causal_kept(int64_t i) const {
    if (!p.causal) return s.tk;
    const int64_t kept = i + p.offset + 1;
    return kept < 0 ? 0 : kept < s.tk ? kept : s.tk;
  }

  __device__ bool masked(int64_t b, int64_t i, int64_t j) const {
    return (p.causal && j > i + p.offset) || (key_mask != nullptr && key_mask[b * s.tk + j] == 0);
  }

  // The score of query i and key j of batch entry b from their dot product.
  __device__ double score(int64_t b, int64_t i, int64_t j, double dot) const {
    return masked(b, i, j) ? kMaskValue : static_cast<double>(p.scale) * dot;
  }

  // The dropout factor of probability (bh, i, j): 0 or 1 / (1 - p).
  __device__ double dropout(int64_t bh, int64_t i, int64_t j) const {
    if (p.p == 0.0f) return 1.0;
    const auto index = static_cast<uint64_t>((bh * s.tq + i) * s.tk + j);
    return dropout_keeps(p.seed, p.step, p.key, index, p.p) ? 1.0 / (1.0 - static_cast<double>(p.p))
                                                            : 0.0;
  }

  // The rows of batch entry b whose keys are all masked: those whose
  // causally kept keys all come before the first key the key mask keeps (a
  // prefix of the rows). Called by the whole block.
  __device__ int64_t fully_masked_rows(int64_t b) const {
    __shared__ int64_t warp_first[kThreads / 32];
    int64_t first = 0;  // the first key the key mask keeps; tk: none
    if (key_mask != nullptr) {
      first = s.tk;
      for (int64_t j = threadIdx.x; j < s.tk; j += kThreads) {
        if (key_mask[b * s.tk + j] != 0) {
          first = j;
          break;
        }
      }
      for (int lanes = 16; lanes > 0; lanes /= 2) {
        const int64_t other = __shfl_xor_sync(0xFFFFFFFFu, first, lanes);
        first = other < first ? other : first;
      }
      if (threadIdx.x % 32 == 0) warp_first[threadIdx.x / 32] = first;
      __syncthreads();
      first = warp_first[0];
      for (int w = 1; w < kThreads / 32; ++w) first = warp_first[w] < first ? warp_first[w] : first;
    }
    if (first >= s.tk) return s.tq;
    if (!p.causal) return 0;
    const int64_t rows = first - p.offset;
    return rows < 0 ? 0 : rows < s.tq ? rows : s.tq;
  }

  // The keys the forward visits for query rows i0 .. i0 + rows - 1: all of
  // them when a row is fully masked, else those the last row's causal mask
  // keeps (the later keys have probability exactly 0 in every row).
  __device__ int64_t key_end(int64_t i0, int64_t rows, int64_t full_rows) const {
    return i0 < full_rows ? s.tk : causal_kept(i0 + rows - 1);
  }
};

// A running maximum m and sum l of exp(x - m) over some scores (l == 0: none).
__device__ void softmax_add(double& m, double& l, double x) {
  if (l == 0.0) {
    m = x;
    l = 1.0;
  } else if (x > m) {
    l = l * exp(m - x) + 1.0;
    m = x;
  } else {
    l += exp(x - m);
  }
}

__device__ void softmax_merge(double& m, double& l, double m2, double l2) {
  if (l2 == 0.0) return;
  if (l == 0.0) {
    m = m2;
    l = l2;
    return;
  }
  const double top = m > m2 ? m : m2;
  l = l * exp(m - top) + l2 * exp(m2 - top);
  m = top;
}

__device__ int64_t tiles_of(int64_t n, int64_t tile) { return (n + tile - 1) / tile; }

// Which rows, and output columns, a block of a (heads, row tiles, column
// tiles) grid owns; the row tiles in reverse when later rows do more work.
struct BlockTile {
  int64_t bh, b, first, rows, c0;
};
__device__ BlockTile block_tile(const AttentionShape& s, int64_t row_count, int64_t col_count,
                                bool reverse) {
  const int64_t col_tiles = tiles_of(col_count, kCols), row_tiles = tiles_of(row_count, kRows);
  int64_t x = blockIdx.x;
  const int64_t ct = x % col_tiles;
  x /= col_tiles;
  const int64_t rt = reverse ? row_tiles - 1 - x % row_tiles : x % row_tiles;
  const int64_t bh = x / row_tiles;
  const int64_t first = rt * kRows;
  const int64_t rows = row_count - first < kRows ? row_count - first : kRows;
  return BlockTile{bh, bh / s.heads, first, rows, ct * kCols};
}

// lse of query rows: row_lse (double) and lse (float). Each thread keeps the
// running maximum and sum of its keys, in ascending order; the row's 8
// threads merge theirs in a fixed tree (xor 4, 2, 1).
__global__ void attention_lse_kernel(Attention at, const float* q, const float* k, float* lse,
                                     double* row_lse) {
  __shared__ TileMemory sm;
  const AttentionShape& s = at.s;
  const BlockTile t = block_tile(s, s.tq, 1, at.p.causal);
  const int r = row_of_thread(), g = group_of_thread();
  const int64_t i = t.first + r;
  const int64_t key_end = at.key_end(t.first, t.rows, at.fully_masked_rows(t.b));
  const float* q_tile = q + (t.bh * s.tq + t.first) * s.d;
  double m = 0.0, l = 0.0;
  for (int64_t j0 = 0; j0 < key_end; j0 += kCols) {
    double dots[kPer] = {};
    dot_tile(q_tile, t.rows, k + (t.bh * s.tk + j0) * s.d, key_end - j0, s.d, sm, dots);
    if (r >= t.rows) continue;
    for (int n = 0; n < kPer; ++n) {
      const int64_t j = j0 + g + kGroup * n;
      if (j < key_end) softmax_add(m, l, at.score(t.b, i, j, dots[n]));
    }
  }
  for (int lanes = kGroup / 2; lanes > 0; lanes /= 2) {
    const double m2 = __shfl_xor_sync(0xFFFFFFFFu, m, lanes);
    const double l2 = __shfl_xor_sync(0xFFFFFFFFu, l, lanes);
    softmax_merge(m, l, m2, l2);
  }
  if (r < t.rows && g == 0) {
    const double log_sum = m + log(l);
    row_lse[t.bh * s.tq + i] = log_sum;
    lse[t.bh * s.tq + i] = static_cast<float>(log_sum);
  }
}

// o of query rows, columns c0 .. c0 + 63: o_i = sum_j dropout(exp(s_ij -
// lse_i)) v_j over the keys in ascending order.
__global__ void attention_output_kernel(Attention at, const float* q, const float* k,
                                        const float* v, const double* row_lse, float* o) {
  __shared__ TileMemory sm;
  const AttentionShape& s = at.s;
  const BlockTile t = block_tile(s, s.tq, s.dv, at.p.causal);
  const int r = row_of_thread(), g = group_of_thread();
  const int64_t i = t.first + r;
  const int64_t key_end = at.key_end(t.first, t.rows, at.fully_masked_rows(t.b));
  const float* q_tile = q + (t.bh * s.tq + t.first) * s.d;
  const double lse_i = r < t.rows ? row_lse[t.bh * s.tq + i] : 0.0;
  double acc[kPer] = {};
  for (int64_t j0 = 0; j0 < key_end; j0 += kCols) {
    const int64_t keys = key_end - j0 < kCols ? key_end - j0 : kCols;
    double dots[kPer] = {};
    dot_tile(q_tile, t.rows, k + (t.bh * s.tk + j0) * s.d, keys, s.d, sm, dots);
    for (int n = 0; n < kPer; ++n) {
      const int64_t j = j0 + g + kGroup * n;
      double prob = 0.0;
      if (r < t.rows && j < key_end) {
        prob = exp(at.score(t.b, i, j, dots[n]) - lse_i) * at.dropout(t.bh, i, j);
      }
      sm.weights[r][g + kGroup * n] = prob;
    }
    load_cols(v + (t.bh * s.tk + j0) * s.dv, keys, s.dv, t.c0, sm);
    __syncthreads();
    multiply_tile(sm, t.rows, keys, acc);
    __syncthreads();
  }
  if (r >= t.rows) return;
  for (int n = 0; n < kPer; ++n) {
    const int64_t c = t.c0 + g + kGroup * n;
    if (c < s.dv) o[(t.bh * s.tq + i) * s.dv + c] = static_cast<float>(acc[n]);
  }
}

// row_delta[i] = do_i . o_i in double: one warp per row, each lane adding a
// stride of the columns in ascending order, then a fixed tree.
__global__ void attention_delta_kernel(const float* o, const float* dout, double* row_delta,
                                       int64_t rows, int64_t dv) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  double sum = 0.0;
  for (int64_t c = lane; c < dv; c += 32) {
    sum += static_cast<double>(dout[row * dv + c]) * static_cast<double>(o[row * dv + c]);
  }
  for (int lanes = 16; lanes > 0; lanes /= 2) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, lanes);
  if (lane == 0) row_delta[row] = sum;
}

// dq of query rows, columns c0 .. c0 + 63: dq_i = sum_j dS_ij k_j over the
// keys in ascending order; dS is 0 where masked, so keys past the last row's
// causal limit are skipped.
__global__ void __launch_bounds__(kThreads, 2)
    attention_dq_kernel(Attention at, const float* q, const float* k, const float* v,
                        const float* lse, const float* dout, const double* row_delta, float* dq) {
  __shared__ TileMemory sm;
  const AttentionShape& s = at.s;
  const BlockTile t = block_tile(s, s.tq, s.d, at.p.causal);
  const int r = row_of_thread(), g = group_of_thread();
  const int64_t i = t.first + r;
  const int64_t key_end = at.causal_kept(t.first + t.rows - 1);
  const float* q_tile = q + (t.bh * s.tq + t.first) * s.d;
  const float* do_tile = dout + (t.bh * s.tq + t.first) * s.dv;
  const double lse_i = r < t.rows ? static_cast<double>(lse[t.bh * s.tq + i]) : 0.0;
  const double delta_i = r < t.rows ? row_delta[t.bh * s.tq + i] : 0.0;
  const double scale = at.p.scale;
  double acc[kPer] = {};
  for (int64_t j0 = 0; j0 < key_end; j0 += kCols) {
    const int64_t keys = key_end - j0 < kCols ? key_end - j0 : kCols;
    double dots[kPer] = {}, dps[kPer] = {};
    dot_tile(q_tile, t.rows, k + (t.bh * s.tk + j0) * s.d, keys, s.d, sm, dots);
    dot_tile(do_tile, t.rows, v + (t.bh * s.tk + j0) * s.dv, keys, s.dv, sm, dps);
    for (int n = 0; n < kPer; ++n) {
      const int64_t j = j0 + g + kGroup * n;
      double ds = 0.0;
      if (r < t.rows && j < key_end && !at.masked(t.b, i, j)) {
        const double prob = exp(scale * dots[n] - lse_i);
        ds = prob * (at.dropout(t.bh, i, j) * dps[n] - delta_i) * scale;
      }
      sm.weights[r][g + kGroup * n] = ds;
    }
    load_cols(k + (t.bh * s.tk + j0) * s.d, keys, s.d, t.c0, sm);
    __syncthreads();
    multiply_tile(sm, t.rows, keys, acc);
    __syncthreads();
  }
  if (r >= t.rows) return;
  for (int n = 0; n < kPer; ++n) {
    const int64_t c = t.c0 + g + kGroup * n;
    if (c < s.d) dq[(t.bh * s.tq + i) * s.d + c] = static_cast<float>(acc[n]);
  }
}

// dk and dv of key rows, columns c0 .. c0 + 63 of each: dv_j = sum_i
// dropout(P_ij) do_i and dk_j = sum_i dS_ij q_i over the queries in
// ascending order. Query tiles whose rows all mask every key of the block
// (causally, and none fully masked) add only zeros and are skipped.
__global__ void __launch_bounds__(kThreads, 2)
    attention_dkv_kernel(Attention at, const float* q, const float* k, const float* v,
                         const float* lse, const float* dout, const double* row_delta, float* dk,
                         float* dv) {
  __shared__ TileMemory sm;
  const AttentionShape& s = at.s;
  const BlockTile t = block_tile(s, s.tk, s.d > s.dv ? s.d : s.dv, false);
  const int r = row_of_thread(), g = group_of_thread();
  const int64_t j = t.first + r;
  const int64_t full_rows = at.fully_masked_rows(t.b);
  const float* k_tile = k + (t.bh * s.tk + t.first) * s.d;
  const float* v_tile = v + (t.bh * s.tk + t.first) * s.dv;
  const double scale = at.p.scale;
  const double uniform = 1.0 / static_cast<double>(s.tk);
  double acc_k[kPer] = {}, acc_v[kPer] = {};
  for (int64_t i0 = 0; i0 < s.tq; i0 += kCols) {
    const int64_t queries = s.tq - i0 < kCols ? s.tq - i0 : kCols;
    if (at.p.causal && i0 >= full_rows && at.causal_kept(i0 + queries - 1) <= t.first) continue;
    const float* q_rows = q + (t.bh * s.tq + i0) * s.d;
    const float* do_rows = dout + (t.bh * s.tq + i0) * s.dv;
    double dots[kPer] = {}, dps[kPer] = {};
    dot_tile(k_tile, t.rows, q_rows, queries, s.d, sm, dots);
    dot_tile(v_tile, t.rows, do_rows, queries, s.dv, sm, dps);
    double ds[kPer];
    for (int n = 0; n < kPer; ++n) {
      const int64_t i = i0 + g + kGroup * n;
      double kept = 0.0;
      ds[n] = 0.0;
      if (r < t.rows && i < s.tq) {
        const int64_t row = t.bh * s.tq + i;
        const double drop = at.dropout(t.bh, i, j);
        const double prob = i < full_rows
                                ? uniform
                                : exp(at.score(t.b, i, j, dots[n]) - static_cast<double>(lse[row]));
        kept = prob * drop;
        if (!at.masked(t.b, i, j)) ds[n] = prob * (drop * dps[n] - row_delta[row]) * scale;
      }
      sm.weights[r][g + kGroup * n] = kept;
    }
    load_cols(do_rows, queries, s.dv, t.c0, sm);
    __syncthreads();
    multiply_tile(sm, t.rows, queries, acc_v);
    __syncthreads();
    for (int n = 0; n < kPer; ++n) sm.weights[r][g + kGroup * n] = ds[n];
    load_cols(q_rows, queries, s.d, t.c0, sm);
    __syncthreads();
    multiply_tile(sm, t.rows, queries, acc_k);
    __syncthreads();
  }
  if (r >= t.rows) return;
  for (int n = 0; n < kPer; ++n) {
    const int64_t c = t.c0 + g + kGroup * n;
    if (c < s.d) dk[(t.bh * s.tk + j) * s.d + c] = static_cast<float>(acc_k[n]);
    if (c < s.dv) dv[(t.bh * s.tk + j) * s.dv + c] = static_cast<float>(acc_v[n]);
  }
}

// Blocks of a (heads, row tiles, column tiles) grid.
unsigned grid_of(const AttentionShape& s, int64_t rows, int64_t cols) {
  const int64_t heads = s.batch * s.heads;
  return static_cast<unsigned>(heads * ((rows + kRows - 1) / kRows) * ((cols + kCols - 1) / kCols));
}

}  // namespace

void launch_lstm_cell(const float* gates, const float* c_prev, float* h, float* c, int64_t rows,
                      int64_t hidden, void* stream) {
  const int64_t count = rows * hidden;
  if (count == 0) return;
  lstm_cell_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(gates, c_prev, h, c,
                                                                          hidden, count);
}

void launch_lstm_cell_grad(const float* dh, const float* dc, const float* gates, const float* c,
                           const float* c_prev, float* dgates, float* dc_prev, int64_t rows,
                           int64_t hidden, void* stream) {
  const int64_t count = rows * hidden;
  if (count == 0) return;
  lstm_cell_grad_kernel<<<blocks_for(count), kThreads, 0, as_stream(stream)>>>(
      dh, dc, gates, c, c_prev, dgates, dc_prev, hidden, count);
}

void launch_attention(const AttentionShape& shape, const AttentionParams& params, const float* q,
                      const float* k, const float* v, const int32_t* key_mask, float* o, float* lse,
                      double* row_lse, void* stream) {
  if (shape.batch * shape.heads * shape.tq == 0) return;
  const Attention at{shape, params, key_mask};
  attention_lse_kernel<<<grid_of(shape, shape.tq, 1), kThreads, 0, as_stream(stream)>>>(
      at, q, k, lse, row_lse);
  if (shape.dv == 0) return;
  attention_output_kernel<<<grid_of(shape, shape.tq, shape.dv), kThreads, 0, as_stream(stream)>>>(
      at, q, k, v, row_lse, o);
}

void launch_attention_grad(const AttentionShape& shape, const AttentionParams& params,
                           const float* q, const float* k, const float* v, const float* o,
                           const float* lse, const float* dout, const int32_t* key_mask, float* dq,
                           float* dk, float* dv, double* row_delta, void* stream) {
  const int64_t heads = shape.batch * shape.heads;
  if (heads == 0) return;
  const Attention at{shape, params, key_mask};
  const int64_t rows = heads * shape.tq;
  if (rows > 0) {
    const int64_t warps = kThreads / 32;
    attention_delta_kernel<<<static_cast<unsigned>((rows + warps - 1) / warps), kThreads, 0,
                             as_stream(stream)>>>(o, dout, row_delta, rows, shape.dv);
    if (shape.d > 0) {
      attention_dq_kernel<<<grid_of(shape, shape.tq, shape.d), kThreads, 0, as_stream(stream)>>>(
          at, q, k, v, lse, dout, row_delta, dq);
    }
  }
  const int64_t widest = shape.d > shape.dv ? shape.d : shape.dv;
  if (shape.tk > 0 && widest > 0) {
    attention_dkv_kernel<<<grid_of(shape, shape.tk, widest), kThreads, 0, as_stream(stream)>>>(
        at, q, k, v, lse, dout, row_delta, dk, dv);
  }
}

}  // namespace memfit::cuda
