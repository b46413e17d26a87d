// ONNX models in and out: a user's model, exported by their framework, as a
// memfit Model that plans and trains like a zoo model, and its trained
// weights written back into the same file's graph.
//
// Import (opset 13 to 17 of the default domain): the first dimension of every
// data input is the batch, set by the caller; every other dimension must be
// fixed. Every f32 initializer of more than one element that an operator
// reads as data is a trainable parameter under its ONNX name, except the
// running mean and variance of BatchNormalization, which are model state;
// scalars, integer and boolean tensors are constants. Shape arithmetic over
// constants and static shapes (Shape, Gather, Concat, Unsqueeze, Range, ...)
// is folded at import. Each operator maps to ops of memfit's table; an
// operator, attribute or input form without a mapping is refused before
// anything runs, naming the node, the operator and what is missing
// (docs/onnx.md lists what is supported).
//
// The model's data inputs are renamed as the data sets expect: an f32
// (N, C, H, W) input is `images`, an integer (N, T) input `tokens`; other
// inputs keep their names. The loss is over the first graph output:
// cross-entropy against i32 `labels` of the output's shape without its last
// dimension (the classes), or mse: the mean squared error against f32
// `labels` of the output's shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "memfit/builder.h"

namespace memfit {

// A parsed ONNX file (its protobuf stays inside src/onnx/).
struct OnnxFile;

// Reads and parses `path`. A missing, unreadable, truncated or malformed file,
// an opset outside 13 to 17, or a model without graph, inputs or outputs is an
// error naming the file.
Result<std::shared_ptr<const OnnxFile>> read_onnx(const std::string& path);
// The same from the bytes of a file (`what` names it in messages).
Result<std::shared_ptr<const OnnxFile>> parse_onnx(const std::string& bytes, const std::string& what);

struct OnnxImport {
  int64_t batch = 1;
  bool training = true;  // dropout active and batch statistics (else inference forms)
  bool dropout = true;   // false: Dropout nodes pass their input through, in training too
  std::string loss = "cross-entropy";  // or "mse"
  std::string name;                    // the model's name in messages
};

Result<Model> import_onnx(const OnnxFile& file, const OnnxImport& options);

// Writes `file`'s model to `path` with every initializer named in `state`
// (plain f32 data of the initializer's element count) replaced by its values;
// the graph, names and everything else are kept. Errors: an initializer
// of `state` whose size differs, or a file that cannot be written.
Status save_onnx(const OnnxFile& file,
                 const std::unordered_map<std::string, std::vector<float>>& state,
                 const std::string& path);

}  // namespace memfit
