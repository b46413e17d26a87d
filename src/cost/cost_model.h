// The cost model: predicted seconds of every node of a graph, which the
// recomputation strategies `optimal` and `milp` minimize and `memfit plan`
// reports.
//
// Two sources, one interface (NodeSeconds: a function of a graph and one of
// its nodes, so strategies and tests can take any cost, synthetic ones too):
//  roofline: max(flops / peak FLOP/s, bytes / memory bandwidth) + a fixed
//            launch overhead per node, from the op table's Cost (flops and
//            bytes moved, src/ops/op_table.h) and the constants of
//            MachineSpec. Deterministic: tests and plans that must not depend
//            on timing use it.
//  measured: every distinct node signature (op, input and output shapes and
//            dtypes, attrs) of a graph is timed once on the backend at hand:
//            the node alone in a graph of its own, its inputs fed as zeros,
//            compiled by Executable::compile, run once to warm up and then
//            `runs` times; its time is the executor's per-node kernel time
//            (Executable::node_seconds) divided by `runs`. Nodes with the
//            same signature (the blocks of a ResNet repeat, a recomputed
//            clone repeats its original) share that one measurement. The
//            recompute form of each forward node that differs from it (a
//            batch norm's clone, recompute_form in src/ops/op_table.h) is
//            timed too. A node the backend cannot run alone, or one with an
//            output that is not f32 (a time step's token ids), falls back to
//            roofline.
// Cost: roofline O(1) per node; measuring O(distinct signatures x runs) kernel
// calls, each signature compiled once.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>

#include "memfit/ir.h"
#include "runtime/kernel.h"

namespace memfit {

// Predicted seconds of one node of `graph`.
using NodeSeconds = std::function<double(const Graph& graph, const Node& node)>;

// The roofline estimate of a node on `spec` (runtime/kernel.h): a backend
// gives its own (Backend::roofline_machine).
double roofline_seconds(const Graph& graph, const Node& node, const MachineSpec& spec = {});
NodeSeconds roofline_cost(const MachineSpec& spec = {});

// What identifies a node's work: op, input and output types, attrs.
std::string node_signature(const Graph& graph, const Node& node);

// Measured seconds by signature (see the header), with roofline behind it.
class MeasuredCosts {
 public:
  // Times every distinct signature of `graph` on `backend`, `runs` times after a warm-up.
  static MeasuredCosts measure(const Graph& graph, const Backend& backend, int runs = 3,
                               const MachineSpec& fallback = {});
  double seconds(const Graph& graph, const Node& node) const;
  size_t measured() const { return seconds_.size() - fell_back_; }  // signatures timed
  size_t fell_back() const { return fell_back_; }                   // signatures left to roofline
  NodeSeconds as_function() const;

 private:
  std::unordered_map<std::string, double> seconds_;
  size_t fell_back_ = 0;
  MachineSpec fallback_;
};

// The sum of `seconds` over the nodes of `graph`; `forward_only`: over the
// forward nodes (node_phase) alone, whose increase is what recomputation costs.
double graph_seconds(const Graph& graph, const NodeSeconds& seconds, bool forward_only = false);

}  // namespace memfit
