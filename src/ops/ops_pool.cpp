// Pooling: max and average over 2-D and 3-D windows, global average, and
// their gradients. The 2-D and 3-D ops share one set of rules, written once
// over the attribute structs (Pool2dAttrs, Pool3dAttrs and their Grad forms).
#include <array>
#include <tuple>

#include "ops/grad_context.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// What differs between the 2-D and the 3-D ops.
template <class A>
struct PoolFamily;

template <>
struct PoolFamily<Pool2dAttrs> {
  using Grad = Pool2dGradAttrs;
  static constexpr OpKind max = OpKind::max_pool2d;
  static constexpr OpKind max_grad = OpKind::max_pool2d_grad;
  static constexpr OpKind avg = OpKind::avg_pool2d;
  static constexpr OpKind avg_grad = OpKind::avg_pool2d_grad;
  static constexpr const char* x_name = "x (N, C, H, W)";
};

template <>
struct PoolFamily<Pool3dAttrs> {
  using Grad = Pool3dGradAttrs;
  static constexpr OpKind max = OpKind::max_pool3d;
  static constexpr OpKind max_grad = OpKind::max_pool3d_grad;
  static constexpr OpKind avg = OpKind::avg_pool3d;
  static constexpr OpKind avg_grad = OpKind::avg_pool3d_grad;
  static constexpr const char* x_name = "x (N, C, D, H, W)";
};

// The rank of x: (N, C) and one dimension per window entry.
template <class A>
constexpr int kRank = static_cast<int>(std::tuple_size_v<decltype(A::kernel)>) + 2;

// x (N, C, spatial...) -> (N, C, pooled spatial...), one window entry per spatial dimension.
template <size_t K>
Result<Shape> pool_output(const Shape& x, const std::array<int64_t, K>& kernel,
                          const std::array<int64_t, K>& stride, const std::array<int64_t, K>& pad) {
  Shape y{x[0], x[1]};
  for (size_t i = 0; i < K; ++i) {
    if (kernel[i] < 1 || kernel[i] > ops::kMaxElements) {
      return Status::error("the kernel must be positive and below 2^48");
    }
    if (stride[i] < 1 || pad[i] < 0 || stride[i] > ops::kMaxElements ||
        pad[i] > ops::kMaxElements) {
      return Status::error("stride must be positive and pad non-negative, both below 2^48");
    }
    // A window made only of padding would have no maximum and nothing to average.
    if (pad[i] >= kernel[i]) return Status::error("pad must be smaller than the kernel");
    y.push_back(ops::window_out(x[2 + i], kernel[i], stride[i], pad[i], 1));
    if (y.back() < 1) return Status::error("the pooling window does not fit " + shape_string(x));
  }
  return y;
}

template <class A>
Result<Types> infer_pool(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<A>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], kRank<A>, PoolFamily<A>::x_name));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, pool_output(in[0].shape, a.kernel, a.stride, a.pad));
  return Types{ops::f32(y)};
}

// max_pool{2,3}d_grad(dy, x) -> dx like x.
template <class A>
Result<Types> infer_max_pool_grad(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<A>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], kRank<A>, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[1], kRank<A>, "x"));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, pool_output(in[1].shape, a.kernel, a.stride, a.pad));
  if (y != in[0].shape) return Status::error("dy " + shape_string(in[0].shape) + " should be " + shape_string(y));
  return Types{in[1]};
}

// avg_pool{2,3}d_grad(dy) -> dx of attrs.shape.
template <class A>
Result<Types> infer_avg_pool_grad(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<typename PoolFamily<A>::Grad>(attrs);
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], kRank<A>, "dy"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(a.shape), kRank<A>, "shape"));
  MEMFIT_ASSIGN_OR_RETURN(Shape y, pool_output(a.shape, a.kernel, a.stride, a.pad));
  if (y != in[0].shape) return Status::error("dy " + shape_string(in[0].shape) + " should be " + shape_string(y));
  return Types{ops::f32(a.shape)};
}

Result<Types> infer_global_pool(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "x (N, C, H, W)"));
  return Types{ops::f32({in[0].shape[0], in[0].shape[1], 1, 1})};
}

Result<Types> infer_global_pool_grad(const Types& in, const Attrs& attrs) {
  const Shape& shape = std::get<ShapeAttrs>(attrs).shape;
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(in[0], 4, "dy (N, C, 1, 1)"));
  MEMFIT_RETURN_IF_ERROR(ops::expect_f32(ops::f32(shape), 4, "shape"));
  if (in[0].shape != Shape{shape[0], shape[1], 1, 1}) {
    return Status::error("dy " + shape_string(in[0].shape) + " does not match " + shape_string(shape));
  }
  return Types{ops::f32(shape)};
}

template <class A>
Status grad_max_pool(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(PoolFamily<A>::max_grad,
                                                       {ctx.dout(0), ctx.in(0)}, ctx.node.attrs));
  return Status::ok();
}

template <class A>
Status grad_avg_pool(GradContext& ctx) {
  const auto& a = ctx.attrs<A>();
  const typename PoolFamily<A>::Grad g{a.kernel, a.stride, a.pad, a.include_pad,
                                       ctx.shape(ctx.in(0))};
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(PoolFamily<A>::avg_grad, {ctx.dout(0)}, g));
  return Status::ok();
}

Status grad_global_pool(GradContext& ctx) {
  MEMFIT_ASSIGN_OR_RETURN(ctx.input_grads[0], ctx.emit(OpKind::global_avg_pool_grad, {ctx.dout(0)},
                                                       ShapeAttrs{ctx.shape(ctx.in(0))}));
  return Status::ok();
}

template <class A>
std::vector<OpExample> pool_examples();

template <>
std::vector<OpExample> pool_examples<Pool2dAttrs>() {
  return {ops::example({ops::f32({2, 2, 4, 4})}, Pool2dAttrs{{2, 2}, {2, 2}, {0, 0}, false}),
          ops::example({ops::f32({1, 3, 5, 6})}, Pool2dAttrs{{3, 2}, {2, 1}, {1, 1}, false}),
          ops::example({ops::f32({1, 2, 5, 5})}, Pool2dAttrs{{3, 3}, {2, 2}, {1, 1}, true})};
}

// Small enough for finite differences: at most 80 input elements each.
template <>
std::vector<OpExample> pool_examples<Pool3dAttrs>() {
  return {ops::example({ops::f32({1, 2, 4, 4, 2})},
                       Pool3dAttrs{{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, false}),
          ops::example({ops::f32({1, 1, 3, 5, 4})},
                       Pool3dAttrs{{3, 2, 2}, {2, 1, 2}, {1, 0, 1}, false}),
          ops::example({ops::f32({2, 1, 3, 4, 3})},
                       Pool3dAttrs{{2, 3, 3}, {1, 2, 2}, {1, 1, 1}, true})};
}

template <class A>
std::vector<OpExample> max_pool_examples() {
  std::vector<OpExample> out = pool_examples<A>();
  for (OpExample& ex : out) ex.init = {InputInit{InputInit::distinct}};
  return out;
}

template <class A>
std::vector<OpExample> max_pool_grad_examples() {
  std::vector<OpExample> out;
  for (const OpExample& fwd : pool_examples<A>()) {
    const auto& a = std::get<A>(fwd.attrs);
    const Shape y = *pool_output(fwd.inputs[0].shape, a.kernel, a.stride, a.pad);
    out.push_back(ops::example({ops::f32(y), fwd.inputs[0]}, a));
  }
  return out;
}

template <class A>
std::vector<OpExample> avg_pool_grad_examples() {
  std::vector<OpExample> out;
  for (const OpExample& fwd : pool_examples<A>()) {
    const auto& a = std::get<A>(fwd.attrs);
    const Shape y = *pool_output(fwd.inputs[0].shape, a.kernel, a.stride, a.pad);
    out.push_back(ops::example(
        {ops::f32(y)}, typename PoolFamily<A>::Grad{a.kernel, a.stride, a.pad, a.include_pad,
                                                    fwd.inputs[0].shape}));
  }
  return out;
}

// Each element of the pooled tensor (y, or dy for a gradient op: input 0)
// reads or writes its whole window; `G` is the attribute struct of the op.
template <class G, bool kGrad>
Cost window_cost(const Types& in, const Types& out, const Attrs& attrs) {
  double window = 1;
  for (int64_t k : std::get<G>(attrs).kernel) window *= static_cast<double>(k);
  Cost cost;
  cost.flops = window * static_cast<double>(num_elements(kGrad ? in[0].shape : out[0].shape));
  for (const auto* list : {&in, &out}) {
    for (const TensorType& t : *list) cost.bytes += 4.0 * num_elements(t.shape);
  }
  return cost;
}

// The max and average ops of one family and their gradient ops.
template <class A>
OpInfo max_pool_info() {
  OpInfo info = ops::new_op(PoolFamily<A>::max);
  info.infer = infer_pool<A>;
  info.grad = grad_max_pool<A>;
  info.cost = window_cost<A, false>;
  info.examples = max_pool_examples<A>;
  return info;
}

template <class A>
OpInfo max_pool_grad_info() {
  OpInfo info = ops::new_op(PoolFamily<A>::max_grad);
  info.infer = infer_max_pool_grad<A>;
  info.cost = window_cost<A, true>;
  info.examples = max_pool_grad_examples<A>;
  info.emitted_by = {PoolFamily<A>::max};
  return info;
}

template <class A>
OpInfo avg_pool_info() {
  OpInfo info = ops::new_op(PoolFamily<A>::avg);
  info.infer = infer_pool<A>;
  info.grad = grad_avg_pool<A>;
  info.cost = window_cost<A, false>;
  info.examples = pool_examples<A>;
  return info;
}

template <class A>
OpInfo avg_pool_grad_info() {
  OpInfo info = ops::new_op(PoolFamily<A>::avg_grad);
  info.infer = infer_avg_pool_grad<A>;
  info.cost = window_cost<typename PoolFamily<A>::Grad, true>;
  info.examples = avg_pool_grad_examples<A>;
  info.emitted_by = {PoolFamily<A>::avg};
  return info;
}

}  // namespace

OpInfo op_info_max_pool2d() { return max_pool_info<Pool2dAttrs>(); }
OpInfo op_info_max_pool2d_grad() { return max_pool_grad_info<Pool2dAttrs>(); }
OpInfo op_info_avg_pool2d() { return avg_pool_info<Pool2dAttrs>(); }
OpInfo op_info_avg_pool2d_grad() { return avg_pool_grad_info<Pool2dAttrs>(); }
OpInfo op_info_max_pool3d() { return max_pool_info<Pool3dAttrs>(); }
OpInfo op_info_max_pool3d_grad() { return max_pool_grad_info<Pool3dAttrs>(); }
OpInfo op_info_avg_pool3d() { return avg_pool_info<Pool3dAttrs>(); }
OpInfo op_info_avg_pool3d_grad() { return avg_pool_grad_info<Pool3dAttrs>(); }

OpInfo op_info_global_avg_pool() {
  OpInfo info = ops::new_op(OpKind::global_avg_pool);
  info.infer = infer_global_pool;
  info.grad = grad_global_pool;
  info.examples = [] { return std::vector<OpExample>{ops::example({ops::f32({2, 3, 4, 5})})}; };
  return info;
}

OpInfo op_info_global_avg_pool_grad() {
  OpInfo info = ops::new_op(OpKind::global_avg_pool_grad);
  info.infer = infer_global_pool_grad;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({2, 3, 1, 1})}, ShapeAttrs{{2, 3, 4, 5}})};
  };
  info.emitted_by = {OpKind::global_avg_pool};
  return info;
}

}  // namespace memfit
