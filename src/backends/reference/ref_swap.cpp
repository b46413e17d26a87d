// The copy ops of swapping (src/ops/ops_swap.cpp). The executor runs them on
// its copy stream; the kernels only move bytes.
#include <cstring>

#include "backends/reference/ref_ops.h"

namespace memfit {

void ref_copy(const RefCall& call) {
  const size_t bytes =
      static_cast<size_t>(num_elements(call.in[0].shape)) * dtype_size(call.in[0].dtype);
  std::memcpy(call.args.outputs[0], call.args.inputs[0], bytes);
}

// The wait itself is the executor's (it waits for the copy's event); no data moves.
void ref_swap_wait(const RefCall&) {}

}  // namespace memfit
