// The gradient all-reduce of data-parallel training (DESIGN.md, Distributed),
// inserted after autodiff by the pass of src/passes/all_reduce.h, so neither
// op has a gradient rule.
//
// all_reduce_start(g_1 .. g_k) -> b packs the bucket's gradients into one
// buffer b (BucketAttrs' offsets: each gradient's bytes as they are laid out)
// on the compute stream; the executor then starts the sum of b over the ranks
// on its communication thread (the op is `comm`). The g_i die here: only b
// stays in the arena while the sum runs. all_reduce_wait(b) -> (r_1 .. r_k)
// waits for that sum (the executor waits for the start node's event before
// any reader of b) and unpacks it: r_i is the sum of g_i over the ranks, laid
// out as g_i.
#include <cstddef>

#include "ops/op_util.h"

namespace memfit {
namespace {

using ops::Types;

// The shapes of a bucket's gradients, checked against its offsets.
Result<Types> bucket_types(const BucketAttrs& a) {
  if (a.ranks < 1) return Status::error("a bucket needs at least one rank");
  if (a.ndims.empty() || a.offsets.size() != a.ndims.size() + 1 || a.offsets[0] != 0) {
    return Status::error("a bucket needs one offset per gradient and its end, from 0");
  }
  Types types;
  size_t d = 0;
  for (size_t i = 0; i < a.ndims.size(); ++i) {
    if (a.ndims[i] < 0 || d + static_cast<size_t>(a.ndims[i]) > a.dims.size()) {
      return Status::error("bucket gradient " + std::to_string(i) + " has no dimensions");
    }
    const Shape shape(a.dims.begin() + static_cast<std::ptrdiff_t>(d),
                      a.dims.begin() + static_cast<std::ptrdiff_t>(d + static_cast<size_t>(a.ndims[i])));
    d += static_cast<size_t>(a.ndims[i]);
    const TensorType type{shape, DType::f32};
    MEMFIT_RETURN_IF_ERROR(ops::expect_f32(type, -1, "a bucket gradient"));
    if (a.offsets[i + 1] - a.offsets[i] < num_elements(shape)) {
      return Status::error("bucket gradient " + std::to_string(i) + " " + shape_string(shape) +
                           " does not fit its " + std::to_string(a.offsets[i + 1] - a.offsets[i]) +
                           " floats");
    }
    types.push_back(type);
  }
  if (d != a.dims.size()) return Status::error("a bucket has dimensions left over");
  return types;
}

Result<Types> infer_start(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<BucketAttrs>(attrs);
  MEMFIT_ASSIGN_OR_RETURN(Types expected, bucket_types(a));
  if (in != expected) return Status::error("the inputs are not the bucket's gradients");
  return Types{ops::f32({a.offsets.back()})};
}

Result<Types> infer_wait(const Types& in, const Attrs& attrs) {
  const auto& a = std::get<BucketAttrs>(attrs);
  MEMFIT_ASSIGN_OR_RETURN(Types out, bucket_types(a));
  if (in[0] != ops::f32({a.offsets.back()})) {
    return Status::error("the input is not a bucket of " + std::to_string(a.offsets.back()) +
                         " floats");
  }
  return out;
}

// Packing and unpacking read and write the bucket once each way; the sum
// over the ranks is the communication thread's (all_reduce_wire_bytes).
Cost pack_cost(const Types& in, const Types& out, const Attrs&) {
  double bytes = 0;
  for (const Types* types : {&in, &out}) {
    for (const TensorType& t : *types) bytes += static_cast<double>(num_elements(t.shape)) * 4;
  }
  return Cost{0, bytes};
}

BucketAttrs example_bucket(int64_t ranks, std::vector<Shape> shapes, int64_t padding) {
  BucketAttrs a;
  a.ranks = ranks;
  a.offsets.push_back(0);
  for (const Shape& s : shapes) {
    a.dims.insert(a.dims.end(), s.begin(), s.end());
    a.ndims.push_back(static_cast<int64_t>(s.size()));
    a.offsets.push_back(a.offsets.back() + num_elements(s) + padding);
  }
  return a;
}

}  // namespace

double all_reduce_wire_bytes(const BucketAttrs& a) {
  // A ring all-reduce sends and receives 2 (N - 1) / N of the buffer per rank.
  const double n = static_cast<double>(a.ranks);
  return 2.0 * (n - 1.0) / n * static_cast<double>(a.offsets.back()) * 4.0;
}

void register_comm_ops(OpTableBuilder& table) {
  OpInfo start = ops::new_op(OpKind::all_reduce_start);
  start.infer = infer_start;
  start.cost = pack_cost;
  start.comm = true;
  start.examples = [] {
    return std::vector<OpExample>{
        ops::example({ops::f32({2, 3}), ops::f32({5})}, example_bucket(2, {{2, 3}, {5}}, 0)),
        ops::example({ops::f32({4})}, example_bucket(4, {{4}}, 0))};
  };
  table.add(start);
  OpInfo wait = ops::new_op(OpKind::all_reduce_wait);
  wait.infer = infer_wait;
  wait.cost = pack_cost;
  wait.examples = [] {
    return std::vector<OpExample>{ops::example({ops::f32({11})}, example_bucket(2, {{2, 3}, {5}}, 0)),
                                  ops::example({ops::f32({4})}, example_bucket(4, {{4}}, 0))};
  };
  table.add(wait);
}

}  // namespace memfit
