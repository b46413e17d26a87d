// Fused scaled-dot-product attention in tiles (FlashAttention-2, Dao 2023).
//
// Forward: each (batch, head, query tile) is one task. For every key tile the
// tile's scores S = scale * Q K^T go through oneDNN's sgemm into a per-thread
// buffer, are masked, and update the running max m and sum l of each row (the
// online softmax: o and l are rescaled by exp(m_old - m_new) when the max
// grows); the dropped-out probabilities are multiplied into v by sgemm,
// accumulating in o itself. Only o and lse = m + log(l) are saved.
// Backward: one thread owns a whole (batch, head): for each key tile it walks
// the query tiles in order, recomputes P = exp(S - lse) and the dropout mask,
// and accumulates dv, dk and dq with sgemm in a fixed order, so the bits do not
// depend on the number of threads. sgemm called inside a parallel region runs
// on the calling thread.
//
// Masking follows the composed form: a masked score is kMaskValue, not -inf,
// so a row with an unmasked key gives its masked keys probability exactly 0
// (exp(-1e9 - m) underflows), and tiles masked for every row are skipped; a row
// whose keys are all masked attends uniformly to all tk keys. Such rows are a
// prefix of the rows of a batch entry (a key is visible to every later row),
// and they are computed as rows of zero scores, whose lse is log(tk), while
// kMaskValue + log(tk) is reported. Dropout draws element ((b * heads + h) * tq
// + i) * tk + j of the counter-based stream (core/random.h), four elements per
// Philox block, so the forward and the backward draw the same mask.
//
// The element-wise work (exp, Philox) runs on GCC vector extensions: four
// lanes on baseline x86-64, eight in a clone for CPUs with AVX2 and FMA.
#include "backends/cpu/cpu_attention_tiles.h"

#include <emmintrin.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "core/random.h"
#include "memfit/attrs.h"

// The lane helpers take and return vectors by value; 32-byte ones change the
// calling convention without AVX, which -Wpsabi warns about (when templates are
// instantiated, at the end of the file). Code on vectors calls only always
// inlined helpers and builtins (__builtin_bit_cast, not std::bit_cast), even
// at -O0, so no call with either convention exists.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace memfit::cpu {
namespace {

// The score of a masked key, as in the composed form (causal_mask's value).
constexpr float kMaskValue = kAttentionMaskValue;
// Query rows and keys per tile. sgemm runs near its peak on one thread for tile
// sides of 64 to 256 (inner sizes d, dv or a tile side), larger tiles waste more
// of the diagonal tiles under the causal mask, and 128 x 256 measured fastest,
// by a few percent, at 1024 and 4096 positions. kKeyTile is a multiple of the
// widest lanes: rows are padded to whole vectors.
constexpr int64_t kQueryTile = 128;
constexpr int64_t kKeyTile = 256;
// Philox blocks drawn at once.
constexpr int64_t kPhiloxBlocks = 16;
// Dropout words of one tile row: its elements, up to three words of the block
// before its first, and the rest of the last batch of Philox blocks.
constexpr int64_t kWordCapacity = kKeyTile + 4 * kPhiloxBlocks;
constexpr size_t kAlign = 64;
constexpr float kInfinity = std::numeric_limits<float>::infinity();

size_t align_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Hands out 64-byte aligned chunks of one thread's scratch; with a null base it
// only counts bytes, so the workspace sizes and the kernels share one layout.
class Arena {
 public:
  explicit Arena(char* base) : base_(base) {}

  template <class T>
  T* take(int64_t count) {
    T* chunk = base_ != nullptr ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += align_up(sizeof(T) * static_cast<size_t>(count));
    return chunk;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

struct ForwardScratch {
  float* scores;    // (kQueryTile, kKeyTile): scores, then dropped-out probabilities
  float* row_max;   // (kQueryTile) running max m
  float* row_sum;   // (kQueryTile) running sum l
  uint32_t* words;  // (kWordCapacity) dropout draws of one tile row
};

ForwardScratch take_forward(Arena& arena) {
  ForwardScratch s{};
  s.scores = arena.take<float>(kQueryTile * kKeyTile);
  s.row_max = arena.take<float>(kQueryTile);
  s.row_sum = arena.take<float>(kQueryTile);
  s.words = arena.take<uint32_t>(kWordCapacity);
  return s;
}

struct BackwardScratch {
  float* probs;     // (kQueryTile, kKeyTile): scores, then P
  float* dropped;   // (kQueryTile, kKeyTile): P' = P with dropout
  float* grads;     // (kQueryTile, kKeyTile): dP', then dS
  float* delta;     // (tq) D_i = dout_i . o_i
  uint32_t* words;  // (kWordCapacity)
};

BackwardScratch take_backward(Arena& arena, int64_t tq) {
  BackwardScratch s{};
  s.probs = arena.take<float>(kQueryTile * kKeyTile);
  s.dropped = arena.take<float>(kQueryTile * kKeyTile);
  s.grads = arena.take<float>(kQueryTile * kKeyTile);
  s.delta = arena.take<float>(tq);
  s.words = arena.take<uint32_t>(kWordCapacity);
  return s;
}

// The chunk of thread `thread` in a workspace of per-thread chunks of `stride` bytes.
char* thread_chunk(void* workspace, size_t stride, int thread) {
  const auto base = reinterpret_cast<uintptr_t>(workspace);
  const uintptr_t aligned = (base + kAlign - 1) / kAlign * kAlign;
  return reinterpret_cast<char*>(aligned) + stride * static_cast<size_t>(thread);
}

size_t workspace_bytes(size_t per_thread, int threads) {
  return per_thread * static_cast<size_t>(std::max(threads, 1)) + kAlign;
}

// Row-major C = alpha * op(A) op(B) + beta * C.
void gemm(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  MEMFIT_CHECK(status == dnnl_success);
}

// GCC vector types of W lanes.
template <int W>
struct Lanes {
  typedef float F __attribute__((vector_size(4 * W)));
  typedef int32_t I __attribute__((vector_size(4 * W)));
  typedef uint32_t U __attribute__((vector_size(4 * W)));
  typedef uint64_t U64 __attribute__((vector_size(4 * W)));
};

template <class V, class T>
[[gnu::always_inline]] inline V load(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T, class V>
[[gnu::always_inline]] inline void store(T* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// exp(x) on W lanes for x <= 88, Cephes' expf: x = n ln2 + r with |r| <= ln2 / 2,
// a degree-7 polynomial for exp(r) and the exponent bits for 2^n; within 2 ulp.
// exp(0) is exactly 1, and x below the smallest normal's log (kMaskValue - m,
// -inf) gives 0: their lanes compute garbage, cleared by the final mask.
template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::F exp_lanes(const typename Lanes<W>::F& x) {
  using F = typename Lanes<W>::F;
  using U = typename Lanes<W>::U;
  // Adding 1.5 * 2^23 rounds |t| < 2^22 to the nearest integer n, which the low
  // bits of the sum then hold, so 2^n needs no float-to-int conversion.
  constexpr float kRound = 12582912.0f;
  const F shifted = x * 1.44269504088896341f + kRound;
  const F n = shifted - kRound;
  const U two_to_n = (__builtin_bit_cast(U, shifted) - __builtin_bit_cast(U, F{} + kRound) + 127u)
                     << 23;
  // ln2 in two parts, the first with few bits, so n * 0.693359375f is exact.
  const F r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  F poly = F{} + 1.9875691500e-4f;
  poly = poly * r + 1.3981999507e-3f;
  poly = poly * r + 8.3334519073e-3f;
  poly = poly * r + 4.1665795894e-2f;
  poly = poly * r + 1.6666665459e-1f;
  poly = poly * r + 5.0000001201e-1f;
  const F y = (poly * r * r + r + 1.0f) * __builtin_bit_cast(F, two_to_n);
  const auto normal = x >= -87.33654475f;
  return __builtin_bit_cast(F, __builtin_bit_cast(U, y) & __builtin_bit_cast(U, normal));
}

template <int W>
[[gnu::always_inline]] inline float max_of(const typename Lanes<W>::F& v) {
  float m = v[0];
  for (int l = 1; l < W; ++l) m = std::max(m, v[l]);
  return m;
}

template <int W>
[[gnu::always_inline]] inline float sum_of(const typename Lanes<W>::F& v) {
  float s = v[0];
  for (int l = 1; l < W; ++l) s += v[l];
  return s;
}

// x[0 .. n) *= f.
template <int W>
[[gnu::always_inline]] inline void scale_row(float* x, int64_t n, float f) {
  using F = typename Lanes<W>::F;
  int64_t j = 0;
  for (; j + W <= n; j += W) store(x + j, load<F>(x + j) * f);
  for (; j < n; ++j) x[j] *= f;
}

// The dropout stream of one attention.
struct Dropout {
  uint64_t seed, step, key;
  float p;
  float inv_keep;  // 1 / (1 - p)
};

// The full 64-bit products of the low 32 bits of each 64-bit lane (pmuludq).
template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::U64 mul_low_halves(
    const typename Lanes<W>::U64& a, const typename Lanes<W>::U64& b) {
  using U64 = typename Lanes<W>::U64;
  if constexpr (W == 4) {
    return __builtin_bit_cast(
        U64, _mm_mul_epu32(__builtin_bit_cast(__m128i, a), __builtin_bit_cast(__m128i, b)));
  } else {
    // Reached only inside the AVX2 clones: _mm256_mul_epu32 cannot be inlined
    // into this template, which is compiled for the baseline target.
    U64 product;
    asm("vpmuludq %2, %1, %0" : "=x"(product) : "x"(a), "x"(b));
    return product;
  }
}

// Philox4x32-10 as core/random.h's random_block computes it, kPhiloxBlocks
// consecutive blocks from first_block into words (4 kPhiloxBlocks), W / 2
// blocks per vector with one 32-bit word in each 64-bit lane: pmuludq takes the
// full product of the lanes' low halves, and the high halves, which only xor
// touches before the next multiply, never reach a low half. Several vectors at
// once hide the multiplies' latency.
template <int W>
[[gnu::always_inline]] inline void philox_blocks(const Dropout& dropout, uint64_t first_block,
                                                 uint32_t* words) {
  using V = typename Lanes<W>::U64;
  constexpr int kBlocks = W / 2;  // per vector
  constexpr int kGroups = kPhiloxBlocks / kBlocks;
  constexpr uint64_t kLow = 0xFFFFFFFFu;
  const V mul0 = V{} + kPhiloxMul0, mul1 = V{} + kPhiloxMul1;
  V lane{};
  for (int l = 0; l < kBlocks; ++l) lane[l] = static_cast<uint64_t>(l);
  V c0[kGroups], c1[kGroups], c2[kGroups], c3[kGroups];
#pragma GCC unroll 8
  for (int g = 0; g < kGroups; ++g) {
    c0[g] = V{} + (first_block + static_cast<uint64_t>(kBlocks * g)) + lane;
    c1[g] = c0[g] >> 32;
    c2[g] = V{} + static_cast<uint32_t>(dropout.step);
    c3[g] = V{} + static_cast<uint32_t>(dropout.key);
  }
  auto [k0, k1] = philox_key(dropout.seed, dropout.step, dropout.key);
  for (int round = 0; round < 10; ++round) {
#pragma GCC unroll 8
    for (int g = 0; g < kGroups; ++g) {
      const V p0 = mul_low_halves<W>(c0[g], mul0), p1 = mul_low_halves<W>(c2[g], mul1);
      c0[g] = (p1 >> 32) ^ c1[g] ^ k0;
      c1[g] = p1;
      c2[g] = (p0 >> 32) ^ c3[g] ^ k1;
      c3[g] = p0;
    }
    k0 += kPhiloxWeyl0;
    k1 += kPhiloxWeyl1;
  }
  // Words 0 and 1, and 2 and 3, of each block side by side, then block by block.
#pragma GCC unroll 8
  for (int g = 0; g < kGroups; ++g) {
    const V w01 = (c0[g] & kLow) | (c1[g] << 32), w23 = (c2[g] & kLow) | (c3[g] << 32);
    uint32_t* out = words + 4 * kBlocks * g;
    if constexpr (kBlocks == 2) {
      store(out, V(__builtin_shufflevector(w01, w23, 0, 2)));
      store(out + 4, V(__builtin_shufflevector(w01, w23, 1, 3)));
    } else {
      store(out, V(__builtin_shufflevector(w01, w23, 0, 4, 1, 5)));
      store(out + 8, V(__builtin_shufflevector(w01, w23, 2, 6, 3, 7)));
    }
  }
}

// The dropout words of elements index .. index + n - 1; returns where element
// index's word is (word index % 4 of block index / 4).
template <int W>
[[gnu::always_inline]] inline const uint32_t* draw_words(const Dropout& dropout, uint64_t index,
                                                         int64_t n, uint32_t* words) {
  const uint64_t first_block = index / 4;
  const uint64_t blocks = (index + static_cast<uint64_t>(n) + 3) / 4 - first_block;
  for (uint64_t b = 0; b < blocks; b += kPhiloxBlocks) {
    philox_blocks<W>(dropout, first_block + b, words + 4 * b);
  }
  return words + index % 4;
}

// Which lanes dropout keeps: dropout_keeps_word's test, uniform_of(word) >= p.
template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::I keeps(const uint32_t* words, float p) {
  using F = typename Lanes<W>::F;
  using I = typename Lanes<W>::I;
  using U = typename Lanes<W>::U;
  const I top = __builtin_bit_cast(I, load<U>(words) >> 8);
  return __builtin_convertvector(top, F) * (1.0f / 16777216.0f) >= p;
}

// The lanes of x where mask is set, 0 elsewhere.
template <int W>
[[gnu::always_inline]] inline typename Lanes<W>::F masked_by(const typename Lanes<W>::F& x,
                                                             const typename Lanes<W>::I& mask) {
  using U = typename Lanes<W>::U;
  return __builtin_bit_cast(typename Lanes<W>::F,
                            __builtin_bit_cast(U, x) & __builtin_bit_cast(U, mask));
}

// One score tile after masking, for the forward's row statistics.
struct ForwardTile {
  float* scores;    // (rows, kKeyTile): scores in, dropped-out probabilities out
  float* row_max;   // (rows)
  float* row_sum;   // (rows)
  float* o;         // (rows, dv): the unnormalized output of the earlier key tiles
  uint32_t* words;  // (kWordCapacity)
  int64_t rows, n, dv;
  bool first;              // the first key tile: no statistics yet, o is not read
  const Dropout* dropout;  // null without dropout
  uint64_t index;          // dropout index of the tile's (0, 0)
  uint64_t row_stride;     // dropout index step between rows: tk
};

// The online softmax of one tile: m and l take in the tile's scores, which
// become exp(s - m_new) with dropped elements zeroed; o is rescaled to m_new.
template <int W>
[[gnu::always_inline]] inline void forward_rows(const ForwardTile& t) {
  using F = typename Lanes<W>::F;
  const int64_t width = (t.n + W - 1) / W * W;
  for (int64_t r = 0; r < t.rows; ++r) {
    float* s = t.scores + r * kKeyTile;  // (width)
    // Padding lanes: no effect on the max, exp gives 0.
    std::fill(s + t.n, s + width, -kInfinity);
    F lane_max = F{} - kInfinity;
    for (int64_t j = 0; j < width; j += W) {
      const F x = load<F>(s + j);
      lane_max = x > lane_max ? x : lane_max;
    }
    const float m_old = t.first ? -kInfinity : t.row_max[r];
    const float m_new = std::max(m_old, max_of<W>(lane_max));
    const uint32_t* words =
        t.dropout != nullptr
            ? draw_words<W>(*t.dropout, t.index + static_cast<uint64_t>(r) * t.row_stride, t.n,
                            t.words)
            : nullptr;
    F lane_sum{};
    for (int64_t j = 0; j < width; j += W) {
      const F e = exp_lanes<W>(load<F>(s + j) - m_new);
      lane_sum += e;
      store(s + j, words != nullptr ? masked_by<W>(e, keeps<W>(words + j, t.dropout->p)) : e);
    }
    const float sum = sum_of<W>(lane_sum);
    if (t.first) {
      t.row_sum[r] = sum;
    } else {
      const float alpha = std::exp(m_old - m_new);
      t.row_sum[r] = t.row_sum[r] * alpha + sum;
      if (alpha != 1.0f) scale_row<W>(t.o + r * t.dv, t.dv, alpha);
    }
    t.row_max[r] = m_new;
  }
}

// One tile of the backward after masking the scores.
struct BackwardTile {
  float* probs;        // (rows, kKeyTile): scores in, P out without dropout
  float* dropped;      // (rows, kKeyTile): P' out with dropout
  float* grads;        // (rows, kKeyTile): dP' in, dS out
  const float* lse;    // (rows)
  const float* delta;  // (rows)
  uint32_t* words;     // (kWordCapacity)
  int64_t rows, n;
  int64_t masked_rows;  // rows 0 .. masked_rows - 1 have every key masked
  float log_keys;       // log(tk): their lse over zero scores
  const Dropout* dropout;
  uint64_t index, row_stride;
};

// P = exp(s - lse), P' = P with dropout, dS = P * (dP - D) with dP the
// dropout-scaled dP'; dS is 0 for fully masked rows (their scores are constants)
// and, through P = 0, for masked keys.
template <int W>
[[gnu::always_inline]] inline void backward_rows(const BackwardTile& t) {
  using F = typename Lanes<W>::F;
  const int64_t width = (t.n + W - 1) / W * W;
  for (int64_t r = 0; r < t.rows; ++r) {
    float* s = t.probs + r * kKeyTile;
    float* dropped = t.dropped + r * kKeyTile;
    float* g = t.grads + r * kKeyTile;
    // Padding lanes: P = 0 and dS = 0.
    std::fill(s + t.n, s + width, -kInfinity);
    std::fill(g + t.n, g + width, 0.0f);
    const bool masked = r < t.masked_rows;
    const float row_lse = masked ? t.log_keys : t.lse[r];
    const F delta = F{} + t.delta[r];
    const uint32_t* words =
        t.dropout != nullptr
            ? draw_words<W>(*t.dropout, t.index + static_cast<uint64_t>(r) * t.row_stride, t.n,
                            t.words)
            : nullptr;
    for (int64_t j = 0; j < width; j += W) {
      const F prob = exp_lanes<W>(load<F>(s + j) - row_lse);
      F grad = load<F>(g + j);
      if (words != nullptr) {
        const auto keep = keeps<W>(words + j, t.dropout->p);
        store(dropped + j, masked_by<W>(prob * t.dropout->inv_keep, keep));
        grad = masked_by<W>(grad * t.dropout->inv_keep, keep);
      } else {
        store(s + j, prob);
      }
      store(g + j, masked ? F{} : prob * (grad - delta));
    }
  }
}

void forward_rows_base(const ForwardTile& t) { forward_rows<4>(t); }
void backward_rows_base(const BackwardTile& t) { backward_rows<4>(t); }
[[gnu::target("avx2,fma")]] void forward_rows_avx2(const ForwardTile& t) { forward_rows<8>(t); }
[[gnu::target("avx2,fma")]] void backward_rows_avx2(const BackwardTile& t) { backward_rows<8>(t); }

struct RowKernels {
  void (*forward)(const ForwardTile&);
  void (*backward)(const BackwardTile&);
};

RowKernels row_kernels() {
  static const bool kAvx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return kAvx2 ? RowKernels{forward_rows_avx2, backward_rows_avx2}
               : RowKernels{forward_rows_base, backward_rows_base};
}

// What every tile of one attention shares.
struct Problem {
  const AttentionShape& shape;
  const AttentionParams& params;
  const int32_t* key_mask;  // (batch, tk) or null
  Dropout dropout;

  Problem(const AttentionShape& s, const AttentionParams& p, const int32_t* mask)
      : shape(s),
        params(p),
        key_mask(mask),
        dropout{p.seed, p.micro_step, p.key, p.p, 1.0f / (1.0f - p.p)} {}

  const Dropout* dropout_or_null() const { return params.p > 0.0f ? &dropout : nullptr; }

  // Keys 0 .. kept - 1 pass the causal mask for query row i.
  int64_t causal_kept(int64_t i) const {
    return params.causal ? std::clamp<int64_t>(i + params.offset + 1, 0, shape.tk) : shape.tk;
  }

  // The rows of batch entry b with every key masked: those whose causally kept
  // keys all come before the first key the key mask keeps.
  int64_t fully_masked_rows(int64_t b) const {
    int64_t first = 0;
    if (key_mask != nullptr) {
      const int32_t* row = key_mask + b * shape.tk;
      first = std::find_if(row, row + shape.tk, [](int32_t m) { return m != 0; }) - row;
    }
    if (first == shape.tk) return shape.tq;
    return params.causal ? std::clamp<int64_t>(first - params.offset, 0, shape.tq) : 0;
  }

  // Sets masked scores of the tile (rows from query i0, keys from j0) to
  // kMaskValue and the scores of fully masked rows to 0.
  void mask_tile(float* scores, int64_t b, int64_t i0, int64_t rows, int64_t j0, int64_t n,
                 int64_t full_rows) const {
    const int32_t* mask = key_mask != nullptr ? key_mask + b * shape.tk + j0 : nullptr;  // (n)
    const bool key_zeros = mask != nullptr && std::find(mask, mask + n, 0) != mask + n;
    for (int64_t r = 0; r < rows; ++r) {
      float* s = scores + r * kKeyTile;  // (n)
      if (i0 + r < full_rows) {
        std::fill(s, s + n, 0.0f);
        continue;
      }
      const int64_t kept = std::clamp<int64_t>(causal_kept(i0 + r) - j0, 0, n);
      std::fill(s + kept, s + n, kMaskValue);
      if (key_zeros) {
        for (int64_t j = 0; j < kept; ++j) {
          if (mask[j] == 0) s[j] = kMaskValue;
        }
      }
    }
  }

  float masked_row_lse() const {
    return static_cast<float>(static_cast<double>(kMaskValue) +
                              std::log(static_cast<double>(shape.tk)));
  }
};

size_t forward_per_thread() {
  Arena arena(nullptr);
  take_forward(arena);
  return arena.used();
}

size_t backward_per_thread(int64_t tq) {
  Arena arena(nullptr);
  take_backward(arena, tq);
  return arena.used();
}

// Rows i0 .. i0 + rows - 1 of head bh (= b * heads + h).
void forward_query_tile(const Problem& pb, const RowKernels& kernels, int64_t bh, int64_t i0,
                        const float* q, const float* k, const float* v, float* o, float* lse,
                        const ForwardScratch& ws) {
  const AttentionShape& sh = pb.shape;
  const int64_t b = bh / sh.heads;
  const int64_t rows = std::min(kQueryTile, sh.tq - i0);
  const float* q_tile = q + (bh * sh.tq + i0) * sh.d;  // (rows, d)
  float* o_tile = o + (bh * sh.tq + i0) * sh.dv;       // (rows, dv)
  const int64_t full_rows = pb.fully_masked_rows(b);
  // Fully masked rows attend to every key; otherwise keys past the last row's
  // causal limit are masked for the whole tile.
  const int64_t key_end = i0 < full_rows ? sh.tk : pb.causal_kept(i0 + rows - 1);
  ForwardTile tile{ws.scores,  ws.row_max,
                   ws.row_sum, o_tile,
                   ws.words,   rows,
                   0,          sh.dv,
                   true,       pb.dropout_or_null(),
                   0,          static_cast<uint64_t>(sh.tk)};
  for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
    const int64_t n = std::min(kKeyTile, key_end - j0);
    const float* k_tile = k + (bh * sh.tk + j0) * sh.d;   // (n, d)
    const float* v_tile = v + (bh * sh.tk + j0) * sh.dv;  // (n, dv)
    gemm('N', 'T', rows, n, sh.d, pb.params.scale, q_tile, sh.d, k_tile, sh.d, 0.0f, ws.scores,
         kKeyTile);
    pb.mask_tile(ws.scores, b, i0, rows, j0, n, full_rows);
    tile.n = n;
    tile.first = j0 == 0;
    tile.index = static_cast<uint64_t>((bh * sh.tq + i0) * sh.tk + j0);
    kernels.forward(tile);
    gemm('N', 'N', rows, sh.dv, n, 1.0f, ws.scores, kKeyTile, v_tile, sh.dv,
         tile.first ? 0.0f : 1.0f, o_tile, sh.dv);
  }
  // o = sum_j P'_ij v_j with P' = exp(s - m) / l kept, scaled by 1 / (1 - p).
  const float keep_fraction = 1.0f - pb.params.p;
  for (int64_t r = 0; r < rows; ++r) {
    const float l = ws.row_sum[r];
    float* out = o_tile + r * sh.dv;
    const float f = 1.0f / (l * keep_fraction);
    for (int64_t c = 0; c < sh.dv; ++c) out[c] *= f;
    lse[bh * sh.tq + i0 + r] =
        i0 + r < full_rows ? pb.masked_row_lse() : ws.row_max[r] + std::log(l);
  }
}

void backward_head(const Problem& pb, const RowKernels& kernels, int64_t bh, const float* q,
                   const float* k, const float* v, const float* o, const float* lse,
                   const float* dout, float* dq, float* dk, float* dv, const BackwardScratch& ws) {
  const AttentionShape& sh = pb.shape;
  const int64_t b = bh / sh.heads;
  // The head's slices: q, dq (tq, d); k, dk (tk, d); v, dv (tk, dv); o, dout (tq, dv); lse (tq).
  q += bh * sh.tq * sh.d;
  dq += bh * sh.tq * sh.d;
  k += bh * sh.tk * sh.d;
  dk += bh * sh.tk * sh.d;
  v += bh * sh.tk * sh.dv;
  dv += bh * sh.tk * sh.dv;
  o += bh * sh.tq * sh.dv;
  dout += bh * sh.tq * sh.dv;
  lse += bh * sh.tq;
  std::fill(dq, dq + sh.tq * sh.d, 0.0f);
  std::fill(dk, dk + sh.tk * sh.d, 0.0f);
  std::fill(dv, dv + sh.tk * sh.dv, 0.0f);
  for (int64_t i = 0; i < sh.tq; ++i) {
    float sum = 0.0f;
    for (int64_t c = 0; c < sh.dv; ++c) sum += dout[i * sh.dv + c] * o[i * sh.dv + c];
    ws.delta[i] = sum;
  }
  const int64_t full_rows = pb.fully_masked_rows(b);
  const float scale = pb.params.scale;
  BackwardTile tile{ws.probs,
                    ws.dropped,
                    ws.grads,
                    nullptr,
                    nullptr,
                    ws.words,
                    0,
                    0,
                    0,
                    std::log(static_cast<float>(sh.tk)),
                    pb.dropout_or_null(),
                    0,
                    static_cast<uint64_t>(sh.tk)};
  // P without dropout is the P' that dv takes.
  const float* dropped = tile.dropout != nullptr ? ws.dropped : ws.probs;
  for (int64_t j0 = 0; j0 < sh.tk; j0 += kKeyTile) {
    for (int64_t i0 = 0; i0 < sh.tq; i0 += kQueryTile) {
      const int64_t rows = std::min(kQueryTile, sh.tq - i0);
      // The keys the forward visited for this query tile.
      const int64_t key_end = i0 < full_rows ? sh.tk : pb.causal_kept(i0 + rows - 1);
      if (key_end <= j0) continue;
      const int64_t n = std::min(kKeyTile, key_end - j0);
      gemm('N', 'T', rows, n, sh.d, scale, q + i0 * sh.d, sh.d, k + j0 * sh.d, sh.d, 0.0f, ws.probs,
           kKeyTile);
      gemm('N', 'T', rows, n, sh.dv, 1.0f, dout + i0 * sh.dv, sh.dv, v + j0 * sh.dv, sh.dv, 0.0f,
           ws.grads, kKeyTile);
      pb.mask_tile(ws.probs, b, i0, rows, j0, n, full_rows);
      tile.lse = lse + i0;
      tile.delta = ws.delta + i0;
      tile.rows = rows;
      tile.n = n;
      tile.masked_rows = std::clamp<int64_t>(full_rows - i0, 0, rows);
      tile.index = static_cast<uint64_t>((bh * sh.tq + i0) * sh.tk + j0);
      kernels.backward(tile);
      // dv_j += P'^T dout_i, dq_i += scale dS k_j, dk_j += scale dS^T q_i.
      gemm('T', 'N', n, sh.dv, rows, 1.0f, dropped, kKeyTile, dout + i0 * sh.dv, sh.dv, 1.0f,
           dv + j0 * sh.dv, sh.dv);
      gemm('N', 'N', rows, sh.d, n, scale, ws.grads, kKeyTile, k + j0 * sh.d, sh.d, 1.0f,
           dq + i0 * sh.d, sh.d);
      gemm('T', 'N', n, sh.d, rows, scale, ws.grads, kKeyTile, q + i0 * sh.d, sh.d, 1.0f,
           dk + j0 * sh.d, sh.d);
    }
  }
}

}  // namespace

size_t attention_forward_workspace(const AttentionShape&, int threads) {
  return workspace_bytes(forward_per_thread(), threads);
}

size_t attention_backward_workspace(const AttentionShape& shape, int threads) {
  return workspace_bytes(backward_per_thread(shape.tq), threads);
}

void attention_forward(const AttentionShape& shape, const AttentionParams& params, const float* q,
                       const float* k, const float* v, const int32_t* key_mask, float* o,
                       float* lse, void* workspace, int threads) {
  const Problem pb(shape, params, key_mask);
  const RowKernels kernels = row_kernels();
  const size_t stride = forward_per_thread();
  const int64_t tiles = (shape.tq + kQueryTile - 1) / kQueryTile;
  const int64_t tasks = shape.batch * shape.heads * tiles;
  // Later query tiles see more keys under the causal mask: they go first.
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t task = 0; task < tasks; ++task) {
    Arena arena(thread_chunk(workspace, stride, omp_get_thread_num()));
    const ForwardScratch ws = take_forward(arena);
    const int64_t tile = tiles - 1 - task % tiles;
    forward_query_tile(pb, kernels, task / tiles, tile * kQueryTile, q, k, v, o, lse, ws);
  }
}

void attention_backward(const AttentionShape& shape, const AttentionParams& params, const float* q,
                        const float* k, const float* v, const float* o, const float* lse,
                        const float* dout, const int32_t* key_mask, float* dq, float* dk, float* dv,
                        void* workspace, int threads) {
  const Problem pb(shape, params, key_mask);
  const RowKernels kernels = row_kernels();
  const size_t stride = backward_per_thread(shape.tq);
  const int64_t heads = shape.batch * shape.heads;
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t bh = 0; bh < heads; ++bh) {
    Arena arena(thread_chunk(workspace, stride, omp_get_thread_num()));
    const BackwardScratch ws = take_backward(arena, shape.tq);
    backward_head(pb, kernels, bh, q, k, v, o, lse, dout, dq, dk, dv, ws);
  }
}

}  // namespace memfit::cpu
