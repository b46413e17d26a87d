// Fused scaled-dot-product attention computed in tiles, in the manner of
// FlashAttention-2: exact attention with an online softmax, the forward saving
// only the output and one log-sum-exp per query row, the backward recomputing
// the probabilities tile by tile. Both give the same bits on any number of
// threads. See cpu_attention_tiles.cpp for the masking and dropout semantics.
#pragma once

#include <cstddef>
#include <cstdint>

namespace memfit::cpu {

// Sizes of one attention: q (batch, heads, tq, d), k (batch, heads, tk, d),
// v (batch, heads, tk, dv), key_mask (batch, tk) i32 or null, o (batch, heads, tq, dv),
// lse (batch, heads, tq). All row-major, contiguous, float unless said.
struct AttentionShape {
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, d = 0, dv = 0;
};

struct AttentionParams {
  float scale = 1.0f;   // scores are scale * (q_i . k_j)
  bool causal = false;  // key j is masked for query i when j > i + offset
  int64_t offset = 0;
  float p = 0.0f;    // dropout probability on the probabilities, in [0, 1)
  uint64_t key = 0;  // dropout stream: dropout_keeps(seed, micro_step, key, index, p)
  uint64_t seed = 0;
  uint64_t micro_step = 0;
};

// Workspace bytes for `threads` OpenMP threads; the kernels below run on
// `threads` threads, each with its own part of the workspace.
size_t attention_forward_workspace(const AttentionShape& shape, int threads);
size_t attention_backward_workspace(const AttentionShape& shape, int threads);

void attention_forward(const AttentionShape& shape, const AttentionParams& params, const float* q,
                       const float* k, const float* v, const int32_t* key_mask, float* o,
                       float* lse, void* workspace, int threads);

// dq, dk and dv are written completely; they never alias the inputs.
void attention_backward(const AttentionShape& shape, const AttentionParams& params, const float* q,
                        const float* k, const float* v, const float* o, const float* lse,
                        const float* dout, const int32_t* key_mask, float* dq, float* dk, float* dv,
                        void* workspace, int threads);

}  // namespace memfit::cpu
