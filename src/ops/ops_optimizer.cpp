// Optimizer updates: SGD with momentum and weight decay, and AdamW. Their
// outputs are the next parameters and moments (Graph::updates), written in
// place over the current ones when the planner allows it.
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// (w, g, [v]) -> (w', [v']); v is present exactly when momentum != 0.
Result<Types> infer_sgd(const Types& in, const Attrs& attrs) {
  const bool momentum = std::get<SgdAttrs>(attrs).momentum != 0.0f;
  if (in.size() != (momentum ? 3u : 2u)) {
    return Status::error(momentum ? "momentum needs the inputs (w, g, v)"
                                  : "without momentum the inputs are (w, g)");
  }
  MEMFIT_ASSIGN_OR_RETURN(Types same, ops::same_as_all_inputs(in, attrs));
  return momentum ? Types{same[0], same[0]} : Types{same[0]};
}

// (w, g, m, v) -> (w', m', v')
Result<Types> infer_adamw(const Types& in, const Attrs& attrs) {
  MEMFIT_ASSIGN_OR_RETURN(Types same, ops::same_as_all_inputs(in, attrs));
  return Types{same[0], same[0], same[0]};
}

}  // namespace

OpInfo op_info_sgd_update() {
  OpInfo info = ops::new_op(OpKind::sgd_update);
  info.stateful = true;
  info.infer = infer_sgd;
  info.inplace = {{0, 0}, {2, 1}};
  info.examples = [] {
    return std::vector<OpExample>{
        ops::example({ops::f32({3, 4}), ops::f32({3, 4}), ops::f32({3, 4})}, SgdAttrs{0.1f, 0.9f, 1e-4f}),
        ops::example({ops::f32({5}), ops::f32({5})}, SgdAttrs{0.05f, 0.0f, 0.0f}),
        // Convolution weights' shape: the cpu backend's blocked layouts.
        ops::example({ops::f32({4, 10, 3, 3}), ops::f32({4, 10, 3, 3}), ops::f32({4, 10, 3, 3})},
                     SgdAttrs{0.1f, 0.9f, 1e-4f})};
  };
  return info;
}

OpInfo op_info_adamw_update() {
  OpInfo info = ops::new_op(OpKind::adamw_update);
  info.stateful = true;
  info.infer = infer_adamw;
  info.inplace = {{0, 0}, {2, 1}, {3, 2}};
  info.examples = [] {
    OpExample ex = ops::example({ops::f32({3, 4}), ops::f32({3, 4}), ops::f32({3, 4}), ops::f32({3, 4})},
                                AdamWAttrs{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f});
    ex.init = {InputInit{}, InputInit{}, InputInit{}, InputInit{InputInit::positive}};
    OpExample weights = ex;  // convolution weights' shape: the cpu backend's blocked layouts
    const auto w = ops::f32({4, 10, 3, 3});
    weights.inputs = {w, w, w, w};
    return std::vector<OpExample>{ex, weights};
  };
  return info;
}

}  // namespace memfit
