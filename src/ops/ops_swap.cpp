// Copies between the device arena and the host pool, for swapping (Meng et
// al. 2017, TFLMS): to_host(x) -> h copies a device value to the host pool,
// to_device(h) -> x' copies it back, and swap_wait(x, h) marks the point by
// which the copy to_host(x) -> h has completed. The swap pass
// (src/passes/swap.cpp) inserts them after autodiff, so none has a gradient.
//
// Placement is decided by the op: the output of to_host lives in the host
// pool, every other value in the device arena. The executor runs to_host and
// to_device on its copy stream; the position of a to_host or to_device node in
// the schedule is when its copy starts. swap_wait has no output: it reads the
// copy's source x, so x stays allocated (for liveness, the planner and the
// plan verifier alike) until the copy has completed, and the executor waits
// there for the copy's event. Readers of a to_device output wait for that
// copy's event (the executor does).
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

Result<Types> infer_copy(const Types& in, const Attrs&) { return Types{in[0]}; }

// swap_wait(x, h): the source of the copy and its host copy, of one type.
Result<Types> infer_wait(const Types& in, const Attrs&) {
  if (in[0] != in[1]) {
    return Status::error("the source and the host copy differ: " + shape_string(in[0].shape) +
                         " and " + shape_string(in[1].shape));
  }
  return Types{};
}

// The bytes that cross the link; a copy does no arithmetic.
Cost copy_cost(const Types& in, const Types&, const Attrs&) {
  return Cost{0, static_cast<double>(num_elements(in[0].shape) * dtype_size(in[0].dtype))};
}

Cost no_cost(const Types&, const Types&, const Attrs&) { return Cost{}; }

OpInfo copy_op(OpKind op) {
  OpInfo info = ops::new_op(op);
  info.infer = infer_copy;
  info.cost = copy_cost;
  info.copy = true;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({2, 3, 4})}, NoAttrs{}),
                                  ops::example({ops::f32({7})}, NoAttrs{})};
  };
  return info;
}

}  // namespace

OpInfo op_info_to_host() { return copy_op(OpKind::to_host); }
OpInfo op_info_to_device() { return copy_op(OpKind::to_device); }

OpInfo op_info_swap_wait() {
  OpInfo info = ops::new_op(OpKind::swap_wait);
  info.infer = infer_wait;
  info.cost = no_cost;
  info.copy = true;
  info.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({2, 3}), ops::f32({2, 3})}, NoAttrs{})};
  };
  return info;
}

}  // namespace memfit
