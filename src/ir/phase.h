// The phase of a node of a step graph: forward, backward or update.
#pragma once

#include "memfit/ir.h"

namespace memfit {

// The phase of `node`, from its op and the roles of its inputs and outputs
// (the rule of include/memfit/ir.h's Phase). Recomputed clones of forward
// nodes are forward nodes too, wherever they run.
Phase node_phase(const Graph& graph, const Node& node);

}  // namespace memfit
