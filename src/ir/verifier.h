// The structural graph verifier (verifier.cpp): names, sizes, producer links,
// topological order, arity, attribute kinds, graph outputs and updates. It
// knows no op's shapes; verify_graph (src/ops/typed_graph.h) runs it and then
// checks every node's output types against the op table's shape inference.
#pragma once

#include "memfit/ir.h"

namespace memfit {

// The first broken invariant of verifier.cpp's list, or ok.
Status verify_graph_structure(const Graph& graph);

}  // namespace memfit
