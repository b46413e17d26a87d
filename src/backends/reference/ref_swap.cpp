// The copy ops of swapping (src/ops/ops_swap.cpp), which the executor runs on
// its copy stream, reorder (plain to plain, the only layouts this backend
// reads), and the packing of the all-reduce's buckets (src/ops/ops_comm.cpp):
// the kernels only move bytes.
#include <algorithm>
#include <cstring>

#include "backends/reference/ref_ops.h"

namespace memfit {
namespace {

void copy(const RefCall& call) {
  const size_t bytes =
      static_cast<size_t>(num_elements(call.in[0].shape)) * dtype_size(call.in[0].dtype);
  std::memcpy(call.args.outputs[0], call.args.inputs[0], bytes);
}

}  // namespace

void ref_to_host(const RefCall& call) { copy(call); }
void ref_to_device(const RefCall& call) { copy(call); }
void ref_reorder(const RefCall& call) { copy(call); }

// The wait itself is the executor's (it waits for the copy's event); no data moves.
void ref_swap_wait(const RefCall&) {}

// The buckets of data parallelism (src/ops/ops_comm.cpp): tensor i at its
// offsets, its bytes as laid out (padding included), zeros after the last
// one. The collectives themselves are the executor's, on its communication
// thread.
namespace {

const BucketAttrs& bucket_of(const RefCall& call) { return call.attrs<BucketAttrs>(); }

size_t floats(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }

// The floats [from, from + count) of the packed tensors into `to`.
void pack_range(const RefCall& call, int64_t from, int64_t count, float* to) {
  const auto& offsets = bucket_of(call).offsets;
  std::memset(to, 0, floats(count));
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    const int64_t lo = std::max(offsets[i], from);
    const int64_t hi = std::min(offsets[i + 1], from + count);
    if (lo >= hi) continue;
    std::memcpy(to + (lo - from), static_cast<const float*>(call.args.inputs[i]) + (lo - offsets[i]),
                floats(hi - lo));
  }
}

// The bucket at `from` into the tensors, outputs 0..k-1.
void unpack(const RefCall& call, const float* from) {
  const auto& offsets = bucket_of(call).offsets;
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    std::memcpy(call.args.outputs[i], from + offsets[i], floats(offsets[i + 1] - offsets[i]));
  }
}

}  // namespace

void ref_all_reduce_start(const RefCall& call) {
  pack_range(call, 0, bucket_of(call).size, static_cast<float*>(call.args.outputs[0]));
}
void ref_reduce_scatter_start(const RefCall& call) { ref_all_reduce_start(call); }

void ref_all_reduce_wait(const RefCall& call) {
  unpack(call, static_cast<const float*>(call.args.inputs[0]));
}
void ref_all_gather_wait(const RefCall& call) { ref_all_reduce_wait(call); }

void ref_reduce_scatter_wait(const RefCall& call) {
  // The collective left this rank's block of the sum at the bucket's start.
  std::memcpy(call.args.outputs[0], call.args.inputs[0], floats(bucket_of(call).block()));
}

void ref_shard_pack(const RefCall& call) {
  const BucketAttrs& a = bucket_of(call);
  pack_range(call, a.rank * a.block(), a.block(), static_cast<float*>(call.args.outputs[0]));
}

void ref_all_gather_start(const RefCall& call) {
  const BucketAttrs& a = bucket_of(call);
  auto* bucket = static_cast<float*>(call.args.outputs[0]);
  // The other blocks are the collective's to fill; zeros until then.
  std::memset(bucket, 0, floats(a.size));
  std::memcpy(bucket + a.rank * a.block(), call.args.inputs[0], floats(a.block()));
}

}  // namespace memfit
