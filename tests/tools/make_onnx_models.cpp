// make_onnx_models DIR: writes small ONNX models (opset 17, a symbolic batch
// dimension, weights drawn as PyTorch initializes its layers) as PyTorch's
// exporter writes them, for the command-line tests and the fuzz seeds:
//   lenet.onnx       LeNet-5 on (N, 1, 28, 28) images, 10 classes, with the
//                    Shape -> Gather -> Unsqueeze -> Concat -> Reshape flatten
//   gpt.onnx         a one-block GPT on (N, 16) tokens of a 32-token vocabulary:
//                    embeddings, layer norms, two causal attention heads
//                    (Trilu mask, Where), the GELU erf form, dropout
//   cnn_small.onnx   convolution, batch norm, pooling and Gemm on (N, 1, 8, 8)
//   gpt_small.onnx   the GPT at (N, 4) tokens of 8, width 8
//   mlp_small.onnx   Split, Slice, Concat, Expand, Pow, ReduceMean, LogSoftmax
// The same files, byte for byte, on every run. Exits 1 if a file cannot be written.
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace {

using Dims = std::vector<int64_t>;

// Uniform numbers in (-1, 1) from a fixed sequence.
class Draws {
 public:
  float next() {
    state_ = state_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>((state_ >> 40) * (1.0 / 8388608.0)) - 1.0f;
  }

 private:
  uint64_t state_ = 42;
};

class Builder {
 public:
  Builder() {
    model_.set_ir_version(8);
    model_.set_producer_name("make_onnx_models");
    onnx::OperatorSetIdProto* opset = model_.add_opset_import();
    opset->set_domain("");
    opset->set_version(17);
  }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  // A data input whose first dimension is the symbolic batch.
  void input(const std::string& name, const Dims& dims, int type = onnx::TensorProto::FLOAT) {
    onnx::ValueInfoProto* in = graph().add_input();
    in->set_name(name);
    auto* tensor = in->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(type);
    tensor->mutable_shape()->add_dim()->set_dim_param("batch");
    for (const int64_t d : dims) tensor->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void output(const std::string& name) {
    onnx::ValueInfoProto* out = graph().add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  // An f32 initializer of `values`, or uniform(-bound, bound) draws.
  std::string floats(const std::string& name, const Dims& dims, std::vector<float> values = {},
                     float bound = 0.0f) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (const int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    if (values.empty()) {
      for (int64_t k = 0; k < n; ++k) values.push_back(bound * draws_.next());
    }
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    return name;
  }
  std::string ints(const std::string& name, const Dims& dims, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (const int64_t d : dims) t->add_dims(d);
    for (const int64_t v : values) t->add_int64_data(v);
    return name;
  }
  // A node named as the exporter names them ("/scope/Op"); returns its first output.
  onnx::NodeProto& node(const std::string& scope, const std::string& op,
                        const std::vector<std::string>& inputs,
                        std::vector<std::string> outputs = {}) {
    onnx::NodeProto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(scope + "/" + op);
    if (outputs.empty()) outputs.push_back(scope + "/" + op + "_output_0");
    for (const std::string& i : inputs) n->add_input(i);
    for (const std::string& o : outputs) n->add_output(o);
    return *n;
  }
  std::string out(onnx::NodeProto& n) { return n.output(0); }

  static onnx::NodeProto& attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
    return n;
  }
  static onnx::NodeProto& attr_f(onnx::NodeProto& n, const std::string& name, float v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
    return n;
  }
  static onnx::NodeProto& attr(onnx::NodeProto& n, const std::string& name, const Dims& v) {
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (const int64_t x : v) a->add_ints(x);
    return n;
  }

  // Layers as torch.nn exports them; each returns its output.
  std::string linear(const std::string& scope, const std::string& x, int64_t in, int64_t out) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    const std::string w = floats(scope + ".weight", {out, in}, {}, bound);
    const std::string b = floats(scope + ".bias", {out}, {}, bound);
    return this->out(attr(node("/" + scope, "Gemm", {x, w, b}), "transB", 1));
  }
  // x (N, T, in) @ W (in, out) + b, as a Linear on 3-D input exports.
  std::string linear3d(const std::string& scope, const std::string& x, int64_t in, int64_t out) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));
    const std::string w = floats(scope + ".weight_t", {in, out}, {}, bound);
    const std::string b = floats(scope + ".bias", {out}, {}, bound);
    const std::string y = this->out(node("/" + scope, "MatMul", {x, w}));
    return this->out(node("/" + scope + "/bias", "Add", {y, b}));
  }
  std::string conv(const std::string& scope, const std::string& x, int64_t in, int64_t out,
                   int64_t k, int64_t pad) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(in * k * k));
    const std::string w = floats(scope + ".weight", {out, in, k, k}, {}, bound);
    const std::string b = floats(scope + ".bias", {out}, {}, bound);
    onnx::NodeProto& n = node("/" + scope, "Conv", {x, w, b});
    attr(n, "kernel_shape", Dims{k, k});
    attr(n, "pads", Dims{pad, pad, pad, pad});
    attr(n, "strides", Dims{1, 1});
    attr(n, "dilations", Dims{1, 1});
    attr(n, "group", 1);
    return this->out(n);
  }
  std::string pool(const std::string& scope, const std::string& op, const std::string& x,
                   int64_t k) {
    onnx::NodeProto& n = node("/" + scope, op, {x});
    attr(n, "kernel_shape", Dims{k, k});
    attr(n, "strides", Dims{k, k});
    attr(n, "pads", Dims{0, 0, 0, 0});
    return out(n);
  }
  std::string relu(const std::string& scope, const std::string& x) {
    return out(node("/" + scope, "Relu", {x}));
  }
  std::string batch_norm(const std::string& scope, const std::string& x, int64_t c) {
    const std::string s = floats(scope + ".weight", {c}, std::vector<float>(c, 1.0f));
    const std::string b = floats(scope + ".bias", {c}, std::vector<float>(c, 0.0f));
    const std::string m = floats(scope + ".running_mean", {c}, std::vector<float>(c, 0.0f));
    const std::string v = floats(scope + ".running_var", {c}, std::vector<float>(c, 1.0f));
    onnx::NodeProto& n = node("/" + scope, "BatchNormalization", {x, s, b, m, v});
    attr_f(n, "epsilon", 1e-5f);
    attr_f(n, "momentum", 0.9f);
    return out(n);
  }
  std::string layer_norm(const std::string& scope, const std::string& x, int64_t d) {
    const std::string s = floats(scope + ".weight", {d}, std::vector<float>(d, 1.0f));
    const std::string b = floats(scope + ".bias", {d}, std::vector<float>(d, 0.0f));
    onnx::NodeProto& n = node("/" + scope, "LayerNormalization", {x, s, b});
    attr(n, "axis", -1);
    attr_f(n, "epsilon", 1e-5f);
    return out(n);
  }
  // torch.flatten(x, 1) with a dynamic batch: the batch read from the shape.
  std::string flatten_dynamic(const std::string& scope, const std::string& x) {
    const std::string shape = out(node("/" + scope, "Shape", {x}));
    const std::string zero = ints(scope + ".zero", {}, {0});
    const std::string n = out(attr(node("/" + scope, "Gather", {shape, zero}), "axis", 0));
    const std::string axes = ints(scope + ".axes", {1}, {0});
    const std::string n1 = out(node("/" + scope, "Unsqueeze", {n, axes}));
    const std::string rest = ints(scope + ".rest", {1}, {-1});
    const std::string spec = out(attr(node("/" + scope, "Concat", {n1, rest}), "axis", 0));
    return out(node("/" + scope, "Reshape", {x, spec}));
  }
  // gelu(x) as torch exports nn.GELU(): x * 0.5 * (1 + erf(x / sqrt 2)).
  std::string gelu(const std::string& scope, const std::string& x) {
    const std::string d =
        out(node("/" + scope, "Div", {x, floats(scope + ".sqrt2", {}, {1.4142135f})}));
    const std::string e = out(node("/" + scope, "Erf", {d}));
    const std::string p = out(node("/" + scope, "Add", {e, floats(scope + ".one", {}, {1.0f})}));
    const std::string m = out(node("/" + scope + "/x", "Mul", {x, p}));
    return out(node("/" + scope + "/half", "Mul", {m, floats(scope + ".half", {}, {0.5f})}));
  }

  bool write(const std::string& path) const {
    std::string bytes;
    if (!model_.SerializeToString(&bytes)) return false;
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return static_cast<bool>(file);
  }

 private:
  onnx::ModelProto model_;
  Draws draws_;
};

Builder lenet() {
  Builder b;
  b.input("input", {1, 28, 28});
  std::string x = b.conv("conv1", "input", 1, 6, 5, 2);
  x = b.pool("pool1", "MaxPool", b.relu("relu1", x), 2);
  x = b.conv("conv2", x, 6, 16, 5, 0);
  x = b.pool("pool2", "MaxPool", b.relu("relu2", x), 2);
  x = b.flatten_dynamic("flatten", x);
  x = b.relu("relu3", b.linear("fc1", x, 400, 120));
  x = b.relu("relu4", b.linear("fc2", x, 120, 84));
  b.output(b.linear("fc3", x, 84, 10));
  return b;
}

Builder small_cnn() {
  Builder b;
  b.input("input", {1, 8, 8});
  std::string x = b.conv("conv", "input", 1, 4, 3, 1);
  x = b.relu("relu", b.batch_norm("bn", x, 4));
  x = b.pool("maxpool", "MaxPool", x, 2);
  x = b.pool("avgpool", "AveragePool", x, 2);
  x = b.out(b.node("/gap", "GlobalAveragePool", {x}));
  x = b.out(b.node("/flatten", "Flatten", {x}));
  b.output(b.linear("fc", x, 4, 3));
  return b;
}

// The causal mask as the exporter folds torch.tril(torch.ones(T, T)) == 0:
// Trilu of a ConstantOfShape of ones (not an initializer, which would be a
// weight), compared with 0. True above the diagonal, (1, 1, T, T).
std::string causal_mask(Builder& b, int64_t seq) {
  onnx::NodeProto& fill =
      b.node("/attn/ones", "ConstantOfShape", {b.ints("attn.mask_shape", {4}, {1, 1, seq, seq})});
  onnx::AttributeProto* one = fill.add_attribute();
  one->set_name("value");
  one->set_type(onnx::AttributeProto::TENSOR);
  one->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  one->mutable_t()->add_dims(1);
  one->mutable_t()->add_float_data(1.0f);
  const std::string tril =
      b.out(Builder::attr(b.node("/attn/tril", "Trilu", {b.out(fill)}), "upper", 0));
  return b.out(b.node("/attn/hidden", "Equal", {tril, b.floats("attn.zero", {}, {0.0f})}));
}

// 1 / sqrt(d) as a Constant node and a Sqrt, as attention's scaling exports.
std::string root_of(Builder& b, int64_t d) {
  onnx::NodeProto& constant = b.node("/attn/d", "Constant", {});
  onnx::AttributeProto* value = constant.add_attribute();
  value->set_name("value_float");
  value->set_type(onnx::AttributeProto::FLOAT);
  value->set_f(static_cast<float>(d));
  return b.out(b.node("/attn/root", "Sqrt", {b.out(constant)}));
}

// Causal self-attention of x (N, T, width) with `heads` heads: q, k, v
// from one projection split in three, each (N, H, T, D).
std::string attention(Builder& b, const std::string& x, int64_t seq, int64_t width, int64_t heads) {
  const int64_t head = width / heads;
  const std::string qkv = b.linear3d("attn.c_attn", x, width, 3 * width);
  const std::string sizes = b.ints("attn.split", {3}, {width, width, width});
  Builder::attr(b.node("/attn", "Split", {qkv, sizes}, {"/attn/q", "/attn/k", "/attn/v"}), "axis",
                2);
  const std::string heads_shape = b.ints("attn.heads", {4}, {0, seq, heads, head});
  auto split_heads = [&](const std::string& name) {
    const std::string r =
        b.out(b.node("/attn/" + name + "/heads", "Reshape", {"/attn/" + name, heads_shape}));
    return b.out(Builder::attr(b.node("/attn/" + name + "/heads", "Transpose", {r}), "perm",
                               Dims{0, 2, 1, 3}));
  };
  const std::string q = split_heads("q"), k = split_heads("k"), v = split_heads("v");
  const std::string kt =
      b.out(Builder::attr(b.node("/attn/kt", "Transpose", {k}), "perm", Dims{0, 1, 3, 2}));
  std::string s = b.out(b.node("/attn/scores", "MatMul", {q, kt}));
  s = b.out(b.node("/attn/scale", "Div", {s, root_of(b, head)}));
  const std::string neg_inf = b.floats("attn.neg_inf", {}, {-INFINITY});
  s = b.out(b.node("/attn/mask", "Where", {causal_mask(b, seq), neg_inf, s}));
  std::string p = b.out(Builder::attr(b.node("/attn", "Softmax", {s}), "axis", -1));
  p = b.out(b.node("/attn/drop", "Dropout", {p, "drop.p"}));
  std::string a = b.out(b.node("/attn/values", "MatMul", {p, v}));
  a = b.out(Builder::attr(b.node("/attn/merge", "Transpose", {a}), "perm", Dims{0, 2, 1, 3}));
  a = b.out(b.node("/attn/merge", "Reshape", {a, b.ints("attn.merged", {3}, {0, seq, width})}));
  return b.linear3d("attn.c_proj", a, width, width);
}

// One block of GPT-2: token and position embeddings, pre-norm causal
// self-attention and a GELU MLP with residuals, a final layer norm and a
// head to logits (N, T, vocab).
Builder gpt(int64_t seq, int64_t vocab, int64_t width, int64_t heads) {
  Builder b;
  b.input("input_ids", {seq}, onnx::TensorProto::INT64);
  const std::string wte = b.floats("wte.weight", {vocab, width}, {}, 1.0f);
  const std::string wpe = b.floats("wpe.weight", {seq, width}, {}, 1.0f);
  const std::string tok = b.out(b.node("/wte", "Gather", {wte, "input_ids"}));
  std::vector<int64_t> positions;
  for (int64_t t = 0; t < seq; ++t) positions.push_back(t);
  const std::string pos =
      b.out(b.node("/wpe", "Gather", {wpe, b.ints("positions", {seq}, positions)}));
  std::string x = b.out(b.node("/embed", "Add", {tok, pos}));
  x = b.out(b.node("/drop", "Dropout", {x, b.floats("drop.p", {}, {0.1f})}));

  const std::string a = attention(b, b.layer_norm("ln_1", x, width), seq, width, heads);
  x = b.out(b.node("/attn/residual", "Add", {x, a}));

  std::string m = b.linear3d("mlp.c_fc", b.layer_norm("ln_2", x, width), width, 4 * width);
  m = b.linear3d("mlp.c_proj", b.gelu("mlp.gelu", m), 4 * width, width);
  x = b.out(b.node("/mlp/residual", "Add", {x, m}));

  x = b.layer_norm("ln_f", x, width);
  const std::string head = b.floats("lm_head.weight_t", {width, vocab}, {}, 0.5f);
  b.output(b.out(b.node("/lm_head", "MatMul", {x, head})));
  return b;
}

Builder small_mlp() {
  Builder b;
  b.input("x", {6});
  const std::string h = b.linear("fc1", "x", 6, 6);
  Builder::attr(
      b.node("/split", "Split", {h, b.ints("split.sizes", {2}, {2, 4})}, {"/split/a", "/split/b"}),
      "axis", 1);
  const std::string sliced =
      b.out(b.node("/slice", "Slice",
                   {"/split/b", b.ints("slice.starts", {1}, {1}), b.ints("slice.ends", {1}, {3}),
                    b.ints("slice.axes", {1}, {1})}));
  std::string c =
      b.out(Builder::attr(b.node("/concat", "Concat", {"/split/a", sliced}), "axis", 1));
  c = b.out(b.node("/square", "Pow", {c, b.floats("pow.two", {}, {2.0f})}));
  const std::string u =
      b.out(b.node("/unsqueeze", "Unsqueeze", {c, b.ints("unsqueeze.axes", {1}, {1})}));
  const std::string e =
      b.out(b.node("/expand", "Expand", {u, b.ints("expand.shape", {3}, {1, 3, 1})}));
  onnx::NodeProto& mean = b.node("/mean", "ReduceMean", {e});
  Builder::attr(mean, "axes", Dims{1});
  Builder::attr(mean, "keepdims", 0);
  const std::string y = b.relu("relu", b.out(mean));
  b.output(b.out(
      Builder::attr(b.node("/logsoftmax", "LogSoftmax", {b.linear("fc2", y, 4, 3)}), "axis", 1)));
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_onnx_models DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::pair<const char*, Builder> models[] = {
      {"lenet.onnx", lenet()},         {"gpt.onnx", gpt(16, 32, 32, 2)},
      {"cnn_small.onnx", small_cnn()}, {"gpt_small.onnx", gpt(4, 8, 8, 2)},
      {"mlp_small.onnx", small_mlp()},
  };
  for (const auto& [name, model] : models) {
    const std::string path = dir + "/" + name;
    if (!model.write(path)) {
      std::fprintf(stderr, "make_onnx_models: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  return 0;
}
