#include "train/input_ranges.h"

#include <algorithm>
#include <vector>

namespace memfit {

int64_t classes_of(const Model& model) { return model.graph.value(model.logits).type.shape.at(1); }

int64_t ids_below(const Model& model, int64_t classes) {
  std::vector<bool> from_data(model.graph.num_values(), false);
  for (const ValueId in : model.inputs) from_data[in.idx()] = true;
  int64_t rows = classes;
  for (const Node& node : model.graph.nodes()) {  // in topological order
    const bool reads_data = std::any_of(node.inputs.begin(), node.inputs.end(),
                                        [&](ValueId v) { return from_data[v.idx()]; });
    if (!reads_data) continue;
    for (const ValueId out : node.outputs) from_data[out.idx()] = true;
    if (node.op == OpKind::embedding && from_data[node.inputs.at(0).idx()]) {
      rows = std::min(rows, model.graph.value(node.inputs.at(1)).type.shape.at(0));
    }
  }
  return rows;
}

}  // namespace memfit
