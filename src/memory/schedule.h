// Scheduling: the order in which the nodes of a step run (schedule.cpp).
#pragma once

#include <vector>

#include "memfit/ir.h"

namespace memfit {

// A topological order that greedily keeps the live bytes low.
std::vector<NodeId> memory_aware_order(const Graph& graph, const std::vector<size_t>& value_bytes);

// The graph with its nodes in `order`; value_map (if given) receives, for each
// old value, its id in the new graph.
Graph reorder_nodes(const Graph& graph, const std::vector<NodeId>& order,
                    std::vector<ValueId>* value_map = nullptr);

}  // namespace memfit
