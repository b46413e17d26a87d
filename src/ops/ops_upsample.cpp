// upsample (nearest or (bi/tri)linear, integer factors) and its gradient.
#include <string>

#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// x (N, C, S1[, S2[, S3]]) -> (N, C, S1 scale[0], ...): one factor per spatial dimension.
Result<Shape> upsample_output(const Shape& x, const std::vector<int64_t>& scale) {
  if (x.size() < 3 || x.size() > 5) {
    return Status::error("x must be (N, C, spatial...) with 1 to 3 spatial dimensions, got " +
                         shape_string(x));
  }
  if (scale.size() != x.size() - 2) {
    return Status::error("scale has " + std::to_string(scale.size()) + " factors for the " +
                         std::to_string(x.size() - 2) + " spatial dimensions of " +
                         shape_string(x));
  }
  Shape y{x[0], x[1]};
  for (size_t i = 0; i < scale.size(); ++i) {
    if (scale[i] < 1) return Status::error("every scale factor must be positive");
    // expect_f32 below bounds the element count; this keeps the product itself in int64.
    if (scale[i] > ops::kMaxElements / x[2 + i]) {
      return Status::error("the upsampled " + shape_string(x) + " has more than 2^48 elements");
    }
    y.push_back(x[2 + i] * scale[i]);
  }
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(y), -1, "the upsampled x"));
  return y;
}

Result<Types> infer_upsample(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<UpsampleAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "x (N, C, spatial...)"));
  if (!a.shape.empty()) {
    return Status::error("shape is upsample_grad's attribute; upsample takes it empty");
  }
  MEMFIT_ASSIGN_OR_RETURN(Shape y, upsample_output(in[0].shape, a.scale));
  return Types{ops::f32(y)};
}

// upsample_grad(dy) -> dx of attrs.shape.
Result<Types> infer_upsample_grad(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<UpsampleAttrs>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], -1, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(a.shape), -1, "shape"));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, upsample_output(a.shape, a.scale));
  if (y != in[0].shape) {
    return Status::error("dy " + shape_string(in[0].shape) + " should be " + shape_string(y));
  }
  return Types{ops::f32(a.shape)};
}

Status grad_upsample(GradContext& ctx) {
  const auto& a = ctx.attrs<UpsampleAttrs>();
  const UpsampleAttrs g{a.scale, a.linear, ctx.shape(ctx.in(0))};
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::upsample_grad, {ctx.dout(0)}, g));
  return Status::ok();
}

// Each element of the upsampled tensor (y, or dy for the gradient: input 0) is
// one copy (nearest) or a weighted sum of 2^K inputs (linear, K spatial dimensions).
template <bool kGrad>
Cost upsample_cost(const Types& in, const Types& out, const Attrs& attrs) {
  const auto& a = std::get<UpsampleAttrs>(attrs);
  const double big = static_cast<double>(num_elements(kGrad ? in[0].shape : out[0].shape));
  Cost cost;
  cost.flops = a.linear ? big * 2.0 * static_cast<double>(int64_t{1} << a.scale.size()) : big;
  cost.bytes = 4.0 * static_cast<double>(num_elements(in[0].shape) + num_elements(out[0].shape));
  return cost;
}

// One, two and three spatial dimensions; factors of 1 included, both modes.
std::vector<OpExample> upsample_examples() {
  return {ops::example({ops::f32({2, 3, 4})}, UpsampleAttrs{{2}, false, {}}),
          ops::example({ops::f32({2, 2, 5})}, UpsampleAttrs{{3}, true, {}}),
          ops::example({ops::f32({1, 2, 3, 4})}, UpsampleAttrs{{2, 3}, false, {}}),
          ops::example({ops::f32({2, 1, 3, 3})}, UpsampleAttrs{{2, 2}, true, {}}),
          ops::example({ops::f32({1, 2, 2, 3})}, UpsampleAttrs{{3, 1}, true, {}}),
          ops::example({ops::f32({1, 2, 2, 3, 2})}, UpsampleAttrs{{2, 2, 2}, false, {}}),
          ops::example({ops::f32({1, 1, 3, 2, 3})}, UpsampleAttrs{{1, 2, 3}, true, {}})};
}

std::vector<OpExample> upsample_grad_examples() {
  std::vector<OpExample> out;
  for (const OpExample& fwd : upsample_examples()) {
    const auto& a = std::get<UpsampleAttrs>(fwd.attrs);
    const Shape y = *upsample_output(fwd.inputs[0].shape, a.scale);
    out.push_back(
        ops::example({ops::f32(y)}, UpsampleAttrs{a.scale, a.linear, fwd.inputs[0].shape}));
  }
  return out;
}

}  // namespace

OpInfo op_info_upsample() {
  OpInfo info = ops::new_op(OpKind::upsample);
  info.infer = infer_upsample;
  info.grad = grad_upsample;
  info.cost = upsample_cost<false>;
  info.examples = upsample_examples;
  return info;
}

OpInfo op_info_upsample_grad() {
  OpInfo info = ops::new_op(OpKind::upsample_grad);
  info.infer = infer_upsample_grad;
  info.cost = upsample_cost<true>;
  info.examples = upsample_grad_examples;
  info.emitted_by = {OpKind::upsample};
  return info;
}

}  // namespace memfit
