// The ONNX graph walk: initializers and inputs bound, every node mapped in
// order (folded when it computes on constants), and the loss appended.
#ifdef MEMFIT_HAVE_ONNX
#include <algorithm>
#include <cmath>
#include <memory>

#include "onnx/import_context.h"

namespace memfit {

ImportContext::ImportContext(const OnnxFile& file, const OnnxImport& options)
    : file_(file), options_(options) {
  model_.name = options.name;
}

std::string ImportContext::where() const {
  if (node_ == nullptr) return file_.what;
  return "node '" + node_->name() + "' (" + node_->op_type() + ")";
}

Status ImportContext::error(const std::string& what) const {
  if (node_ == nullptr) return Status::error(file_.what + ": " + what);
  return Status::error(file_.what + ": " + where() + ": " + what);
}

const OnnxTensor* ImportContext::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Status ImportContext::bind(const std::string& name, OnnxTensor tensor) {
  if (name.empty()) return Status::ok();  // an omitted optional output
  if (!tensors_.emplace(name, std::move(tensor)).second) {
    return error("tensor '" + name + "' is produced twice");
  }
  return Status::ok();
}

namespace {

Result<const OnnxTensor*> found(const OnnxTensor* t, const ImportContext& ctx, int i) {
  if (t != nullptr) return t;
  const std::string pending = ctx.pending_part(ctx.node().input(i));
  if (!pending.empty()) return ctx.error(pending);
  return ctx.error("input " + std::to_string(i) + " '" + ctx.node().input(i) +
                   "' is not produced by any earlier node, input or initializer (or by an "
                   "optional output memfit does not compute)");
}

}  // namespace

bool ImportContext::is_constant(int i) const {
  const OnnxTensor* t = has_input(i) ? find(node_->input(i)) : nullptr;
  return t != nullptr && !t->value.valid() && t->constant.has_value();
}

std::string ImportContext::pending_part(const std::string& name) const {
  if (gelu_parts_.count(name)) {
    return "reads '" + name + "', an Erf, which is supported only inside GELU, "
           "x * 0.5 * (1 + erf(x / sqrt(2)))";
  }
  if (sqrt_parts_.count(name)) {
    return "reads '" + name + "', a Sqrt of computed data, which is supported only as a layer "
           "normalization's divisor";
  }
  return "";
}

bool ImportContext::is_weight(int i) const {
  const OnnxTensor* t = has_input(i) ? find(node_->input(i)) : nullptr;
  return t != nullptr && t->weight;
}

Result<ValueId> ImportContext::value(int i, Role weight_role) {
  if (!has_input(i)) return error("input " + std::to_string(i) + " is missing");
  const std::string& name = node_->input(i);
  MEMFIT_RETURN_IF_ERROR(found(find(name), *this, i).status());
  OnnxTensor& t = tensors_.at(name);
  if (t.value.valid()) {
    if (t.weight && weight_roles_.at(name) != weight_role) {
      return error("initializer '" + name + "' is read both as a " +
                   std::string(role_name(weight_roles_.at(name))) + " and as a " +
                   std::string(role_name(weight_role)));
    }
    return t.value;
  }
  const HostTensor& c = *t.constant;
  if (t.weight) {
    if (model_.graph.find_value(name).valid()) {
      return error("the weight '" + name + "' has the name of another tensor memfit made");
    }
    const ValueId v = model_.graph.add_input(name, TensorType{c.shape, DType::f32}, weight_role);
    if (weight_role == Role::parameter) model_.params.push_back(v);
    model_.init[name] = Init::of(c.f);
    weight_roles_[name] = weight_role;
    t.value = v;
    return v;
  }
  if (!c.is_float()) {
    return error("input " + std::to_string(i) + " '" + name +
                 "' is an integer or boolean constant used as data; memfit computes with "
                 "integers only where they are token ids or labels");
  }
  MEMFIT_ASSIGN_OR_RETURN(t.value, constant_value(c, name));
  return t.value;
}

Result<HostTensor> ImportContext::constant(int i) const {
  if (!has_input(i)) return error("input " + std::to_string(i) + " is missing");
  MEMFIT_ASSIGN_OR_RETURN(const OnnxTensor* t, found(find(node_->input(i)), *this, i));
  if (!t->constant.has_value()) {
    return error("input " + std::to_string(i) + " '" + node_->input(i) +
                 "' must be known at import (a constant, an initializer or shape arithmetic "
                 "on static shapes), but the graph computes it");
  }
  return *t->constant;
}

Result<Shape> ImportContext::shape(int i) const {
  if (!has_input(i)) return error("input " + std::to_string(i) + " is missing");
  MEMFIT_ASSIGN_OR_RETURN(const OnnxTensor* t, found(find(node_->input(i)), *this, i));
  if (t->value.valid()) return model_.graph.value(t->value).type.shape;
  return t->constant->shape;
}

Result<DType> ImportContext::dtype(int i) const {
  if (!has_input(i)) return error("input " + std::to_string(i) + " is missing");
  MEMFIT_ASSIGN_OR_RETURN(const OnnxTensor* t, found(find(node_->input(i)), *this, i));
  if (t->value.valid()) return model_.graph.value(t->value).type.dtype;
  return t->constant->is_float() ? DType::f32 : DType::i32;
}

void ImportContext::set_output(int k, ValueId value) {
  if (k >= node_->output_size()) return;
  // A node's outputs are unique by the ONNX rules, which map_node checks.
  tensors_[node_->output(k)] = OnnxTensor{value, std::nullopt, false};
}

void ImportContext::set_output(int k, HostTensor constant) {
  if (k >= node_->output_size()) return;
  tensors_[node_->output(k)] = OnnxTensor{ValueId(), std::move(constant), false};
}

Status ImportContext::set_weight(int k, HostTensor t) {
  if (k >= node_->output_size()) return Status::ok();
  const std::string& name = node_->output(k);
  if (model_.graph.find_value(name).valid()) return error("tensor '" + name + "' is produced twice");
  tensors_[name] = OnnxTensor{ValueId(), std::move(t), true};
  return Status::ok();
}

const onnx::AttributeProto* ImportContext::attr(const std::string& name) const {
  for (const auto& a : node_->attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

Result<int64_t> ImportContext::attr_int(const std::string& name, int64_t fallback) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::INT) return error("attribute " + name + " is not an int");
  return a->i();
}

Result<float> ImportContext::attr_float(const std::string& name, float fallback) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::FLOAT) return error("attribute " + name + " is not a float");
  if (!std::isfinite(a->f())) {
    return error("attribute " + name + " is " + (std::isnan(a->f()) ? "NaN" : "infinite"));
  }
  return a->f();
}

Result<std::vector<int64_t>> ImportContext::attr_ints(const std::string& name,
                                                      std::vector<int64_t> fallback) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::INTS) return error("attribute " + name + " is not ints");
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

Result<std::string> ImportContext::attr_string(const std::string& name, std::string fallback) const {
  const onnx::AttributeProto* a = attr(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::STRING) return error("attribute " + name + " is not a string");
  return a->s();
}

Status ImportContext::only_attrs(std::initializer_list<const char*> known) const {
  for (const auto& a : node_->attribute()) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return a.name() == k; })) {
      return error("attribute " + a.name() + " is not supported");
    }
  }
  return Status::ok();
}

Result<ValueId> ImportContext::op(OpKind op, std::vector<ValueId> inputs, Attrs attrs) {
  auto node = add_node(model_.graph, op, std::move(inputs), std::move(attrs), node_name());
  if (!node) return error(node.message());
  return model_.graph.node(*node).outputs[0];
}

std::string ImportContext::node_name(const std::string& fallback) const {
  std::string base = node_ && !node_->name().empty() ? node_->name()
                     : node_                          ? node_->op_type()
                                                      : fallback;
  // A node's outputs take its name; the ONNX tensor names stay free for the
  // weights and inputs that keep them.
  while (reserved_.count(base)) base += ".op";
  return model_.graph.unique_node_name(base);
}

Result<ValueId> ImportContext::constant_value(const HostTensor& t, const std::string& name) {
  const bool uniform = std::all_of(t.f.begin(), t.f.end(), [&](float v) { return v == t.f[0]; });
  if (t.elements() == 0) return error("the constant '" + name + "' is empty");
  if (uniform) return op(OpKind::fill, {}, FillAttrs{t.f[0], t.shape});
  const std::string unique = model_.graph.unique_value_name(name);  // the tensor's own name
  const ValueId v = model_.graph.add_input(unique, TensorType{t.shape, DType::f32}, Role::state);
  model_.init[unique] = Init::of(t.f);
  return v;
}

Status ImportContext::bind_inputs() {
  const onnx::GraphProto& g = file_.model.graph();
  reserved_ = {"labels", "images", "tokens"};
  for (const onnx::TensorProto& init : g.initializer()) reserved_.insert(init.name());
  for (const onnx::ValueInfoProto& in : g.input()) reserved_.insert(in.name());
  for (const onnx::NodeProto& node : g.node()) {
    for (const std::string& out : node.output()) reserved_.insert(out);
  }
  for (const onnx::TensorProto& init : g.initializer()) {
    if (init.name().empty()) return Status::error(file_.what + ": an initializer has no name");
    auto tensor = tensor_from_proto(init);
    if (!tensor) return Status::error(file_.what + ": " + tensor.message());
    const bool weight = tensor->is_float() && tensor->elements() > 1;
    MEMFIT_RETURN_IF_ERROR(bind(init.name(), OnnxTensor{ValueId(), std::move(*tensor), weight}));
  }
  int images = 0, tokens = 0;
  for (const onnx::ValueInfoProto& in : g.input()) {
    if (find(in.name())) continue;  // an initializer listed as an input too (IR version 3)
    const std::string what = file_.what + ": input '" + in.name() + "'";
    if (!in.type().has_tensor_type()) return Status::error(what + " is not a tensor");
    const auto& tt = in.type().tensor_type();
    DType dtype;
    switch (tt.elem_type()) {
      case onnx::TensorProto::FLOAT:
        dtype = DType::f32;
        break;
      case onnx::TensorProto::INT64:
      case onnx::TensorProto::INT32:
        dtype = DType::i32;
        break;
      default:
        return Status::error(what + " has element type " +
                             onnx::TensorProto::DataType_Name(tt.elem_type()) +
                             "; memfit reads FLOAT data and INT64 or INT32 token ids");
    }
    if (!tt.has_shape()) return Status::error(what + " has no shape");
    Shape shape;
    for (int d = 0; d < tt.shape().dim_size(); ++d) {
      const auto& dim = tt.shape().dim(d);
      if (d == 0) {
        shape.push_back(options_.batch);
      } else if (dim.has_dim_value() && dim.dim_value() > 0) {
        shape.push_back(dim.dim_value());
      } else if (dim.has_dim_value()) {
        return Status::error(what + " has dimension " + std::to_string(d) + " of size " +
                             std::to_string(dim.dim_value()) + "; every size must be positive");
      } else {
        return Status::error(
            what + " has a dynamic dimension " + std::to_string(d) +
            (dim.has_dim_param() ? " ('" + dim.dim_param() + "')" : std::string()) +
            "; memfit plans static shapes: only the first (batch) dimension may be symbolic, so "
            "export with fixed sizes for the others");
      }
    }
    if (shape.empty()) return Status::error(what + " is a scalar; memfit needs a batch dimension");
    // The data sets' names, unless the file names an initializer (bound
    // above) so; a data input named `labels` takes another name.
    std::string name = in.name();
    if (dtype == DType::f32 && shape.size() == 4 && images++ == 0 && !find("images")) {
      name = "images";
    }
    if (dtype == DType::i32 && shape.size() == 2 && tokens++ == 0 && !find("tokens")) {
      name = "tokens";
    }
    if (name == "labels" || model_.graph.find_value(name).valid()) {
      name = model_.graph.unique_value_name(name + ".input");
    }
    const ValueId v = model_.graph.add_input(name, TensorType{shape, dtype}, Role::input);
    model_.inputs.push_back(v);
    tensors_[in.name()] = OnnxTensor{v, std::nullopt, false};
  }
  if (model_.inputs.empty()) return Status::error(file_.what + ": the graph has no data input");
  return Status::ok();
}

Status ImportContext::map_node(const onnx::NodeProto& node) {
  node_ = &node;
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    return error("operator domain '" + node.domain() + "' is not supported (only the default domain)");
  }
  if (node.output_size() == 0 || node.output(0).empty()) return error("the node has no output");
  for (const std::string& out : node.output()) {
    if (!out.empty() && find(out)) return error("tensor '" + out + "' is produced twice");
  }
  MEMFIT_ASSIGN_OR_RETURN(const bool folded, fold_constants(*this));
  if (folded) return Status::ok();
  const auto& mappings = operator_mappings();
  const auto it = mappings.find(node.op_type());
  if (it == mappings.end()) {
    std::vector<std::string> names;
    for (const auto& [op, mapping] : mappings) names.push_back(op);
    std::sort(names.begin(), names.end());
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    return error("operator " + node.op_type() + " is not supported; memfit maps " + list);
  }
  return it->second(*this);
}

Status ImportContext::add_loss() {
  node_ = nullptr;
  const onnx::GraphProto& g = file_.model.graph();
  const std::string& out_name = g.output(0).name();
  const OnnxTensor* out = find(out_name);
  if (out == nullptr || !out->value.valid()) {
    return Status::error(file_.what + ": the first output '" + out_name +
                         "' is not computed from the inputs");
  }
  Graph& graph = model_.graph;
  ValueId y = out->value;
  const Shape shape = graph.value(y).type.shape;
  if (graph.value(y).type.dtype != DType::f32) {
    return Status::error(file_.what + ": the first output '" + out_name + "' is not f32");
  }
  auto append = [&](OpKind op, std::vector<ValueId> in, Attrs attrs, const char* name) -> Result<ValueId> {
    auto node = add_node(graph, op, std::move(in), std::move(attrs), node_name(name));
    if (!node) return Status::error(file_.what + ": the loss: " + node.message());
    return graph.node(*node).outputs[0];
  };
  if (graph.find_value("labels").valid()) {
    return Status::error(file_.what + ": a weight is named 'labels', the name of memfit's labels");
  }
  if (options_.loss == "cross-entropy" || options_.loss.empty()) {
    if (shape.size() < 2) {
      return Status::error(file_.what + ": cross-entropy needs an output (N, ..., classes); '" +
                           out_name + "' is " + shape_string(shape));
    }
    Shape label_shape(shape.begin(), shape.end() - 1);
    // Logits with the batch and positions flattened into rows (N*T, V): one
    // label per row, shaped (N, T) as data sets give them.
    const int64_t rows_total = num_elements(label_shape);
    if (label_shape[0] != options_.batch && rows_total % options_.batch == 0) {
      label_shape = {options_.batch, rows_total / options_.batch};
    }
    model_.labels = graph.add_input("labels", TensorType{label_shape, DType::i32}, Role::label);
    model_.inputs.push_back(model_.labels);
    const int64_t rows = num_elements(label_shape);
    ValueId logits = y, labels = model_.labels;
    if (shape.size() > 2) {
      MEMFIT_ASSIGN_OR_RETURN(logits, append(OpKind::reshape, {y}, ShapeAttrs{{rows, shape.back()}},
                                             "logits"));
    }
    if (label_shape.size() > 1) {
      MEMFIT_ASSIGN_OR_RETURN(labels, append(OpKind::reshape, {model_.labels}, ShapeAttrs{{rows}},
                                             "labels_flat"));
    }
    model_.logits = logits;
    MEMFIT_ASSIGN_OR_RETURN(model_.loss,
                            append(OpKind::softmax_cross_entropy, {logits, labels}, NoAttrs{}, "loss"));
  } else if (options_.loss == "mse") {
    model_.labels = graph.add_input("labels", TensorType{shape, DType::f32}, Role::label);
    model_.inputs.push_back(model_.labels);
    model_.logits = y;
    MEMFIT_ASSIGN_OR_RETURN(ValueId diff, append(OpKind::sub, {y, model_.labels}, NoAttrs{}, "error"));
    MEMFIT_ASSIGN_OR_RETURN(ValueId square, append(OpKind::mul, {diff, diff}, NoAttrs{}, "squared"));
    std::vector<int64_t> axes(shape.size());
    for (size_t a = 0; a < axes.size(); ++a) axes[a] = static_cast<int64_t>(a);
    MEMFIT_ASSIGN_OR_RETURN(model_.loss, append(OpKind::reduce_mean, {square},
                                                ReduceAttrs{axes, false}, "loss"));
  } else {
    return Status::error("unknown loss '" + options_.loss + "'; use cross-entropy or mse");
  }
  return Status::ok();
}

Result<Model> ImportContext::run() {
  MEMFIT_RETURN_IF_ERROR(bind_inputs());
  MEMFIT_RETURN_IF_ERROR(check_model_size(options_.name, model_.graph));
  for (const onnx::NodeProto& node : file_.model.graph().node()) {
    MEMFIT_RETURN_IF_ERROR(map_node(node));
    MEMFIT_RETURN_IF_ERROR(check_model_size(options_.name, model_.graph));
  }
  MEMFIT_RETURN_IF_ERROR(add_loss());
  MEMFIT_RETURN_IF_ERROR(check_model_size(options_.name, model_.graph));
  model_.graph.mark_output(options_.training ? model_.loss : model_.logits);
  return std::move(model_);
}

Result<Model> import_onnx(const OnnxFile& file, const OnnxImport& options) {
  if (options.batch < 1) return Status::error("the batch must be at least 1");
  if (options.loss != "cross-entropy" && options.loss != "mse" && !options.loss.empty()) {
    return Status::error("unknown --loss '" + options.loss + "'; use cross-entropy or mse");
  }
  ImportContext ctx(file, options);
  return ctx.run();
}

}  // namespace memfit
#endif  // MEMFIT_HAVE_ONNX
