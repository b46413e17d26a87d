// Each supported ONNX operator mapped onto ops of memfit's table, for nodes
// that compute on the graph's values (fold_constants.cpp folds the rest).
// A mapping checks every attribute it reads and refuses what it cannot map.
#ifdef MEMFIT_HAVE_ONNX
#include <cmath>
#include <numeric>

#include "onnx/import_context.h"
#include "onnx/shape_rules.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using Ctx = ImportContext;

Result<int64_t> axis_of(Ctx& ctx, int64_t axis, size_t rank) {
  auto a = onnx_axis(axis, rank);
  if (!a) return ctx.error(a.message());
  return *a;
}

Status bind(Ctx& ctx, Result<ValueId> v) {
  if (!v) return v.status();
  ctx.set_output(0, *v);
  return Status::ok();
}

// A unary op on input 0.
OperatorMapping unary(OpKind op) {
  return [op](Ctx& ctx) -> Status {
    MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({}));
    MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
    return bind(ctx, ctx.op(op, {x}));
  };
}

Status identity(Ctx& ctx) {
  if (ctx.is_weight(0)) {
    // Exporters deduplicate initializers of equal values (the ones and zeros
    // of fresh batch norms) into Identity nodes; each output is a weight of
    // its own, under its own name.
    MEMFIT_ASSIGN_OR_RETURN(HostTensor t, ctx.constant(0));
    return ctx.set_weight(0, std::move(t));
  }
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  ctx.set_output(0, x);
  return Status::ok();
}

// The single element of a known input, or nullopt when the input is
// computed, a weight, or has more than one element.
std::optional<float> scalar_of(Ctx& ctx, int i) {
  if (!ctx.is_constant(i) || ctx.is_weight(i)) return std::nullopt;
  auto t = ctx.constant(i);
  if (!t || t->elements() != 1) return std::nullopt;
  return static_cast<float>(t->number(0));
}

const GeluPart* gelu_part(Ctx& ctx, int i) {
  if (!ctx.has_input(i)) return nullptr;
  const auto it = ctx.gelu_parts().find(ctx.node().input(i));
  return it == ctx.gelu_parts().end() ? nullptr : &it->second;
}

// The input of scale(x, alpha) when v is such a node with that alpha.
ValueId scaled_from(Ctx& ctx, ValueId v, float alpha) {
  const Value& value = ctx.graph().value(v);
  if (!value.producer.valid()) return ValueId();
  const Node& node = ctx.graph().node(value.producer);
  if (node.op != OpKind::scale) return ValueId();
  if (std::abs(std::get<ScaleAttrs>(node.attrs).alpha - alpha) > 1e-6f * std::abs(alpha)) {
    return ValueId();
  }
  return node.inputs[0];
}

Status erf(Ctx& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(const ValueId d, ctx.value(0));
  const ValueId x = scaled_from(ctx, d, static_cast<float>(1.0 / std::sqrt(2.0)));
  if (!x.valid()) {
    return ctx.error("Erf is supported only inside GELU, x * 0.5 * (1 + erf(x / sqrt(2)))");
  }
  MEMFIT_ASSIGN_OR_RETURN(const ValueId g, ctx.op(OpKind::gelu, {x}));
  ctx.gelu_parts()[ctx.node().output(0)] = GeluPart{GeluPart::erf, x, g};
  return Status::ok();
}

// Add(erf, 1) -> 1 + erf; Mul(1 + erf, x) -> 2 gelu(x); Mul(1 + erf, x / 2) -> gelu(x).
Result<bool> gelu_step(Ctx& ctx, const std::string& op) {
  for (int side = 0; side < 2; ++side) {
    const GeluPart* part = gelu_part(ctx, side);
    if (part == nullptr) continue;
    const int other = 1 - side;
    if (op == "Add" && part->stage == GeluPart::erf && scalar_of(ctx, other) == 1.0f) {
      ctx.gelu_parts()[ctx.node().output(0)] = GeluPart{GeluPart::one_plus_erf, part->x, part->gelu};
      return true;
    }
    if (op == "Mul" && part->stage == GeluPart::one_plus_erf && !ctx.is_constant(other)) {
      MEMFIT_ASSIGN_OR_RETURN(const ValueId y, ctx.value(other));
      if (y == part->x) {
        MEMFIT_RETURN_IF_ERROR(bind(ctx, ctx.op(OpKind::scale, {part->gelu}, ScaleAttrs{2.0f})));
        return true;
      }
      if (scaled_from(ctx, y, 0.5f) == part->x) {
        ctx.set_output(0, part->gelu);
        return true;
      }
    }
    return ctx.error("Erf is supported only inside GELU, x * 0.5 * (1 + erf(x / sqrt(2)))");
  }
  return false;
}

// The node that produces v when it is an `op` node, else null.
const Node* producer(Ctx& ctx, ValueId v, OpKind op) {
  const Value& value = ctx.graph().value(v);
  if (!value.producer.valid()) return nullptr;
  const Node& node = ctx.graph().node(value.producer);
  return node.op == op ? &node : nullptr;
}

// Whether v is reduce_mean over the last axis of its input, keeping it; sets `from`.
bool mean_over_last(Ctx& ctx, ValueId v, ValueId& from) {
  const Node* node = producer(ctx, v, OpKind::reduce_mean);
  if (node == nullptr) return false;
  const auto& a = std::get<ReduceAttrs>(node->attrs);
  const auto rank = static_cast<int64_t>(ctx.shape_of(node->inputs[0]).size());
  if (!a.keepdims || a.axes != std::vector<int64_t>{rank - 1}) return false;
  from = node->inputs[0];
  return true;
}

Status sqrt(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({}));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  ctx.sqrt_parts()[ctx.node().output(0)] = x;
  return Status::ok();
}

// Div(x - mean(x), Sqrt(mean((x - mean(x))^2) + eps)) over the last axis, as
// exporters write LayerNormalization before opset 17: layer_norm with unit
// scale and zero shift (the Mul and Add after it map as they are).
Status layer_norm_division(Ctx& ctx, ValueId root) {
  const std::string unsupported =
      "Sqrt of computed data is supported only as a layer normalization's divisor, "
      "(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) over the last axis";
  MEMFIT_ASSIGN_OR_RETURN(const ValueId centered, ctx.value(0));
  const Node* plus_eps = producer(ctx, root, OpKind::add);
  if (plus_eps == nullptr) return ctx.error(unsupported);
  const Node* eps_fill = producer(ctx, plus_eps->inputs[1], OpKind::fill);
  ValueId var = plus_eps->inputs[0];
  if (eps_fill == nullptr) {
    eps_fill = producer(ctx, plus_eps->inputs[0], OpKind::fill);
    var = plus_eps->inputs[1];
  }
  if (eps_fill == nullptr || num_elements(std::get<FillAttrs>(eps_fill->attrs).shape) != 1) {
    return ctx.error(unsupported);
  }
  ValueId squared, x;
  if (!mean_over_last(ctx, var, squared)) return ctx.error(unsupported);
  const Node* square = producer(ctx, squared, OpKind::mul);
  if (square == nullptr || square->inputs[0] != square->inputs[1] || square->inputs[0] != centered) {
    return ctx.error(unsupported);
  }
  const Node* sub = producer(ctx, centered, OpKind::sub);
  ValueId mean_of;
  if (sub == nullptr || !mean_over_last(ctx, sub->inputs[1], mean_of) || mean_of != sub->inputs[0]) {
    return ctx.error(unsupported);
  }
  x = sub->inputs[0];
  const int64_t width = ctx.shape_of(x).back();
  MEMFIT_ASSIGN_OR_RETURN(const ValueId ones, ctx.op(OpKind::fill, {}, FillAttrs{1.0f, {width}}));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId zeros, ctx.op(OpKind::fill, {}, FillAttrs{0.0f, {width}}));
  const float eps = std::get<FillAttrs>(eps_fill->attrs).value;
  return bind(ctx, ctx.op(OpKind::layer_norm, {x, ones, zeros}, LayerNormAttrs{eps}));
}

// Whether v is a fill of `value`.
bool is_fill(Ctx& ctx, ValueId v, float value) {
  const Node* fill = producer(ctx, v, OpKind::fill);
  return fill != nullptr && std::get<FillAttrs>(fill->attrs).value == value;
}

// The affine part of a layer normalization written out in ops: Mul by a
// scale of the normalized width after layer_norm with unit scale, and Add of
// a shift after one with zero shift, become that layer_norm's own scale and
// shift (a layer_norm anew; the first goes unused unless another node reads it).
Result<bool> layer_norm_affine(Ctx& ctx, const std::string& name) {
  if (name != "Mul" && name != "Add") return false;
  for (int side = 0; side < 2; ++side) {
    if (ctx.is_constant(side) && !ctx.is_weight(side)) continue;
    MEMFIT_ASSIGN_OR_RETURN(const ValueId normalized, ctx.value(side));
    const Node* norm = producer(ctx, normalized, OpKind::layer_norm);
    if (norm == nullptr) continue;
    const int64_t width = ctx.shape_of(norm->inputs[0]).back();
    const int other = 1 - side;
    MEMFIT_ASSIGN_OR_RETURN(const Shape other_shape, ctx.shape(other));
    if (other_shape != Shape{width}) continue;
    MEMFIT_ASSIGN_OR_RETURN(const ValueId factor, ctx.value(other));
    std::vector<ValueId> inputs = norm->inputs;
    if (name == "Mul" && is_fill(ctx, inputs[1], 1.0f) && is_fill(ctx, inputs[2], 0.0f)) {
      inputs[1] = factor;
    } else if (name == "Add" && is_fill(ctx, inputs[2], 0.0f)) {
      inputs[2] = factor;
    } else {
      continue;
    }
    const Attrs attrs = norm->attrs;
    MEMFIT_RETURN_IF_ERROR(bind(ctx, ctx.op(OpKind::layer_norm, inputs, attrs)));
    return true;
  }
  return false;
}

// scale(x, alpha); where x is scale(y, 1 / alpha) for a power of two alpha
// (GELU's 2 gelu(x) * 0.5, exact in floating point), y itself.
Result<ValueId> scaled(Ctx& ctx, ValueId x, float alpha) {
  int exponent = 0;
  const bool power_of_two = std::frexp(std::abs(alpha), &exponent) == 0.5f;
  if (const Node* before = producer(ctx, x, OpKind::scale);
      power_of_two && before != nullptr && std::get<ScaleAttrs>(before->attrs).alpha * alpha == 1.0f) {
    return before->inputs[0];
  }
  return ctx.op(OpKind::scale, {x}, ScaleAttrs{alpha});
}

// Add, Sub, Mul, Div with numpy broadcasting; a scalar constant operand
// becomes scale (Mul, Div) or an added fill.
OperatorMapping binary(std::string name) {
  return [name](Ctx& ctx) -> Status {
    MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({}));
    if (ctx.inputs() != 2) return ctx.error("needs 2 inputs");
    MEMFIT_ASSIGN_OR_RETURN(const bool gelu, gelu_step(ctx, name));
    if (gelu) return Status::ok();
    MEMFIT_ASSIGN_OR_RETURN(const bool affine, layer_norm_affine(ctx, name));
    if (affine) return Status::ok();
    const std::optional<float> a = scalar_of(ctx, 0), b = scalar_of(ctx, 1);
    if ((name == "Mul" && (a || b)) || (name == "Div" && b)) {
      MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(name == "Mul" && a ? 1 : 0));
      const float alpha = name == "Div" ? 1.0f / *b : a ? *a : *b;
      return bind(ctx, scaled(ctx, x, alpha));
    }
    if (name == "Div" && ctx.has_input(1) && ctx.sqrt_parts().count(ctx.node().input(1))) {
      return layer_norm_division(ctx, ctx.sqrt_parts().at(ctx.node().input(1)));
    }
    if (name == "Div") {
      return ctx.error("division by a tensor the graph computes is not supported (only by a "
                       "constant, or a layer normalization's square root)");
    }
    MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
    MEMFIT_ASSIGN_OR_RETURN(const ValueId y, ctx.value(1));
    const OpKind op = name == "Add" ? OpKind::add : name == "Sub" ? OpKind::sub : OpKind::mul;
    return bind(ctx, ctx.op(op, {x, y}));
  };
}

Status pow(Ctx& ctx) {
  const std::optional<float> e = scalar_of(ctx, 1);
  if (!e || (*e != 1.0f && *e != 2.0f && *e != 3.0f)) {
    return ctx.error("only the constant exponents 1, 2 and 3 are supported");
  }
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  if (*e == 1.0f) return bind(ctx, x);
  MEMFIT_ASSIGN_OR_RETURN(ValueId y, ctx.op(OpKind::mul, {x, x}));
  if (*e == 3.0f) {
    MEMFIT_ASSIGN_OR_RETURN(y, ctx.op(OpKind::mul, {y, x}));
  }
  return bind(ctx, y);
}

// The input of `v` when v is a transpose that swaps only its last two
// dimensions (a matmul reads it transposed instead), else invalid.
ValueId transposed_from(Ctx& ctx, ValueId v) {
  const Value& value = ctx.graph().value(v);
  if (!value.producer.valid()) return ValueId();
  const Node& node = ctx.graph().node(value.producer);
  if (node.op != OpKind::transpose) return ValueId();
  const std::vector<int64_t>& perm = std::get<PermAttrs>(node.attrs).perm;
  const auto rank = static_cast<int64_t>(perm.size());
  if (rank < 2) return ValueId();
  for (int64_t d = 0; d < rank - 2; ++d) {
    if (perm[static_cast<size_t>(d)] != d) return ValueId();
  }
  if (perm[static_cast<size_t>(rank - 2)] != rank - 1 || perm[static_cast<size_t>(rank - 1)] != rank - 2) {
    return ValueId();
  }
  return node.inputs[0];
}

// MatMul, reading an operand transposed in place of a transpose node before
// it (a tied embedding's W^T, attention's K^T), which then goes unused unless
// another node reads it.
Status matmul(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({}));
  MEMFIT_ASSIGN_OR_RETURN(ValueId a, ctx.value(0));
  MEMFIT_ASSIGN_OR_RETURN(ValueId b, ctx.value(1));
  MatmulAttrs attrs;
  if (const ValueId from = transposed_from(ctx, a); from.valid()) {
    a = from;
    attrs.trans_a = true;
  }
  if (const ValueId from = transposed_from(ctx, b); from.valid()) {
    b = from;
    attrs.trans_b = true;
  }
  const Shape& sa = ctx.shape_of(a);
  const Shape& sb = ctx.shape_of(b);
  if (sa.size() < 2 || sb.size() < 2) return ctx.error("MatMul of a 1-D operand is not supported");
  if (sb.size() > 2 && !std::equal(sa.begin(), sa.end() - 2, sb.begin(), sb.end() - 2)) {
    return ctx.error("MatMul broadcasts batch dimensions " + shape_string(sa) + " x " +
                     shape_string(sb) + "; memfit needs equal ones or a 2-D right operand");
  }
  return bind(ctx, ctx.op(OpKind::matmul, {a, b}, attrs));
}

Status gemm(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"alpha", "beta", "transA", "transB"}));
  MEMFIT_ASSIGN_OR_RETURN(const float alpha, ctx.attr_float("alpha", 1.0f));
  MEMFIT_ASSIGN_OR_RETURN(const float beta, ctx.attr_float("beta", 1.0f));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t trans_a, ctx.attr_int("transA", 0));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t trans_b, ctx.attr_int("transB", 0));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId a, ctx.value(0));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId b, ctx.value(1));
  if (ctx.shape_of(a).size() != 2 || ctx.shape_of(b).size() != 2) {
    return ctx.error("Gemm needs 2-D A and B");
  }
  const bool has_c = ctx.has_input(2);
  if (trans_b && !trans_a && alpha == 1.0f && (beta == 1.0f || !has_c)) {
    std::vector<ValueId> in = {a, b};
    if (has_c) {
      MEMFIT_ASSIGN_OR_RETURN(const ValueId c, ctx.value(2));
      if (ctx.shape_of(c).size() != 1) {
        MEMFIT_ASSIGN_OR_RETURN(const ValueId y, ctx.op(OpKind::linear, {a, b}));
        return bind(ctx, ctx.op(OpKind::add, {y, c}));
      }
      in.push_back(c);
    }
    return bind(ctx, ctx.op(OpKind::linear, in));
  }
  MEMFIT_ASSIGN_OR_RETURN(ValueId y, ctx.op(OpKind::matmul, {a, b}, MatmulAttrs{trans_a != 0, trans_b != 0}));
  if (alpha != 1.0f) {
    MEMFIT_ASSIGN_OR_RETURN(y, ctx.op(OpKind::scale, {y}, ScaleAttrs{alpha}));
  }
  if (has_c && beta != 0.0f) {
    MEMFIT_ASSIGN_OR_RETURN(ValueId c, ctx.value(2));
    if (beta != 1.0f) {
      MEMFIT_ASSIGN_OR_RETURN(c, ctx.op(OpKind::scale, {c}, ScaleAttrs{beta}));
    }
    MEMFIT_ASSIGN_OR_RETURN(y, ctx.op(OpKind::add, {y, c}));
  }
  return bind(ctx, y);
}

// The spatial window attributes of Conv, ConvTranspose and the pools, checked
// against `spatial` dimensions: symmetric pads, no auto_pad.
struct Window {
  std::vector<int64_t> kernel, stride, pad, dilation;
};
Result<Window> window(Ctx& ctx, size_t spatial, const std::vector<int64_t>& kernel_fallback) {
  MEMFIT_ASSIGN_OR_RETURN(const std::string auto_pad, ctx.attr_string("auto_pad", "NOTSET"));
  if (auto_pad != "NOTSET" && auto_pad != "VALID") {
    return ctx.error("auto_pad " + auto_pad + " is not supported (export with explicit pads)");
  }
  Window w;
  MEMFIT_ASSIGN_OR_RETURN(w.kernel, ctx.attr_ints("kernel_shape", kernel_fallback));
  MEMFIT_ASSIGN_OR_RETURN(w.stride, ctx.attr_ints("strides", std::vector<int64_t>(spatial, 1)));
  MEMFIT_ASSIGN_OR_RETURN(w.dilation, ctx.attr_ints("dilations", std::vector<int64_t>(spatial, 1)));
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<int64_t> pads,
                          ctx.attr_ints("pads", std::vector<int64_t>(2 * spatial, 0)));
  if (w.kernel.size() != spatial || w.stride.size() != spatial || w.dilation.size() != spatial ||
      pads.size() != 2 * spatial) {
    return ctx.error("kernel_shape, strides, dilations or pads do not match " +
                     std::to_string(spatial) + " spatial dimensions");
  }
  for (size_t d = 0; d < spatial; ++d) {
    if (pads[d] < 0 || pads[d + spatial] < 0) {
      return ctx.error("negative pads are not supported (begin " + std::to_string(pads[d]) +
                       ", end " + std::to_string(pads[d + spatial]) + ")");
    }
    if (pads[d] != pads[d + spatial]) {
      return ctx.error("asymmetric pads are not supported (begin " + std::to_string(pads[d]) +
                       ", end " + std::to_string(pads[d + spatial]) + ")");
    }
    w.pad.push_back(pads[d]);
  }
  return w;
}

template <size_t N>
std::array<int64_t, N> fixed(const std::vector<int64_t>& v) {
  std::array<int64_t, N> a{};
  for (size_t i = 0; i < N; ++i) a[i] = v[i];
  return a;
}

// What Conv and ConvTranspose read alike: x, the weight (N, C, K...) of 2
// or 3 spatial dimensions, an optional bias, the window and the groups.
struct ConvParts {
  std::vector<ValueId> inputs;
  size_t spatial = 0;
  Window win;
  int64_t group = 1;
};
Result<ConvParts> conv_parts(Ctx& ctx) {
  ConvParts c;
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId w, ctx.value(1));
  const Shape ws = ctx.shape_of(w);
  if (ws.size() != 4 && ws.size() != 5) return ctx.error("only 2-D and 3-D convolutions are supported");
  c.spatial = ws.size() - 2;
  const Shape kernel(ws.begin() + 2, ws.end());
  MEMFIT_ASSIGN_OR_RETURN(c.win, window(ctx, c.spatial, kernel));
  if (c.win.kernel != kernel) return ctx.error("kernel_shape differs from the weight's");
  MEMFIT_ASSIGN_OR_RETURN(c.group, ctx.attr_int("group", 1));
  c.inputs = {x, w};
  if (ctx.has_input(2)) {
    MEMFIT_ASSIGN_OR_RETURN(const ValueId b, ctx.value(2));
    c.inputs.push_back(b);
  }
  return c;
}

Status conv(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
  MEMFIT_ASSIGN_OR_RETURN(const ConvParts c, conv_parts(ctx));
  const Window& win = c.win;
  const std::vector<ValueId>& in = c.inputs;
  const int64_t group = c.group;
  if (c.spatial == 2) {
    return bind(ctx, ctx.op(OpKind::conv2d, in,
                            Conv2dAttrs{fixed<2>(win.stride), fixed<2>(win.pad), fixed<2>(win.dilation), group}));
  }
  return bind(ctx, ctx.op(OpKind::conv3d, in,
                          Conv3dAttrs{fixed<3>(win.stride), fixed<3>(win.pad), fixed<3>(win.dilation), group}));
}

Status conv_transpose(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs(
      {"auto_pad", "dilations", "group", "kernel_shape", "output_padding", "pads", "strides"}));
  MEMFIT_ASSIGN_OR_RETURN(const ConvParts c, conv_parts(ctx));
  const Window& win = c.win;
  const std::vector<ValueId>& in = c.inputs;
  const int64_t group = c.group;
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<int64_t> out_pad,
                          ctx.attr_ints("output_padding", std::vector<int64_t>(c.spatial, 0)));
  if (out_pad.size() != c.spatial) return ctx.error("output_padding does not match the spatial dimensions");
  if (c.spatial == 2) {
    return bind(ctx, ctx.op(OpKind::conv_transpose2d, in,
                            ConvTranspose2dAttrs{fixed<2>(win.stride), fixed<2>(win.pad),
                                                 fixed<2>(out_pad), fixed<2>(win.dilation), group}));
  }
  return bind(ctx, ctx.op(OpKind::conv_transpose3d, in,
                          ConvTranspose3dAttrs{fixed<3>(win.stride), fixed<3>(win.pad),
                                               fixed<3>(out_pad), fixed<3>(win.dilation), group}));
}

OperatorMapping pool(bool max) {
  return [max](Ctx& ctx) -> Status {
    if (max) {
      MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                             "pads", "storage_order", "strides"}));
      MEMFIT_ASSIGN_OR_RETURN(const int64_t order, ctx.attr_int("storage_order", 0));
      if (order != 0) return ctx.error("storage_order 1 is not supported");
      if (ctx.outputs() > 1 && !ctx.node().output(1).empty()) {
        return ctx.error("the Indices output is not supported");
      }
    } else {
      MEMFIT_RETURN_IF_ERROR(ctx.only_attrs(
          {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"}));
    }
    MEMFIT_ASSIGN_OR_RETURN(const int64_t ceil_mode, ctx.attr_int("ceil_mode", 0));
    if (ceil_mode != 0) return ctx.error("ceil_mode 1 is not supported");
    MEMFIT_ASSIGN_OR_RETURN(const int64_t include_pad, ctx.attr_int("count_include_pad", 0));
    MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
    const size_t rank = ctx.shape_of(x).size();
    if (rank != 4 && rank != 5) return ctx.error("only 2-D and 3-D pooling is supported");
    if (ctx.attr("kernel_shape") == nullptr) return ctx.error("kernel_shape is missing");
    MEMFIT_ASSIGN_OR_RETURN(const Window win, window(ctx, rank - 2, {}));
    for (int64_t d : win.dilation) {
      if (d != 1) return ctx.error("dilated pooling is not supported");
    }
    if (rank == 4) {
      const Pool2dAttrs a{fixed<2>(win.kernel), fixed<2>(win.stride), fixed<2>(win.pad), include_pad != 0};
      return bind(ctx, ctx.op(max ? OpKind::max_pool2d : OpKind::avg_pool2d, {x}, a));
    }
    const Pool3dAttrs a{fixed<3>(win.kernel), fixed<3>(win.stride), fixed<3>(win.pad), include_pad != 0};
    return bind(ctx, ctx.op(max ? OpKind::max_pool3d : OpKind::avg_pool3d, {x}, a));
  };
}

Status global_average_pool(Ctx& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  const size_t rank = ctx.shape_of(x).size();
  if (rank == 4) return bind(ctx, ctx.op(OpKind::global_avg_pool, {x}));
  if (rank < 3) return ctx.error("needs (N, C, spatial...)");
  std::vector<int64_t> axes;
  for (size_t d = 2; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  return bind(ctx, ctx.op(OpKind::reduce_mean, {x}, ReduceAttrs{axes, true}));
}

Status batch_normalization(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"epsilon", "momentum", "training_mode"}));
  MEMFIT_ASSIGN_OR_RETURN(const float eps, ctx.attr_float("epsilon", 1e-5f));
  if (eps <= 0) return ctx.error("epsilon must be positive, not " + std::to_string(eps));
  MEMFIT_ASSIGN_OR_RETURN(const float momentum, ctx.attr_float("momentum", 0.9f));
  if (momentum < 0 || momentum > 1) {
    return ctx.error("momentum must be between 0 and 1, not " + std::to_string(momentum));
  }
  // Training mode's outputs 1 and 2 (the running statistics) are not bound:
  // memfit updates the state itself, and a node that reads them is refused.
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId scale, ctx.value(1));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId bias, ctx.value(2));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId mean, ctx.value(3, Role::state));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId var, ctx.value(4, Role::state));
  // ONNX: running = momentum running + (1 - momentum) batch; memfit the reverse.
  const BatchNormAttrs attrs{eps, 1.0f - momentum, false};
  Graph& g = ctx.graph();
  if (g.value(mean).role != Role::state || g.value(var).role != Role::state) {
    return ctx.error("the running mean and variance must be initializers");
  }
  if (!ctx.options().training) {
    return bind(ctx, ctx.op(OpKind::batch_norm_inference, {x, scale, bias, mean, var}, attrs));
  }
  MEMFIT_ASSIGN_OR_RETURN(const ValueId y, ctx.op(OpKind::batch_norm, {x, scale, bias, mean, var}, attrs));
  const Node& node = g.node(g.value(y).producer);
  g.add_update(mean, node.outputs[3]);
  g.add_update(var, node.outputs[4]);
  return bind(ctx, y);
}

Status layer_normalization(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"axis", "epsilon", "stash_type"}));
  MEMFIT_ASSIGN_OR_RETURN(const float eps, ctx.attr_float("epsilon", 1e-5f));
  if (eps <= 0) return ctx.error("epsilon must be positive, not " + std::to_string(eps));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis_attr, ctx.attr_int("axis", -1));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  const Shape xs = ctx.shape_of(x);
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, axis_of(ctx, axis_attr, xs.size()));
  if (axis != static_cast<int64_t>(xs.size()) - 1) {
    return ctx.error("normalization over more than the last axis is not supported");
  }
  if (ctx.outputs() > 1) {
    for (int k = 1; k < ctx.outputs(); ++k) {
      if (!ctx.node().output(k).empty()) return ctx.error("the Mean and InvStdDev outputs are not supported");
    }
  }
  MEMFIT_ASSIGN_OR_RETURN(const ValueId scale, ctx.value(1));
  ValueId bias;
  if (ctx.has_input(2)) {
    MEMFIT_ASSIGN_OR_RETURN(bias, ctx.value(2));
  } else {
    MEMFIT_ASSIGN_OR_RETURN(bias, ctx.op(OpKind::fill, {}, FillAttrs{0.0f, {xs.back()}}));
  }
  return bind(ctx, ctx.op(OpKind::layer_norm, {x, scale, bias}, LayerNormAttrs{eps}));
}

OperatorMapping softmax(OpKind op) {
  return [op](Ctx& ctx) -> Status {
    MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"axis"}));
    MEMFIT_ASSIGN_OR_RETURN(const int64_t axis_attr, ctx.attr_int("axis", -1));
    MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
    MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, axis_of(ctx, axis_attr, ctx.shape_of(x).size()));
    return bind(ctx, ctx.op(op, {x}, AxisAttrs{axis}));
  };
}

Status dropout(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"seed"}));
  // The mask output is not bound: memfit's dropout keeps its mask implicit;
  // exporters name it without reading it, and a node that reads it is refused.
  float ratio = 0.5f;
  if (ctx.has_input(1)) {
    const std::optional<float> r = scalar_of(ctx, 1);
    if (!r) return ctx.error("the ratio must be a constant scalar");
    ratio = *r;
  }
  if (!(ratio >= 0.0f && ratio < 1.0f)) return ctx.error("the ratio must be in [0, 1)");
  const uint64_t key = ctx.next_dropout_key();
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  if (!ctx.options().training || !ctx.options().dropout || ratio == 0.0f) return bind(ctx, x);
  return bind(ctx, ctx.op(OpKind::dropout, {x}, DropoutAttrs{ratio, key}));
}

Status reshape_to(Ctx& ctx, ValueId x, Shape shape) {
  if (shape == ctx.shape_of(x)) return bind(ctx, x);
  return bind(ctx, ctx.op(OpKind::reshape, {x}, ShapeAttrs{std::move(shape)}));
}

Status reshape(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"allowzero"}));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t allowzero, ctx.attr_int("allowzero", 0));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  MEMFIT_ASSIGN_OR_RETURN(const HostTensor spec, ctx.constant(1));
  auto shape = reshape_target(ctx.shape_of(x), spec.integers(), allowzero != 0);
  if (!shape) return ctx.error(shape.message());
  return reshape_to(ctx, x, *shape);
}

Status flatten(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"axis"}));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, ctx.attr_int("axis", 1));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  auto shape = flatten_target(ctx.shape_of(x), axis);
  if (!shape) return ctx.error(shape.message());
  return reshape_to(ctx, x, *shape);
}

// Squeeze and Unsqueeze: reshapes; axes from input 1 (opset 13 on).
OperatorMapping squeeze(bool unsqueeze) {
  return [unsqueeze](Ctx& ctx) -> Status {
    MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({}));
    MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
    std::vector<int64_t> axes;
    if (ctx.has_input(1)) {
      MEMFIT_ASSIGN_OR_RETURN(const HostTensor a, ctx.constant(1));
      axes = a.integers();
    } else if (unsqueeze) {
      return ctx.error("Unsqueeze needs axes");
    }
    auto shape = squeeze_target(ctx.shape_of(x), axes, unsqueeze);
    if (!shape) return ctx.error(shape.message());
    return reshape_to(ctx, x, *shape);
  };
}

Status transpose(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"perm"}));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  const size_t rank = ctx.shape_of(x).size();
  std::vector<int64_t> reversed(rank);
  for (size_t d = 0; d < rank; ++d) reversed[d] = static_cast<int64_t>(rank - 1 - d);
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, ctx.attr_ints("perm", reversed));
  return bind(ctx, ctx.op(OpKind::transpose, {x}, PermAttrs{perm}));
}

Status concat(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"axis"}));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis_attr, ctx.attr_int("axis", 0));
  std::vector<ValueId> in;
  for (int i = 0; i < ctx.inputs(); ++i) {
    MEMFIT_ASSIGN_OR_RETURN(const ValueId v, ctx.value(i));
    in.push_back(v);
  }
  if (in.empty()) return ctx.error("Concat without inputs");
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, axis_of(ctx, axis_attr, ctx.shape_of(in[0]).size()));
  if (in.size() == 1) return bind(ctx, in[0]);
  return bind(ctx, ctx.op(OpKind::concat, in, AxisAttrs{axis}));
}

// Slice with unit steps along each axis given.
Status slice(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({}));
  MEMFIT_ASSIGN_OR_RETURN(ValueId x, ctx.value(0));
  MEMFIT_ASSIGN_OR_RETURN(const HostTensor starts, ctx.constant(1));
  MEMFIT_ASSIGN_OR_RETURN(const HostTensor ends, ctx.constant(2));
  const size_t n = static_cast<size_t>(starts.elements());
  std::vector<int64_t> axes(n), steps(n, 1);
  std::iota(axes.begin(), axes.end(), 0);
  if (ctx.has_input(3)) {
    MEMFIT_ASSIGN_OR_RETURN(const HostTensor a, ctx.constant(3));
    axes = a.integers();
  }
  if (ctx.has_input(4)) {
    MEMFIT_ASSIGN_OR_RETURN(const HostTensor s, ctx.constant(4));
    steps = s.integers();
  }
  if (static_cast<size_t>(ends.elements()) != n || axes.size() != n || steps.size() != n) {
    return ctx.error("starts, ends, axes and steps differ in length");
  }
  for (size_t k = 0; k < n; ++k) {
    if (steps[k] != 1) return ctx.error("slices with steps other than 1 are not supported");
    const Shape& xs = ctx.shape_of(x);
    MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, axis_of(ctx, axes[k], xs.size()));
    const int64_t dim = xs[static_cast<size_t>(axis)];
    int64_t s = starts.integer(k), e = ends.integer(k);
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    s = std::clamp<int64_t>(s, 0, dim);
    e = std::clamp<int64_t>(e, s, dim);
    if (s == 0 && e == dim) continue;
    if (s == e) return ctx.error("an empty slice is not supported");
    MEMFIT_ASSIGN_OR_RETURN(x, ctx.op(OpKind::slice, {x}, SliceAttrs{axis, s, e, {}}));
  }
  return bind(ctx, x);
}

Status split(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"axis"}));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis_attr, ctx.attr_int("axis", 0));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  const Shape xs = ctx.shape_of(x);
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, axis_of(ctx, axis_attr, xs.size()));
  const int64_t dim = xs[static_cast<size_t>(axis)];
  std::vector<int64_t> sizes;
  if (ctx.has_input(1)) {
    MEMFIT_ASSIGN_OR_RETURN(const HostTensor s, ctx.constant(1));
    sizes = s.integers();
  } else {
    const int64_t parts = ctx.outputs();
    if (parts < 1 || dim % parts != 0) return ctx.error("cannot split evenly");
    sizes.assign(static_cast<size_t>(parts), dim / parts);
  }
  if (static_cast<int64_t>(sizes.size()) != ctx.outputs() ||
      std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != dim) {
    return ctx.error("the split sizes do not fit the outputs or the dimension");
  }
  Graph& g = ctx.graph();
  MEMFIT_ASSIGN_OR_RETURN(const ValueId first, ctx.op(OpKind::split, {x}, SplitAttrs{axis, sizes}));
  const Node& node = g.node(g.value(first).producer);
  for (int k = 0; k < ctx.outputs(); ++k) ctx.set_output(k, node.outputs[static_cast<size_t>(k)]);
  return Status::ok();
}

// Gather: rows of a weight by computed ids (an embedding), or a contiguous
// range of known indices along any axis (a slice).
Status gather(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"axis"}));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis_attr, ctx.attr_int("axis", 0));
  MEMFIT_ASSIGN_OR_RETURN(const Shape data_shape, ctx.shape(0));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, axis_of(ctx, axis_attr, data_shape.size()));
  if (!ctx.is_constant(1)) {
    MEMFIT_ASSIGN_OR_RETURN(const DType ids_type, ctx.dtype(1));
    if (axis != 0 || data_shape.size() != 2 || ids_type != DType::i32) {
      return ctx.error("Gather by computed indices is supported only as an embedding: rows (axis 0) "
                       "of a 2-D table by integer ids");
    }
    MEMFIT_ASSIGN_OR_RETURN(const ValueId table, ctx.value(0));
    MEMFIT_ASSIGN_OR_RETURN(const ValueId ids, ctx.value(1));
    return bind(ctx, ctx.op(OpKind::embedding, {ids, table}));
  }
  MEMFIT_ASSIGN_OR_RETURN(const HostTensor indices, ctx.constant(1));
  if (indices.is_float()) return ctx.error("the indices must be integers");
  const int64_t dim = data_shape[static_cast<size_t>(axis)];
  std::vector<int64_t> idx = indices.integers();
  for (int64_t& i : idx) {
    if (i < 0) i += dim;
    if (i < 0 || i >= dim) return ctx.error("an index is out of range");
  }
  if (idx.empty()) return ctx.error("no indices");
  for (size_t k = 1; k < idx.size(); ++k) {
    if (idx[k] != idx[0] + static_cast<int64_t>(k)) {
      return ctx.error("Gather of known indices is supported only for a contiguous ascending range");
    }
  }
  MEMFIT_ASSIGN_OR_RETURN(ValueId x, ctx.value(0));
  const int64_t count = static_cast<int64_t>(idx.size());
  if (idx[0] != 0 || count != dim) {
    MEMFIT_ASSIGN_OR_RETURN(x, ctx.op(OpKind::slice, {x}, SliceAttrs{axis, idx[0], idx[0] + count, {}}));
  }
  Shape shape(data_shape.begin(), data_shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data_shape.begin() + axis + 1, data_shape.end());
  return reshape_to(ctx, x, shape);
}

// Where with a known condition that masks a causal pattern: x[..., i, j]
// replaced by a constant where j > i + offset (masked_fill of a triangular
// mask, as GPT-2-style attention writes it).
Status where(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({}));
  const std::string unsupported =
      "Where is supported only as a causal mask: a known condition that replaces the scores above "
      "a diagonal by a constant";
  if (!ctx.is_constant(0)) return ctx.error(unsupported);
  MEMFIT_ASSIGN_OR_RETURN(const HostTensor cond, ctx.constant(0));
  // Which branch is the fill constant; the mask is where the condition selects it.
  const std::optional<float> fx = scalar_of(ctx, 1), fy = scalar_of(ctx, 2);
  if (fx.has_value() == fy.has_value()) return ctx.error(unsupported);
  const int data = fx ? 2 : 1;
  const float fill = fx ? *fx : *fy;
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(data));
  const Shape& xs = ctx.shape_of(x);
  if (xs.size() < 2 || cond.shape.size() < 2 || cond.shape.size() > xs.size()) return ctx.error(unsupported);
  const int64_t tq = xs[xs.size() - 2], tk = xs[xs.size() - 1];
  const int64_t cq = cond.shape[cond.shape.size() - 2], ck = cond.shape.back();
  if ((cq != tq && cq != 1) || ck != tk || num_elements(cond.shape) != cq * ck) return ctx.error(unsupported);
  auto masked = [&](int64_t i, int64_t j) {
    const bool c = cond.integer(static_cast<size_t>((cq == 1 ? 0 : i) * ck + j)) != 0;
    return fx ? c : !c;
  };
  // The offset: the first masked key of row 0, less one.
  int64_t first = tk;
  for (int64_t j = 0; j < tk; ++j) {
    if (masked(0, j)) {
      first = j;
      break;
    }
  }
  const int64_t offset = first - 1;
  for (int64_t i = 0; i < tq; ++i) {
    for (int64_t j = 0; j < tk; ++j) {
      if (masked(i, j) != (j > i + offset)) return ctx.error(unsupported);
    }
  }
  const float value = std::isfinite(fill) ? fill : kAttentionMaskValue;
  return bind(ctx, ctx.op(OpKind::causal_mask, {x}, CausalMaskAttrs{value, offset}));
}

Status reduce_mean(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"axes", "keepdims"}));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  const size_t rank = ctx.shape_of(x).size();
  std::vector<int64_t> all(rank);
  std::iota(all.begin(), all.end(), 0);
  MEMFIT_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.attr_ints("axes", all));
  for (int64_t& a : axes) {
    MEMFIT_ASSIGN_OR_RETURN(a, axis_of(ctx, a, rank));
  }
  std::sort(axes.begin(), axes.end());
  MEMFIT_ASSIGN_OR_RETURN(const int64_t keepdims, ctx.attr_int("keepdims", 1));
  return bind(ctx, ctx.op(OpKind::reduce_mean, {x}, ReduceAttrs{axes, keepdims != 0}));
}

Status cast(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({"to", "saturate"}));
  MEMFIT_ASSIGN_OR_RETURN(const int64_t to, ctx.attr_int("to", 0));
  MEMFIT_ASSIGN_OR_RETURN(const DType from, ctx.dtype(0));
  const bool to_float = to == onnx::TensorProto::FLOAT;
  const bool to_int = to == onnx::TensorProto::INT64 || to == onnx::TensorProto::INT32;
  if ((from == DType::f32 && to_float) || (from == DType::i32 && to_int)) return identity(ctx);
  return ctx.error("a Cast of computed data between float and integer is not supported");
}

Status expand(Ctx& ctx) {
  MEMFIT_RETURN_IF_ERROR(ctx.only_attrs({}));
  MEMFIT_ASSIGN_OR_RETURN(const ValueId x, ctx.value(0));
  MEMFIT_ASSIGN_OR_RETURN(const HostTensor spec, ctx.constant(1));
  auto shape = ops::broadcast_shapes(ctx.shape_of(x), spec.integers());
  if (!shape) return ctx.error(shape.message());
  if (*shape == ctx.shape_of(x)) return bind(ctx, x);
  return bind(ctx, ctx.op(OpKind::broadcast_to, {x}, ShapeAttrs{*shape}));
}

// Operators that fold_constants computes on known tensors and that have no
// mapping onto computed data.
Status known_only(Ctx& ctx) {
  return ctx.error(ctx.node().op_type() +
                   " is supported only on tensors known at import (constants and static "
                   "shapes), not on data the graph computes");
}

}  // namespace

const std::unordered_map<std::string, OperatorMapping>& operator_mappings() {
  static const std::unordered_map<std::string, OperatorMapping> mappings = {
      {"Add", binary("Add")},
      {"AveragePool", pool(false)},
      {"BatchNormalization", batch_normalization},
      {"Cast", cast},
      {"Concat", concat},
      {"Conv", conv},
      {"ConvTranspose", conv_transpose},
      {"Div", binary("Div")},
      {"Dropout", dropout},
      {"Erf", erf},
      {"Expand", expand},
      {"Flatten", flatten},
      {"Gather", gather},
      {"Gelu", unary(OpKind::gelu)},
      {"Gemm", gemm},
      {"GlobalAveragePool", global_average_pool},
      {"Identity", identity},
      {"Sqrt", sqrt},
      {"Neg", known_only},
      {"Equal", known_only},
      {"Less", known_only},
      {"Greater", known_only},
      {"Not", known_only},
      {"Range", known_only},
      {"ConstantOfShape", known_only},
      {"Trilu", known_only},
      {"LayerNormalization", layer_normalization},
      {"LogSoftmax", softmax(OpKind::log_softmax)},
      {"MatMul", matmul},
      {"MaxPool", pool(true)},
      {"Mul", binary("Mul")},
      {"Pow", pow},
      {"ReduceMean", reduce_mean},
      {"Relu", unary(OpKind::relu)},
      {"Reshape", reshape},
      {"Sigmoid", unary(OpKind::sigmoid)},
      {"Slice", slice},
      {"Softmax", softmax(OpKind::softmax)},
      {"Split", split},
      {"Squeeze", squeeze(false)},
      {"Sub", binary("Sub")},
      {"Tanh", unary(OpKind::tanh)},
      {"Transpose", transpose},
      {"Unsqueeze", squeeze(true)},
      {"Where", where},
  };
  return mappings;
}

}  // namespace memfit
#endif  // MEMFIT_HAVE_ONNX
