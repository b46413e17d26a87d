// Graphs typed by the op table's shape inference. The ir layer builds and
// checks graphs without knowing any op's shapes; here a new node's outputs get
// the types inference gives, and the verifier checks that every node's
// outputs have them.
#pragma once

#include <string>
#include <vector>

#include "memfit/ir.h"

namespace memfit {

// Appends a node after all present ones; its outputs' types come from the op
// table's shape inference and get `output_role`. Errors name the node.
Result<NodeId> add_node(Graph& graph, OpKind op, std::vector<ValueId> inputs, Attrs attrs,
                        std::string name, Role output_role = Role::activation);

// Checks the structure (src/ir/verifier.h: names, order, arity, attributes,
// updates) and then every node's output count and types against shape
// inference; the first broken invariant is the error. Cost: O(values + nodes
// + edges), plus one shape inference per node.
Status verify_graph(const Graph& graph);

}  // namespace memfit
