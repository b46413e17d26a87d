// The launchers of memfit's CUDA kernels of the sequence ops (cuda_sequence.cu): the LSTM
// cell and fused scaled-dot-product attention, with their gradients. Each
// function launches on `stream` (a cudaStream_t) and returns at once. They
// follow the reference kernels (src/backends/reference/ref_lstm.cpp,
// ref_attention.cpp): every formula in double, each output rounded to float
// once, every sum in a fixed order and without atomics, so that a launch
// gives the same bits every time it runs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memfit::cuda {

// lstm_cell: gates (rows, 4 hidden) in the order i, f, g, o, and c_prev
// (rows, hidden; null: zeros) -> h, c (rows, hidden):
//   c = sigmoid(a_f) c_prev + sigmoid(a_i) tanh(a_g), h = sigmoid(a_o) tanh(c).
// One thread per (row, unit); a unit reads its elements of every input
// before it writes its own of the outputs, so c may be c_prev.
void launch_lstm_cell(const float* gates, const float* c_prev, float* h, float* c, int64_t rows,
                      int64_t hidden, void* stream);

// lstm_cell_grad: (dh, dc, gates, c, c_prev (null: zeros)) -> dgates
// (rows, 4 hidden) and dc_prev (when c_prev), the activations recomputed from
// the gates. One thread per (row, unit), reading before writing as above:
// dgates may be gates, and dc_prev may be dc, dh or c.
void launch_lstm_cell_grad(const float* dh, const float* dc, const float* gates, const float* c,
                           const float* c_prev, float* dgates, float* dc_prev, int64_t rows,
                           int64_t hidden, void* stream);

// Sizes of one attention: q (batch, heads, tq, d), k (batch, heads, tk, d),
// v (batch, heads, tk, dv), o (batch, heads, tq, dv), lse (batch, heads, tq),
// the key mask i32 (batch, tk). Row-major and contiguous.
struct AttentionShape {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, d = 0, dv = 0;
};

// AttentionAttrs (include/memfit/attrs.h) and the step's dropout stream:
// scores scale q_i . k_j, or kAttentionMaskValue where key j is masked
// (j > i + offset when causal, or key_mask[b, j] == 0); probability
// (b, h, i, j) is kept when dropout_keeps(seed, step, key,
// ((b heads + h) tq + i) tk + j, p), and then divided by 1 - p.
struct AttentionParams {
  float scale = 1.0f;
  bool causal = false;
  int64_t offset = 0;
  float p = 0.0f;
  uint64_t key = 0;
  uint64_t seed = 0;
  uint64_t step = 0;
};

// The attention kernels' tiles: blocks own kAttentionRows rows (query rows,
// or key rows for dk and dv) and kAttentionCols output columns, and stream
// the other side in tiles of kAttentionCols rows.
inline constexpr int64_t kAttentionRows = 32;
inline constexpr int64_t kAttentionCols = 64;

// Whether the kernels' grids hold this shape (each grid, heads times row
// tiles times column tiles blocks, under 2^31) and it has keys (tk >= 1).
inline bool attention_fits(const AttentionShape& s) {
  const auto tiles = [](int64_t n, int64_t tile) { return (n + tile - 1) / tile; };
  const int64_t rows = tiles(s.tq > s.tk ? s.tq : s.tk, kAttentionRows);
  const int64_t cols = tiles(s.d > s.dv ? s.d : s.dv, kAttentionCols);
  const int64_t limit = int64_t{1} << 31;
  const int64_t heads = s.batch * s.heads;
  return s.tk >= 1 && heads < limit && rows < limit && cols < limit &&
         (heads == 0 || rows * cols < limit / heads);
}

// The workspace of each: one double per query row (batch heads tq).
inline size_t attention_workspace_bytes(const AttentionShape& shape) {
  return static_cast<size_t>(shape.batch * shape.heads * shape.tq) * sizeof(double);
}

// attention: (q, k, v, key_mask (null: none)) -> (o, lse), as ref_attention:
//   lse_i = log sum_j exp(s_ij), o_i = sum_j dropout(exp(s_ij - lse_i)) v_j.
// Two kernels over blocks of 32 query rows: the first computes lse_i in
// double into `row_lse` (workspace) and lse, each thread keeping a running
// maximum and sum over its keys in ascending order and the row's 8 threads
// merging theirs in a fixed tree; the second recomputes the scores and sums
// o_i over the keys in ascending order, 64 output columns per block. A row
// whose keys are all masked attends to all tk keys equally.
void launch_attention(const AttentionShape& shape, const AttentionParams& params, const float* q,
                      const float* k, const float* v, const int32_t* key_mask, float* o, float* lse,
                      double* row_lse, void* stream);

// attention_grad: (q, k, v, o, lse, do, key_mask (null: none)) -> (dq, dk,
// dv), as ref_attention_grad: P_ij = exp(s_ij - lse_i) (1 / tk in a row
// whose keys are all masked), D_i = do_i . o_i (into `row_delta`,
// workspace), dS_ij = scale P_ij (dropout(do_i . v_j) - D_i), 0 where
// masked; dq_i = sum_j dS_ij k_j over the keys in ascending order (blocks of
// 32 query rows), dv_j = sum_i dropout(P_ij) do_i and dk_j = sum_i dS_ij q_i
// over the queries in ascending order (blocks of 32 key rows). dq, dk and dv
// are written completely and alias no input.
void launch_attention_grad(const AttentionShape& shape, const AttentionParams& params,
                           const float* q, const float* k, const float* v, const float* o,
                           const float* lse, const float* dout, const int32_t* key_mask, float* dq,
                           float* dk, float* dv, double* row_delta, void* stream);

}  // namespace memfit::cuda
