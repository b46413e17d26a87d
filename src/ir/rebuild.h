// Rebuilding a graph from some of its nodes, in a new order.
#pragma once

#include <vector>

#include "memfit/ir.h"

namespace memfit {

// A graph with `nodes` (a subset of graph's, each input defined by an earlier
// one of them or a graph input) in the given order. Every graph input is kept,
// in its order; values are renumbered in definition order; outputs and
// updates carry over. value_map (if given) receives, for each old value, its
// new id (invalid for values of dropped nodes).
// With `drop_unread_inputs`, a graph input that no kept node reads and that
// is neither an output nor a state of the updates is left out.
Graph rebuild_graph(const Graph& graph, const std::vector<NodeId>& nodes,
                    std::vector<ValueId>* value_map = nullptr, bool drop_unread_inputs = false);

}  // namespace memfit
