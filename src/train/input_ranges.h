// The values a model's integer inputs may take: labels below its classes,
// token ids below the rows of the embedding tables that look them up. An id
// past a table's rows stops a run, so data is checked against these first.
#pragma once

#include <cstdint>

#include "memfit/builder.h"

namespace memfit {

// Class count of the rows of the model's logits.
int64_t classes_of(const Model& model);

// The token ids every embedding table that looks up the data can take: the
// fewest rows of a table whose ids come from the model's inputs (tables of
// positions, looked up by ids the model makes, do not count), or `classes`
// if more.
int64_t ids_below(const Model& model, int64_t classes);

}  // namespace memfit
