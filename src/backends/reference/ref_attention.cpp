// Reference kernels of attention and attention_grad: the formulas of
// AttentionAttrs (include/memfit/attrs.h) over whole rows of scores, in
// double. attention_grad recomputes a row's probabilities from the saved
// log-sum-exp, as the fused kernels do; a row whose keys are all masked has
// probabilities 1 / Tk (its log-sum-exp, -1e9 + log Tk, rounds to -1e9 in
// float and cannot give them back).
#include <cmath>
#include <vector>

#include "backends/reference/ref_ops.h"
#include "backends/reference/ref_util.h"
#include "core/random.h"

namespace memfit {
namespace {

// One attention's sizes and masks, and the rows of scores it recomputes.
class AttentionRows {
 public:
  explicit AttentionRows(const RefCall& call, const int32_t* key_mask)
      : attrs_(call.attrs<AttentionAttrs>()),
        step_(call.args.step),
        key_mask_(key_mask),
        batch_(call.in[0].shape[0]),
        heads_(call.in[0].shape[1]),
        tq_(call.in[0].shape[2]),
        tk_(call.in[1].shape[2]),
        d_(call.in[0].shape[3]),
        dv_(call.in[2].shape[3]) {}

  int64_t batch() const { return batch_; }
  int64_t heads() const { return heads_; }
  int64_t tq() const { return tq_; }
  int64_t tk() const { return tk_; }
  int64_t d() const { return d_; }
  int64_t dv() const { return dv_; }

  bool masked(int64_t b, int64_t i, int64_t j) const {
    return (attrs_.causal && j > i + attrs_.offset) ||
           (key_mask_ != nullptr && key_mask_[b * tk_ + j] == 0);
  }
  bool row_masked(int64_t b, int64_t i) const {
    for (int64_t j = 0; j < tk_; ++j) {
      if (!masked(b, i, j)) return false;
    }
    return true;
  }

  // Row i of the scores of (b, h): scale q_i . k_j, or the mask value.
  std::vector<double> scores(const float* q, const float* k, int64_t b, int64_t h,
                             int64_t i) const {
    const float* qi = q + ((b * heads_ + h) * tq_ + i) * d_;
    std::vector<double> s(static_cast<size_t>(tk_));
    for (int64_t j = 0; j < tk_; ++j) {
      const float* kj = k + ((b * heads_ + h) * tk_ + j) * d_;
      double dot = 0;
      for (int64_t c = 0; c < d_; ++c) dot += static_cast<double>(qi[c]) * kj[c];
      s[static_cast<size_t>(j)] =
          masked(b, i, j) ? kAttentionMaskValue : static_cast<double>(attrs_.scale) * dot;
    }
    return s;
  }

  // The dropout factor of probability (b, h, i, j): 0 or 1 / (1 - p).
  double dropout(int64_t b, int64_t h, int64_t i, int64_t j) const {
    if (attrs_.p == 0.0f) return 1.0;
    const auto index = static_cast<uint64_t>(((b * heads_ + h) * tq_ + i) * tk_ + j);
    const bool keep = dropout_keeps(step_.seed, static_cast<uint64_t>(step_.micro_step),
                                    attrs_.key, index, attrs_.p);
    return keep ? 1.0 / (1.0 - static_cast<double>(attrs_.p)) : 0.0;
  }

  double scale() const { return attrs_.scale; }

 private:
  const AttentionAttrs& attrs_;
  const StepContext& step_;
  const int32_t* key_mask_;
  int64_t batch_, heads_, tq_, tk_, d_, dv_;
};

}  // namespace

// (q, k, v, [key_mask]) -> (o, lse): lse_i = log sum_j exp(s_ij), computed
// from the row's maximum; o_i = sum_j dropout(exp(s_ij - lse_i)) v_j.
void ref_attention(const RefCall& call) {
  const AttentionRows rows(call, call.in.size() == 4 ? call.in_i32(3) : nullptr);
  const float* q = call.in_f32(0);  // (B, H, Tq, D)
  const float* k = call.in_f32(1);  // (B, H, Tk, D)
  const float* v = call.in_f32(2);  // (B, H, Tk, Dv)
  float* o = call.out_f32(0);       // (B, H, Tq, Dv)
  float* lse = call.out_f32(1);     // (B, H, Tq)
  const int64_t tk = rows.tk(), dv = rows.dv();
  for (int64_t b = 0; b < rows.batch(); ++b) {
    for (int64_t h = 0; h < rows.heads(); ++h) {
      for (int64_t i = 0; i < rows.tq(); ++i) {
        const std::vector<double> s = rows.scores(q, k, b, h, i);
        double max = s[0];
        for (double x : s) max = std::max(max, x);
        double sum = 0;
        for (double x : s) sum += std::exp(x - max);
        const double log_sum = max + std::log(sum);
        std::vector<double> out(static_cast<size_t>(dv), 0.0);
        for (int64_t j = 0; j < tk; ++j) {
          const double p = std::exp(s[static_cast<size_t>(j)] - log_sum) * rows.dropout(b, h, i, j);
          const float* vj = v + ((b * rows.heads() + h) * tk + j) * dv;
          for (int64_t c = 0; c < dv; ++c) out[static_cast<size_t>(c)] += p * vj[c];
        }
        const int64_t row = (b * rows.heads() + h) * rows.tq() + i;
        for (int64_t c = 0; c < dv; ++c) o[row * dv + c] = static_cast<float>(out[static_cast<size_t>(c)]);
        lse[row] = static_cast<float>(log_sum);
      }
    }
  }
}

// (q, k, v, o, lse, do, [key_mask]) -> (dq, dk, dv), with P recomputed as
// exp(s - lse) (1 / Tk in a row whose keys are all masked), D_i = do_i . o_i,
// dS_ij = P_ij (dropout(do_i . v_j) - D_i), 0 where masked.
void ref_attention_grad(const RefCall& call) {
  const AttentionRows rows(call, call.in.size() == 7 ? call.in_i32(6) : nullptr);
  const float* q = call.in_f32(0);    // (B, H, Tq, D)
  const float* k = call.in_f32(1);    // (B, H, Tk, D)
  const float* v = call.in_f32(2);    // (B, H, Tk, Dv)
  const float* o = call.in_f32(3);    // (B, H, Tq, Dv)
  const float* lse = call.in_f32(4);  // (B, H, Tq)
  const float* dout = call.in_f32(5);  // (B, H, Tq, Dv)
  const int64_t tq = rows.tq(), tk = rows.tk(), d = rows.d(), dv = rows.dv();
  for (int64_t b = 0; b < rows.batch(); ++b) {
    for (int64_t h = 0; h < rows.heads(); ++h) {
      const int64_t head = b * rows.heads() + h;
      std::vector<double> dq(static_cast<size_t>(tq * d), 0.0), dk(static_cast<size_t>(tk * d), 0.0),
          dvs(static_cast<size_t>(tk * dv), 0.0);
      for (int64_t i = 0; i < tq; ++i) {
        const std::vector<double> s = rows.scores(q, k, b, h, i);
        const bool all_masked = rows.row_masked(b, i);
        const float* doi = dout + (head * tq + i) * dv;
        const float* oi = o + (head * tq + i) * dv;
        const float* qi = q + (head * tq + i) * d;
        double di = 0;
        for (int64_t c = 0; c < dv; ++c) di += static_cast<double>(doi[c]) * oi[c];
        for (int64_t j = 0; j < tk; ++j) {
          const double p = all_masked ? 1.0 / static_cast<double>(tk)
                                      : std::exp(s[static_cast<size_t>(j)] - lse[head * tq + i]);
          const double drop = rows.dropout(b, h, i, j);
          const float* vj = v + (head * tk + j) * dv;
          double dp = 0;
          for (int64_t c = 0; c < dv; ++c) {
            dvs[static_cast<size_t>(j * dv + c)] += p * drop * doi[c];
            dp += static_cast<double>(doi[c]) * vj[c];
          }
          if (rows.masked(b, i, j)) continue;
          const double ds = p * (drop * dp - di) * rows.scale();
          const float* kj = k + (head * tk + j) * d;
          for (int64_t c = 0; c < d; ++c) {
            dq[static_cast<size_t>(i * d + c)] += ds * kj[c];
            dk[static_cast<size_t>(j * d + c)] += ds * qi[c];
          }
        }
      }
      float* dq_out = call.out_f32(0) + head * tq * d;
      float* dk_out = call.out_f32(1) + head * tk * d;
      float* dv_out = call.out_f32(2) + head * tk * dv;
      for (size_t x = 0; x < dq.size(); ++x) dq_out[x] = static_cast<float>(dq[x]);
      for (size_t x = 0; x < dk.size(); ++x) dk_out[x] = static_cast<float>(dk[x]);
      for (size_t x = 0; x < dvs.size(); ++x) dv_out[x] = static_cast<float>(dvs[x]);
    }
  }
}

}  // namespace memfit
