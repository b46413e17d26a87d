#include "train/input_ranges.h"

#include <algorithm>

namespace memfit {
namespace {

// The fewest rows of an embedding table whose ids come from the data inputs
// marked in `from_data` (by value index), or `rows` if more. The marks
// spread to every value computed from a marked one.
int64_t fewest_rows(const Model& model, std::vector<bool> from_data, int64_t rows) {
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

}  // namespace

int64_t classes_of(const Model& model) { return model.graph.value(model.logits).type.shape.at(1); }

int64_t ids_below(const Model& model, int64_t classes) {
  std::vector<bool> from_data(model.graph.num_values(), false);
  for (const ValueId in : model.inputs) from_data[in.idx()] = true;
  return fewest_rows(model, std::move(from_data), classes);
}

std::vector<IntegerInput> integer_inputs(const Model& model) {
  constexpr int64_t kAnyI32 = int64_t{1} << 31;
  std::vector<IntegerInput> inputs;
  for (const ValueId in : model.inputs) {
    const Value& v = model.graph.value(in);
    if (v.type.dtype != DType::i32) continue;
    if (in == model.labels && model.logits.valid()) {
      const int64_t classes = classes_of(model);
      inputs.push_back(
          {v.name, classes,
           "the " + std::to_string(classes) + " classes of model " + model.name + "'s logits"});
      continue;
    }
    std::vector<bool> from_data(model.graph.num_values(), false);
    from_data[in.idx()] = true;
    const int64_t rows = fewest_rows(model, std::move(from_data), kAnyI32);
    inputs.push_back({v.name, rows,
                      rows == kAnyI32 ? "non-negative i32 values (no embedding table of model " +
                                            model.name + " looks it up)"
                                      : "the " + std::to_string(rows) + " rows of model " +
                                            model.name + "'s embedding table"});
  }
  return inputs;
}

}  // namespace memfit
