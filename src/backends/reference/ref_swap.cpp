// The copy ops of swapping (src/ops/ops_swap.cpp), which the executor runs on
// its copy stream, and the packing of the all-reduce's buckets
// (src/ops/ops_comm.cpp): the kernels only move bytes.
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


// A bucket of the all-reduce (src/ops/ops_comm.cpp): gradient i at its
// offsets, its bytes as laid out (padding included). The sum over the ranks
// is the executor's, on its communication thread.
void ref_bucket_pack(const RefCall& call) {
  const auto& offsets = call.attrs<BucketAttrs>().offsets;
  auto* bucket = static_cast<float*>(call.args.outputs[0]);
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    std::memcpy(bucket + offsets[i], call.args.inputs[i],
                static_cast<size_t>(offsets[i + 1] - offsets[i]) * sizeof(float));
  }
}

void ref_bucket_unpack(const RefCall& call) {
  const auto& offsets = call.attrs<BucketAttrs>().offsets;
  const auto* bucket = static_cast<const float*>(call.args.inputs[0]);
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    std::memcpy(call.args.outputs[i], bucket + offsets[i],
                static_cast<size_t>(offsets[i + 1] - offsets[i]) * sizeof(float));
  }
}

}  // namespace memfit
