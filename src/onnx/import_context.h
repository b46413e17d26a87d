// The state of one ONNX import, shared by the graph walk (onnx_import.cpp),
// the operators' mappings (onnx_operators.cpp) and constant folding
// (fold_constants.cpp).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "memfit/builder.h"
#include "ops/typed_graph.h"
#include "onnx/host_tensor.h"
#include "onnx/onnx_file.h"

namespace memfit {

// What an ONNX tensor name stands for during import: a value of the graph
// being built, or a tensor known now.
struct OnnxTensor {
  ValueId value;                      // valid: computed by the graph
  std::optional<HostTensor> constant;  // else: known at import
  bool weight = false;                // an f32 initializer of more than one element
};

// The parts of GELU's exact form as exporters write it,
// x * 0.5 * (1 + erf(x / sqrt 2)), in either order of the multiplications:
// Erf is supported only inside it. A pending part stands for erf(x / sqrt 2)
// or 1 + erf(x / sqrt 2), whose gelu(x) is already in the graph.
struct GeluPart {
  enum Stage { erf, one_plus_erf } stage;
  ValueId x, gelu;
};

class ImportContext {
 public:
  ImportContext(const OnnxFile& file, const OnnxImport& options);

  const OnnxImport& options() const { return options_; }
  Graph& graph() { return model_.graph; }
  const Shape& shape_of(ValueId v) const { return model_.graph.value(v).type.shape; }

  // The node being mapped, for messages: "node '/conv1/Conv' (Conv)".
  const onnx::NodeProto& node() const { return *node_; }
  std::string where() const;
  // An error about the current node: where() + ": " + what.
  Status error(const std::string& what) const;

  // Inputs of the current node. An empty name is an omitted optional input.
  int inputs() const { return node_->input_size(); }
  bool has_input(int i) const { return i < node_->input_size() && !node_->input(i).empty(); }
  bool is_constant(int i) const;
  // Whether input i is a weight (an f32 initializer of more than one element).
  bool is_weight(int i) const;
  // Input i as a value of the graph: weights become parameters (or, with
  // role state, model state), other constants constant values.
  Result<ValueId> value(int i, Role weight_role = Role::parameter);
  // Input i as a tensor known now; an error if it is computed.
  Result<HostTensor> constant(int i) const;
  // Input i's shape, computed or constant.
  Result<Shape> shape(int i) const;
  // Input i's element type as a graph would hold it.
  Result<DType> dtype(int i) const;
  // Binds output k of the current node.
  void set_output(int k, ValueId value);
  void set_output(int k, HostTensor constant);
  // Binds output k as a weight of its own (a copy of `t` under the output's name).
  Status set_weight(int k, HostTensor t);
  int outputs() const { return node_->output_size(); }

  // Attributes of the current node, with defaults; a present attribute of
  // the wrong type is an error.
  Result<int64_t> attr_int(const std::string& name, int64_t fallback) const;
  Result<float> attr_float(const std::string& name, float fallback) const;
  Result<std::vector<int64_t>> attr_ints(const std::string& name, std::vector<int64_t> fallback) const;
  Result<std::string> attr_string(const std::string& name, std::string fallback) const;
  const onnx::AttributeProto* attr(const std::string& name) const;
  // Errors unless every attribute of the node is in `known`.
  Status only_attrs(std::initializer_list<const char*> known) const;

  // Appends an op (its node named after the ONNX node); the error names the ONNX node.
  Result<ValueId> op(OpKind op, std::vector<ValueId> inputs, Attrs attrs = NoAttrs{});
  // A constant of the graph holding `t` (f32 only): a fill for a scalar or a
  // tensor of equal elements, else model state that no step updates.
  Result<ValueId> constant_value(const HostTensor& t, const std::string& name);

  // Pending GELU parts by ONNX tensor name (onnx_operators.cpp).
  std::unordered_map<std::string, GeluPart>& gelu_parts() { return gelu_parts_; }
  // What a pending part named `name` may feed, as an error message; empty
  // when `name` is not pending.
  std::string pending_part(const std::string& name) const;
  // Pending square roots of computed values by ONNX tensor name: supported
  // only as the divisor of a layer normalization written out in ops.
  std::unordered_map<std::string, ValueId>& sqrt_parts() { return sqrt_parts_; }

  // The next dropout key (each Dropout node draws its own masks).
  uint64_t next_dropout_key() { return next_dropout_key_++; }

  // Runs the import: inputs, nodes, loss.
  Result<Model> run();

 private:
  Status bind_inputs();
  Status map_node(const onnx::NodeProto& node);
  Status add_loss();
  const OnnxTensor* find(const std::string& name) const;
  // A unique name for a new node (its output values take it) that is no
  // ONNX tensor's name; `fallback` when no ONNX node is being mapped.
  std::string node_name(const std::string& fallback = "node") const;
  Status bind(const std::string& name, OnnxTensor tensor);

  const OnnxFile& file_;
  OnnxImport options_;
  Model model_;
  const onnx::NodeProto* node_ = nullptr;
  std::unordered_map<std::string, OnnxTensor> tensors_;
  std::unordered_set<std::string> reserved_;  // every ONNX tensor name, and memfit's data names
  std::unordered_map<std::string, Role> weight_roles_;  // weights made values so far
  std::unordered_map<std::string, GeluPart> gelu_parts_;
  std::unordered_map<std::string, ValueId> sqrt_parts_;
  uint64_t next_dropout_key_ = 1;
};

// Maps the current node of `ctx` (its op_type) onto memfit ops; false when the
// operator has no mapping.
using OperatorMapping = std::function<Status(ImportContext&)>;
const std::unordered_map<std::string, OperatorMapping>& operator_mappings();

// Folds the current node when all the inputs it reads are known now (Shape
// needs only a static shape): returns true and binds the outputs, or false
// when the operator is not folded or an input is computed.
Result<bool> fold_constants(ImportContext& ctx);

}  // namespace memfit
