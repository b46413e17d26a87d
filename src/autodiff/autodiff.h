// Reverse-mode differentiation over the op table, and the optimizer-update
// nodes that complete a training step. Both append to the same graph, so one
// graph is one step.
#pragma once

#include <string>
#include <vector>

#include "memfit/ir.h"
#include "memfit/optimizer.h"

namespace memfit {

// Appends the backward pass of `loss` (an f32 scalar): the gradient of
// loss_scale * loss with respect to each of `wrt`, in order. A value the loss
// does not depend on gets a gradient of zeros.
Result<std::vector<ValueId>> append_gradients(Graph& graph, ValueId loss,
                                              const std::vector<ValueId>& wrt,
                                              float loss_scale = 1.0f);


// What the step does with the gradients of the parameters.
enum class UpdateMode {
  apply,                 // update the parameters with this step's gradients
  accumulate,            // add them to persistent accumulators (`<param>.grad_acc`)
  accumulate_and_apply,  // update with accumulators + this step's gradients, zero the accumulators
};

// Appends the optimizer's nodes for each (parameter, gradient) pair, adds the
// optimizer state as graph inputs (role optimizer_state, named after the
// parameter: `.momentum`, `.adam_m`, `.adam_v`, `.grad_acc`), and registers the
// new values as updates. Optimizer state starts at zero. A learning rate of 0
// is the optimizer's default (default_learning_rate).
Status append_optimizer(Graph& graph, const std::vector<ValueId>& params,
                        const std::vector<ValueId>& grads, const OptimizerConfig& config,
                        UpdateMode mode);

// Removes nodes none of whose outputs reach a graph output or an update.
Graph remove_dead_nodes(const Graph& graph);

}  // namespace memfit
