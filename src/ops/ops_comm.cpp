// The collectives of data-parallel training (docs/design.md, Distributed), inserted
// after autodiff by src/passes/all_reduce.h and src/passes/zero_shard.h, so
// none has a gradient rule. Each works on a bucket (BucketAttrs): tensors
// packed into one buffer, each tensor's bytes as they are laid out.
//
// A `*_start` op runs its kernel (packing) on the compute stream; the
// executor then starts its collective on the communication thread (the op is
// `comm`), and readers of its output wait for that collective:
//   all_reduce_start(g_1 .. g_k) -> b: b packs the g_i; then b = its sum over
//     the ranks. all_reduce_wait(b) -> (r_1 .. r_k) unpacks it.
//   reduce_scatter_start(g_1 .. g_k) -> b: b packs the g_i (zeros after
//     them); then block `rank` of the sum over the ranks lands in b's first
//     block. reduce_scatter_wait(b) -> s copies that block out: s is this
//     rank's shard of the summed gradients.
//   shard_pack(p_1 .. p_k) -> ps: block `rank` of the packed p_i (not comm).
//   all_gather_start(ps) -> pb: pb's block `rank` is ps; then every block is
//     its rank's. all_gather_wait(pb, p_1 .. p_k) -> (p'_1 .. p'_k) unpacks
//     pb; p'_i may be written over p_i, which it replaces.
// The inputs of a start die there: only its bucket stays in the arena while
// the collective runs.
#include <cstddef>

#include "ops/bucket_shapes.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// The shapes of a bucket's tensors, checked against its offsets and size
// (`sharded`: in equal blocks, one per rank).
Result<Types> bucket_types(const BucketAttrs& a, bool sharded) {
  if (a.ranks < 1 || a.rank < 0 || a.rank >= a.ranks) {
    return Status::error("a bucket needs at least one rank and a rank among them");
  }
  if (a.ndims.empty() || a.offsets.size() != a.ndims.size() + 1 || a.offsets[0] != 0) {
    return Status::error("a bucket needs one offset per tensor and its end, from 0");
  }
  if (a.size < a.offsets.back() || (sharded && a.size % a.ranks != 0)) {
    return Status::error("a bucket of " + std::to_string(a.size) + " floats does not hold its " +
                         std::to_string(a.offsets.back()) + " in " + std::to_string(a.ranks) +
                         " equal blocks");
  }
  size_t d = 0;
  for (size_t i = 0; i < a.ndims.size(); ++i) {
    if (a.ndims[i] < 0 || d + static_cast<size_t>(a.ndims[i]) > a.dims.size()) {
      return Status::error("bucket tensor " + std::to_string(i) + " has no dimensions");
    }
    d += static_cast<size_t>(a.ndims[i]);
  }
  if (d != a.dims.size()) return Status::error("a bucket has dimensions left over");
  Types types;
  const std::vector<Shape> shapes = bucket_shapes(a);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& shape = shapes[i];
    const TensorType type{shape, DType::f32};
    MEMFIT_RETURN_IF_ERROR(ops::expect_f32(type, -1, "a bucket tensor"));
    if (a.offsets[i + 1] - a.offsets[i] < num_elements(shape)) {
      return Status::error("bucket tensor " + std::to_string(i) + " " + shape_string(shape) +
                           " does not fit its " + std::to_string(a.offsets[i + 1] - a.offsets[i]) +
                           " floats");
    }
    types.push_back(type);
  }
  return types;
}

// The bucket's tensors in, one buffer of `floats` out.
Result<Types> packs(const Types& in, const BucketAttrs& a, int64_t floats, bool sharded) {
  MEMFIT_ASSIGN_OR_RETURN(Types expected, bucket_types(a, sharded));
  if (in != expected) return Status::error("the inputs are not the bucket's tensors");
  return Types{ops::f32({floats})};
}

// One buffer of `floats` (and, with `with_tensors`, the tensors it
// replaces) in, the bucket's tensors out.
Result<Types> unpacks(const Types& in, const BucketAttrs& a, int64_t floats, bool with_tensors) {
  // with_tensors: all_gather_wait, of a sharded bucket.
  MEMFIT_ASSIGN_OR_RETURN(Types out, bucket_types(a, with_tensors));
  if (in[0] != ops::f32({floats})) {
    return Status::error("input 0 is not a buffer of " + std::to_string(floats) + " floats");
  }
  if (with_tensors && Types(in.begin() + 1, in.end()) != out) {
    return Status::error("inputs 1.. are not the bucket's tensors");
  }
  if (!with_tensors && in.size() != 1) return Status::error("takes the buffer alone");
  return out;
}

const BucketAttrs& bucket(const Attrs& attrs) { return std::get<BucketAttrs>(attrs); }

Result<Types> infer_all_reduce_start(const Types& in, const Attrs& attrs) {
  return packs(in, bucket(attrs), bucket(attrs).size, false);
}
Result<Types> infer_reduce_scatter_start(const Types& in, const Attrs& attrs) {
  return packs(in, bucket(attrs), bucket(attrs).size, true);
}
Result<Types> infer_all_reduce_wait(const Types& in, const Attrs& attrs) {
  return unpacks(in, bucket(attrs), bucket(attrs).size, false);
}
Result<Types> infer_reduce_scatter_wait(const Types& in, const Attrs& attrs) {
  const BucketAttrs& a = bucket(attrs);
  MEMFIT_RETURN_IF_ERROR(bucket_types(a, true).status());
  if (in[0] != ops::f32({a.size})) return Status::error("the input is not the bucket");
  return Types{ops::f32({a.block()})};
}
Result<Types> infer_shard_pack(const Types& in, const Attrs& attrs) {
  return packs(in, bucket(attrs), bucket(attrs).block(), true);
}
Result<Types> infer_all_gather_start(const Types& in, const Attrs& attrs) {
  const BucketAttrs& a = bucket(attrs);
  MEMFIT_RETURN_IF_ERROR(bucket_types(a, true).status());
  if (in[0] != ops::f32({a.block()})) return Status::error("the input is not this rank's block");
  return Types{ops::f32({a.size})};
}
Result<Types> infer_all_gather_wait(const Types& in, const Attrs& attrs) {
  return unpacks(in, bucket(attrs), bucket(attrs).size, true);
}

// Packing and unpacking read and write their bytes once; the collective is
// the communication thread's (comm_wire_bytes).
Cost pack_cost(const Types& in, const Types& out, const Attrs&) {
  double bytes = 0;
  for (const Types* types : {&in, &out}) {
    for (const TensorType& t : *types) bytes += static_cast<double>(num_elements(t.shape)) * 4;
  }
  return Cost{0, bytes};
}

BucketAttrs example_bucket(int64_t ranks, int64_t rank, std::vector<Shape> shapes) {
  BucketAttrs a;
  a.ranks = ranks;
  a.rank = rank;
  a.offsets.push_back(0);
  for (const Shape& s : shapes) {
    a.dims.insert(a.dims.end(), s.begin(), s.end());
    a.ndims.push_back(static_cast<int64_t>(s.size()));
    a.offsets.push_back(a.offsets.back() + num_elements(s));
  }
  a.size = (a.offsets.back() + ranks - 1) / ranks * ranks;
  return a;
}

OpInfo bucket_op(OpKind op, InferFn infer, bool comm, std::vector<OpExample> (*examples)()) {
  OpInfo info = ops::new_op(op);
  info.infer = infer;
  info.cost = pack_cost;
  info.comm = comm;
  info.examples = examples;
  return info;
}

// Two examples each: two tensors over 3 ranks (rank 1; the bucket padded from
// 11 to 12 floats), one tensor alone over 4 ranks (rank 3).
const BucketAttrs kTwo = example_bucket(3, 1, {{2, 3}, {5}});
const BucketAttrs kOne = example_bucket(4, 3, {{4}});

std::vector<OpExample> tensors_examples() {
  return {ops::example({ops::f32({2, 3}), ops::f32({5})}, kTwo),
          ops::example({ops::f32({4})}, kOne)};
}
std::vector<OpExample> bucket_examples() {
  return {ops::example({ops::f32({kTwo.size})}, kTwo), ops::example({ops::f32({kOne.size})}, kOne)};
}
std::vector<OpExample> block_examples() {
  return {ops::example({ops::f32({kTwo.block()})}, kTwo),
          ops::example({ops::f32({kOne.block()})}, kOne)};
}
std::vector<OpExample> gather_wait_examples() {
  return {ops::example({ops::f32({kTwo.size}), ops::f32({2, 3}), ops::f32({5})}, kTwo),
          ops::example({ops::f32({kOne.size}), ops::f32({4})}, kOne)};
}

}  // namespace

std::vector<Shape> bucket_shapes(const BucketAttrs& a) {
  std::vector<Shape> shapes;
  auto first = a.dims.begin();
  for (int64_t rank : a.ndims) {
    shapes.emplace_back(first, first + static_cast<std::ptrdiff_t>(rank));
    first += static_cast<std::ptrdiff_t>(rank);
  }
  return shapes;
}

double comm_wire_bytes(OpKind op, const BucketAttrs& a) {
  // Ring algorithms: a reduce-scatter or an all-gather sends and receives
  // (N - 1) / N of the buffer per rank; an all-reduce is one of each.
  const double n = static_cast<double>(a.ranks);
  const double bytes = static_cast<double>(a.size) * 4.0 * (n - 1.0) / n;
  return op == OpKind::all_reduce_start ? 2.0 * bytes : bytes;
}

OpInfo op_info_all_reduce_start() {
  return bucket_op(OpKind::all_reduce_start, infer_all_reduce_start, true, tensors_examples);
}
OpInfo op_info_all_reduce_wait() {
  return bucket_op(OpKind::all_reduce_wait, infer_all_reduce_wait, false, bucket_examples);
}
OpInfo op_info_reduce_scatter_start() {
  return bucket_op(OpKind::reduce_scatter_start, infer_reduce_scatter_start, true,
                   tensors_examples);
}
OpInfo op_info_reduce_scatter_wait() {
  return bucket_op(OpKind::reduce_scatter_wait, infer_reduce_scatter_wait, false, bucket_examples);
}
OpInfo op_info_shard_pack() {
  return bucket_op(OpKind::shard_pack, infer_shard_pack, false, tensors_examples);
}
OpInfo op_info_all_gather_start() {
  return bucket_op(OpKind::all_gather_start, infer_all_gather_start, true, block_examples);
}
OpInfo op_info_all_gather_wait() {
  OpInfo info =
      bucket_op(OpKind::all_gather_wait, infer_all_gather_wait, false, gather_wait_examples);
  info.inplace_after_first = true;  // p'_i over p_i: parameters updated in place
  return info;
}

}  // namespace memfit
