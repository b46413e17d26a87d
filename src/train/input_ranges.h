// The values a model's integer data inputs may take: labels are classes of
// its logits, token ids are rows of the embedding tables that look them up.
// Synthetic data draws below these bounds; data files are checked against
// them (an id past a table's rows would stop the run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memfit/builder.h"

namespace memfit {

// Class count of the rows of the model's logits.
int64_t classes_of(const Model& model);

// The token ids every embedding table that looks up the data can take: the
// fewest rows of a table whose ids come from the model's inputs (tables of
// positions, looked up by ids the model makes, do not count), or `classes`
// if more.
int64_t ids_below(const Model& model, int64_t classes);

// An i32 data input and the exclusive upper bound of its values (the lower
// bound is 0).
struct IntegerInput {
  std::string name = {};
  int64_t below = 0;
  // What the bound is, for messages: "the 10 classes of model lenet's
  // logits", "the 50257 rows of model gpt's embedding table".
  std::string bound = {};
};

// Every i32 data input of `model`, in the order of model.inputs: the labels
// below classes_of(model); any other input below the fewest rows of the
// embedding tables whose ids come from it, or, when no table looks it up,
// below 2^31 (any non-negative i32).
std::vector<IntegerInput> integer_inputs(const Model& model);

}  // namespace memfit
