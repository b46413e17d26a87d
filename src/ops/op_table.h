// The op table: for every op of include/memfit/op_list.h (which gives its
// arity) its flags, shape inference, gradient rule, in-place pairs, i32
// inputs, cost and test examples.
// One family of ops is defined per file (ops_*.cpp), whose op_info_<op>()
// makes each op's row; op_table.cpp builds the table from the list, so an op
// of the list without its function fails to link.
#pragma once

#include <vector>

#include "memfit/ir.h"

namespace memfit {

struct GradContext;  // src/ops/grad_context.h

struct Cost {
  double flops = 0;  // arithmetic operations
  double bytes = 0;  // bytes read and written
};

// May output `output` be written into the buffer of input `input`? Kernels of
// ops that list a pair must give correct results when the two pointers alias.
struct InplacePair {
  int input = 0;
  int output = 0;
};

// How a test fills an input of an example.
struct InputInit {
  // distinct: values 0.1 apart and 0.05 or more away from zero, in random
  // order, so that a finite difference never crosses a kink (relu, max).
  enum Kind { normal, positive, labels, distinct } kind = normal;
  int64_t classes = 0;  // labels: values in [0, classes)
};

// A small instance of an op, for the gradient and backend tests.
struct OpExample {
  std::vector<TensorType> inputs;
  Attrs attrs;
  std::vector<InputInit> init;  // one per input; empty means all normal
  std::vector<int> wrt;         // inputs to check gradients of; empty means all f32 inputs
  std::vector<int> of;          // outputs summed into the checked loss; empty means all
};

using InferFn = Result<std::vector<TensorType>> (*)(const std::vector<TensorType>& inputs,
                                                    const Attrs& attrs);
using GradFn = Status (*)(GradContext& ctx);
using CostFn = Cost (*)(const std::vector<TensorType>& inputs,
                        const std::vector<TensorType>& outputs, const Attrs& attrs);
using ExamplesFn = std::vector<OpExample> (*)();
using RecomputeFormFn = Node (*)(const Node& original);

struct OpInfo {
  OpKind op{};
  bool stateful = false;  // some outputs are the next value of state (running stats, weights)
  InferFn infer = nullptr;
  // The inputs that hold i32 (ids, labels, masks), which every backend's
  // kernels read as such (has_op_dtypes); the others are f32.
  std::vector<int> i32_inputs;
  GradFn grad = nullptr;  // null: not differentiable (gradient and optimizer ops)
  std::vector<InplacePair> inplace;
  // Output i may be written over input i + 1, for every output (a variadic
  // op whose first input is a buffer it unpacks: all_gather_wait).
  bool inplace_after_first = false;
  CostFn cost = nullptr;  // null: one flop per output element, all tensors moved once
  ExamplesFn examples = nullptr;
  // For ops without a gradient rule: the differentiable op whose gradient rule
  // emits this one, so its gradient check covers it (none for optimizer ops).
  std::vector<OpKind> emitted_by;
  // A copy-engine op (to_host, to_device, swap_wait: src/ops/ops_swap.cpp): the
  // executor runs it on the copy stream; passes insert it after autodiff, so it
  // has no gradient rule.
  bool copy = false;
  // A communication op (all_reduce_start: src/ops/ops_comm.cpp): after its
  // kernel, the executor starts a collective on its output on the
  // communication thread; readers of the output wait for it. Inserted after
  // autodiff, so it has no gradient rule.
  bool comm = false;
  // What recomputation (src/passes/recompute.h) knows of the op. Cheap enough
  // to recompute for every backward reader (mirror): eltwise activations,
  // batch norm, dropout, scale, add, sub, mul, reshape, transpose.
  bool cheap_to_recompute = false;
  std::vector<int> kept_outputs;                // forward outputs never dropped (always_kept)
  RecomputeFormFn recompute_form_of = nullptr;  // null: a clone is a copy (recompute_form)
};

const OpInfo& op_info(OpKind op);
// Shape inference with arity checks; errors say which op and why.
Result<std::vector<TensorType>> infer_types(OpKind op, const std::vector<TensorType>& inputs,
                                            const Attrs& attrs);
Cost op_cost(const Graph& graph, const Node& node);
// The in-place pairs of `node`: its op's `inplace`, or one per output with
// inplace_after_first.
std::vector<InplacePair> inplace_pairs(const Node& node);

// Forward outputs the recompute pass never drops (besides graph outputs and
// the next values of state updates), its op's kept_outputs: batch norm's batch
// statistics, mean and var (C floats each), so that its clones normalize with
// them (recompute_form).
bool always_kept(const Node& node, size_t output);

// The node the recompute pass inserts to recompute forward node `original`: a
// copy of it, or its op's recompute_form_of (batch norm's, in ops_norm.cpp).
// The cost-driven strategies price a clone by this node; its inputs and
// outputs are the original's values.
Node recompute_form(const Node& original);

// Whether the inputs of `node` are i32 where its op's i32_inputs says and f32
// elsewhere, and its outputs f32: the dtypes the backends' kernels take (but
// those that move the bytes of any dtype).
bool has_op_dtypes(const Graph& graph, const Node& node);

// The row of each op, defined by its family's ops_*.cpp file.
#define MEMFIT_OP_INFO_DECLARATION(id, attrs, min_inputs, max_inputs) OpInfo op_info_##id();
MEMFIT_OPS(MEMFIT_OP_INFO_DECLARATION)
#undef MEMFIT_OP_INFO_DECLARATION

// The bytes one rank sends and receives for the collective of `op` (a comm
// op) on `bucket` with ring algorithms: (N - 1) / N of the bucket's bytes for
// a reduce-scatter or an all-gather, twice that for an all-reduce.
double comm_wire_bytes(OpKind op, const BucketAttrs& bucket);

}  // namespace memfit
