// The model a ModelOptions names: a zoo model (src/models/), or one imported
// from an ONNX file (options.onnx). Everything that builds a step's model
// goes through here.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "memfit/builder.h"

namespace memfit {

// The model at options.batch, for training (dropout active, batch
// statistics) or evaluation. An ONNX file is read once per process and
// kept while its path, size and modification time stay the same.
Result<Model> make_model(const ModelOptions& options, bool training);

// The kind of data `model` (made from `options`) reads: the zoo's entry, or
// for an ONNX model its inputs: `images` (N, C, S, S) or `tokens` (N, T).
Result<DataKind> model_data_kind(const ModelOptions& options, const Model& model);

// Writes the ONNX model of `options` to `path` with its initializers replaced
// by the tensors of `state` that bear their names (trained parameters and
// running statistics): the file's graph and names, memfit's weights.
Status save_trained_onnx(const ModelOptions& options,
                         const std::unordered_map<std::string, std::vector<float>>& state,
                         const std::string& path);

// The trainable parameters (elements) of the model `options` name.
Result<int64_t> model_parameter_count(const ModelOptions& options);

}  // namespace memfit
