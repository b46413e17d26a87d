// ZeRO (Rajbhandari et al. 2020) as a graph rewrite of a data-parallel step:
// each of the N ranks keeps the optimizer state of 1/N of the parameters
// (stage 1, Shard::optimizer), and with Shard::gradients (stage 2) also
// keeps only 1/N of the summed gradients past their bucket.
//
// Input invariants: as the all-reduce pass (src/passes/all_reduce.h), and
// every update node of one op with one set of attributes (one optimizer),
// reading (parameter, gradient, state...) with elementwise math.
//
// Buckets are those of src/passes/grad_buckets.h, each padded to a multiple
// of N floats and cut into N equal blocks; rank r owns block r of every
// bucket: a range of the bucket's parameters laid end to end (bytes as laid
// out, so a block may hold parts of several parameters).
// 1. reduce_scatter_start(g_1 .. g_k) -> b where the bucket is complete;
//    reduce_scatter_wait(b) -> s (rank r's block of the summed gradients):
//    with Shard::optimizer just before the bucket's first update (b, the
//    whole bucket, lives until then, as the all-reduce's); with
//    Shard::gradients where the next bucket is complete (only s, 1/N of the
//    bucket, lives from there to the updates).
// 2. At the bucket's first update: shard_pack(p_1 .. p_k) -> ps (rank r's
//    block of the parameters); the update op on (ps, s, state blocks) with
//    the original attributes, whose state is one new persistent input per
//    kind of state, `zero.bucket<j><suffix>` (suffix as the per-parameter
//    state's: .momentum, .adam_m, .adam_v), of one block; then
//    all_gather_start(ps') -> pb.
// 3. all_gather_wait(pb, p_1 .. p_k) -> p'_i, written over p_i, at the next
//    bucket's update (the end of the graph for the last), and p_i := p'_i.
// The original update nodes and their per-parameter state are dropped.
//
// Guarantees: a verified graph; each element of each parameter gets the
// update of the unsharded step from the same sums (bit-identical where the
// reduce-scatter adds as the all-reduce does); the optimizer state per rank
// is the bucket bytes / N.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "memfit/ir.h"
#include "passes/all_reduce.h"

namespace memfit {

struct ShardOptions {
  int64_t ranks = 1;
  int64_t rank = 0;
  size_t bucket_bytes = 0;
  bool gradients = false;  // stage 2
};

// One bucket's sharded state: which per-parameter states its blocks stand
// for (checkpoints convert between the two).
struct ShardedState {
  std::string name;                     // zero.bucket<j><suffix>
  std::string suffix;                   // .momentum, .adam_m, .adam_v
  BucketAttrs bucket;                   // its parameters' shapes and offsets, this rank's block
  std::vector<std::string> parameters;  // in bucket order
  std::vector<Layout> layouts;          // theirs (the state has its parameter's)
};

struct ShardSummary {
  AllReduceSummary buckets;
  std::vector<ShardedState> states;
};

Result<Graph> shard_step(Graph graph, const ShardOptions& options, ShardSummary* summary = nullptr);

}  // namespace memfit
