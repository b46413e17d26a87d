// Typed attributes of nodes: one plain struct per family of ops. Each struct
// lists its fields once in `visit_fields`, which the text printer and parser
// use, so an attribute added here is printed and parsed without more code.
// The op list names each op's struct; the Attrs variant (memfit/ir.h) holds
// the structs it names.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace memfit {

using Shape = std::vector<int64_t>;
using Pair = std::array<int64_t, 2>;
using Triple = std::array<int64_t, 3>;

// True for Pair, Triple and other fixed-size integer fields, which the text
// form writes as a list of exactly that many numbers.
template <class T>
inline constexpr bool kIsIntArray = false;
template <size_t N>
inline constexpr bool kIsIntArray<std::array<int64_t, N>> = true;

struct NoAttrs {
  template <class F>
  void visit_fields(F&&) {}
};

// matmul: A (..., M, K) x B (..., K, N) -> (..., M, N); a transposed operand
// swaps its last two dimensions. B may also be 2-D and is then shared by every batch.
struct MatmulAttrs {
  bool trans_a = false;
  bool trans_b = false;
  template <class F>
  void visit_fields(F&& f) {
    f("trans_a", trans_a);
    f("trans_b", trans_b);
  }
};

// conv2d: x (N, C, H, W), w (O, C/groups, KH, KW), optional b (O); symmetric padding.
struct Conv2dAttrs {
  Pair stride{1, 1};
  Pair pad{0, 0};
  Pair dilation{1, 1};
  int64_t groups = 1;
  template <class F>
  void visit_fields(F&& f) {
    f("stride", stride);
    f("pad", pad);
    f("dilation", dilation);
    f("groups", groups);
  }
};

// The gradient ops of conv2d: `shape` is the shape of the tensor they produce
// (x for the data gradient, w for the weight gradient); `bias` asks the weight
// gradient to also produce the bias gradient.
struct Conv2dGradAttrs {
  Pair stride{1, 1};
  Pair pad{0, 0};
  Pair dilation{1, 1};
  int64_t groups = 1;
  Shape shape;
  bool bias = false;
  template <class F>
  void visit_fields(F&& f) {
    f("stride", stride);
    f("pad", pad);
    f("dilation", dilation);
    f("groups", groups);
    f("shape", shape);
    f("bias", bias);
  }
};

// conv3d: x (N, C, D, H, W), w (O, C/groups, KD, KH, KW), optional b (O); symmetric padding.
struct Conv3dAttrs {
  Triple stride{1, 1, 1};
  Triple pad{0, 0, 0};
  Triple dilation{1, 1, 1};
  int64_t groups = 1;
  template <class F>
  void visit_fields(F&& f) {
    f("stride", stride);
    f("pad", pad);
    f("dilation", dilation);
    f("groups", groups);
  }
};

// The gradient ops of conv3d, as Conv2dGradAttrs are those of conv2d.
struct Conv3dGradAttrs {
  Triple stride{1, 1, 1};
  Triple pad{0, 0, 0};
  Triple dilation{1, 1, 1};
  int64_t groups = 1;
  Shape shape;
  bool bias = false;
  template <class F>
  void visit_fields(F&& f) {
    f("stride", stride);
    f("pad", pad);
    f("dilation", dilation);
    f("groups", groups);
    f("shape", shape);
    f("bias", bias);
  }
};

// conv_transpose2d: x (N, C, H, W), w (C, O/groups, KH, KW) (PyTorch's layout),
// optional b (O) -> y (N, O, OH, OW), OH = (H - 1) stride - 2 pad + dilation (KH - 1)
// + output_padding + 1. output_padding only lengthens the output at its end and
// must be smaller than the stride or the dilation.
struct ConvTranspose2dAttrs {
  Pair stride{1, 1};
  Pair pad{0, 0};
  Pair output_padding{0, 0};
  Pair dilation{1, 1};
  int64_t groups = 1;
  template <class F>
  void visit_fields(F&& f) {
    f("stride", stride);
    f("pad", pad);
    f("output_padding", output_padding);
    f("dilation", dilation);
    f("groups", groups);
  }
};

// conv_transpose3d: as conv_transpose2d with x (N, C, D, H, W), w (C, O/groups, KD, KH, KW).
struct ConvTranspose3dAttrs {
  Triple stride{1, 1, 1};
  Triple pad{0, 0, 0};
  Triple output_padding{0, 0, 0};
  Triple dilation{1, 1, 1};
  int64_t groups = 1;
  template <class F>
  void visit_fields(F&& f) {
    f("stride", stride);
    f("pad", pad);
    f("output_padding", output_padding);
    f("dilation", dilation);
    f("groups", groups);
  }
};

// max_pool2d / avg_pool2d: x (N, C, H, W). Average pooling divides by the
// whole window when include_pad, else by the part of it inside the input.
struct Pool2dAttrs {
  Pair kernel{2, 2};
  Pair stride{2, 2};
  Pair pad{0, 0};
  bool include_pad = false;
  template <class F>
  void visit_fields(F&& f) {
    f("kernel", kernel);
    f("stride", stride);
    f("pad", pad);
    f("include_pad", include_pad);
  }
};

// avg_pool2d_grad: `shape` is the shape of the pooled input.
struct Pool2dGradAttrs {
  Pair kernel{2, 2};
  Pair stride{2, 2};
  Pair pad{0, 0};
  bool include_pad = false;
  Shape shape;
  template <class F>
  void visit_fields(F&& f) {
    f("kernel", kernel);
    f("stride", stride);
    f("pad", pad);
    f("include_pad", include_pad);
    f("shape", shape);
  }
};

// max_pool3d / avg_pool3d: x (N, C, D, H, W); the fields mean what Pool2dAttrs's
// do, with one entry per spatial dimension (D, H, W).
struct Pool3dAttrs {
  Triple kernel{2, 2, 2};
  Triple stride{2, 2, 2};
  Triple pad{0, 0, 0};
  bool include_pad = false;
  template <class F>
  void visit_fields(F&& f) {
    f("kernel", kernel);
    f("stride", stride);
    f("pad", pad);
    f("include_pad", include_pad);
  }
};

// avg_pool3d_grad: `shape` is the shape of the pooled input.
struct Pool3dGradAttrs {
  Triple kernel{2, 2, 2};
  Triple stride{2, 2, 2};
  Triple pad{0, 0, 0};
  bool include_pad = false;
  Shape shape;
  template <class F>
  void visit_fields(F&& f) {
    f("kernel", kernel);
    f("stride", stride);
    f("pad", pad);
    f("include_pad", include_pad);
    f("shape", shape);
  }
};

// upsample: x (N, C, spatial...) with 1 to 3 spatial dimensions, each
// multiplied by its integer factor in `scale`. Nearest neighbour, or
// (bi/tri)linear interpolation with align_corners=false when `linear`.
// upsample_grad uses `shape`, the shape of the upsampled input; upsample
// leaves it empty.
struct UpsampleAttrs {
  std::vector<int64_t> scale;
  bool linear = false;
  Shape shape;
  template <class F>
  void visit_fields(F&& f) {
    f("scale", scale);
    f("linear", linear);
    f("shape", shape);
  }
};

struct BatchNormAttrs {
  float eps = 1e-5f;
  float momentum = 0.1f;  // running = (1 - momentum) * running + momentum * batch
  // batch_norm, batch_norm_inference: y = relu(normalized), the forward fusion
  // pass's form of a ReLU after a batch norm (src/passes/fuse_forward_ops.h);
  // the gradient ops never set it.
  bool relu = false;
  template <class F>
  void visit_fields(F&& f) {
    f("eps", eps);
    f("momentum", momentum);
    f("relu", relu);
  }
};

// layer_norm, layer_norm_grad: normalization over the last dimension.
struct LayerNormAttrs {
  float eps = 1e-5f;
  template <class F>
  void visit_fields(F&& f) {
    f("eps", eps);
  }
};

struct ScaleAttrs {
  float alpha = 1.0f;
  template <class F>
  void visit_fields(F&& f) {
    f("alpha", alpha);
  }
};

// reshape, broadcast_to, global_avg_pool_grad: the shape to produce.
struct ShapeAttrs {
  Shape shape;
  template <class F>
  void visit_fields(F&& f) {
    f("shape", shape);
  }
};

struct PermAttrs {
  std::vector<int64_t> perm;
  template <class F>
  void visit_fields(F&& f) {
    f("perm", perm);
  }
};

// concat, softmax, log_softmax: the axis they work along.
struct AxisAttrs {
  int64_t axis = 0;
  template <class F>
  void visit_fields(F&& f) {
    f("axis", axis);
  }
};

// slice: elements [start, end) along axis. slice_grad uses `shape`, the shape
// of the sliced input, and writes zeros outside the slice.
struct SliceAttrs {
  int64_t axis = 0;
  int64_t start = 0;
  int64_t end = 0;
  Shape shape;
  template <class F>
  void visit_fields(F&& f) {
    f("axis", axis);
    f("start", start);
    f("end", end);
    f("shape", shape);
  }
};

// pad, pad_grad: `before` and `after` have one non-negative entry per
// dimension; pad writes `value` there. pad_grad crops them off again.
struct PadAttrs {
  Shape before;
  Shape after;
  float value = 0.0f;
  template <class F>
  void visit_fields(F&& f) {
    f("before", before);
    f("after", after);
    f("value", value);
  }
};

// causal_mask: x (..., Tq, Tk); y[..., i, j] = value where j > i + offset, else x.
struct CausalMaskAttrs {
  float value = -1e9f;
  int64_t offset = 0;
  template <class F>
  void visit_fields(F&& f) {
    f("value", value);
    f("offset", offset);
  }
};

// attention and attention_grad: scaled dot-product attention of q (B, H, Tq, D)
// over k (B, H, Tk, D) and v (B, H, Tk, Dv), with an optional key mask i32
// (B, Tk) (0: the key is padding). Scores are scale * q_i . k_j; a masked
// score (key j > i + offset when causal, or a padding key) is exactly
// kAttentionMaskValue, as causal_mask's default, so a row whose keys are
// all masked attends to every key equally. Dropout with probability p
// keeps probability (b, h, i, j) when dropout_keeps(seed, micro step, key,
// ((b H + h) Tq + i) Tk + j, p): the mask of a dropout over the
// probabilities (B, H, Tq, Tk) with the same key.
inline constexpr float kAttentionMaskValue = -1e9f;
struct AttentionAttrs {
  float scale = 1.0f;
  bool causal = false;
  int64_t offset = 0;
  float p = 0.0f;
  uint64_t key = 0;
  template <class F>
  void visit_fields(F&& f) {
    f("scale", scale);
    f("causal", causal);
    f("offset", offset);
    f("p", p);
    f("key", key);
  }
};

// split: consecutive pieces of `sizes` elements along axis, one output each.
struct SplitAttrs {
  int64_t axis = 0;
  std::vector<int64_t> sizes;
  template <class F>
  void visit_fields(F&& f) {
    f("axis", axis);
    f("sizes", sizes);
  }
};

// dropout: `key` names the random stream; the mask is a pure function of
// (run seed, micro step, key), so a clone of the node draws the same mask.
struct DropoutAttrs {
  float p = 0.5f;
  uint64_t key = 0;
  template <class F>
  void visit_fields(F&& f) {
    f("p", p);
    f("key", key);
  }
};

struct ReduceAttrs {
  std::vector<int64_t> axes;
  bool keepdims = false;
  template <class F>
  void visit_fields(F&& f) {
    f("axes", axes);
    f("keepdims", keepdims);
  }
};

// sgd_update: v' = momentum * v + (g + weight_decay * w); w' = w - lr * v'.
struct SgdAttrs {
  float lr = 0.01f;
  float momentum = 0.0f;
  float weight_decay = 0.0f;
  template <class F>
  void visit_fields(F&& f) {
    f("lr", lr);
    f("momentum", momentum);
    f("weight_decay", weight_decay);
  }
};

// adamw_update (Loshchilov and Hutter): decoupled weight decay, bias
// correction with the optimizer step t = optimizer_step + 1.
struct AdamWAttrs {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  template <class F>
  void visit_fields(F&& f) {
    f("lr", lr);
    f("beta1", beta1);
    f("beta2", beta2);
    f("eps", eps);
    f("weight_decay", weight_decay);
  }
};

// The collectives of data parallelism (src/ops/ops_comm.cpp) over one
// bucket: tensors packed into one buffer of `size` floats, summed or
// gathered over the `ranks` ranks. Tensor i has the shape
// dims[sum(ndims[0..i)) .. +ndims[i]) and occupies the floats
// [offsets[i], offsets[i + 1]) of the bucket (its elements in its layout,
// padding included); offsets has one entry more than ndims, and size >=
// offsets.back() (zeros after it). Sharded (ZeRO), size is a multiple of
// ranks and `rank` owns block [rank * size / ranks, (rank + 1) * size / ranks).
struct BucketAttrs {
  int64_t ranks = 1;
  int64_t rank = 0;
  int64_t size = 0;
  std::vector<int64_t> dims;
  std::vector<int64_t> ndims;
  std::vector<int64_t> offsets;
  template <class F>
  void visit_fields(F&& f) {
    f("ranks", ranks);
    f("rank", rank);
    f("size", size);
    f("dims", dims);
    f("ndims", ndims);
    f("offsets", offsets);
  }
  int64_t block() const { return size / ranks; }
};

struct FillAttrs {
  float value = 0.0f;
  Shape shape;
  template <class F>
  void visit_fields(F&& f) {
    f("value", value);
    f("shape", shape);
  }
};

}  // namespace memfit
