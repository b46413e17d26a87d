// The memfit side of the numerical cross-check with PyTorch (bench/peer/):
// one forward and backward pass of a zoo model, without dropout, from weights
// and a batch written by bench/peer/crosscheck.py; writes the loss and the
// gradient of every parameter. With --onnx (bench/onnx/check.py) the model
// comes from an ONNX file, and its weights from the file unless --weights
// is given; --forward runs the evaluation graph instead (batch norm on
// running statistics) and writes its output `logits`.
//
//   ./build/bench/peer_grads --model lenet --batch 4 [MODEL SIZE FLAGS]
//        --weights W.ckpt --inputs B.ckpt --out G.ckpt [--threads 2] [--backend cpu|reference]
//   ./build/bench/peer_grads --onnx M.onnx --batch 4 [--forward] [--weights W.ckpt]
//        --inputs B.ckpt --out G.ckpt
//
// Every file is in memfit's checkpoint format (src/train/checkpoint.h):
//   W.ckpt  one tensor per parameter and per batch-norm running statistic,
//           named as in the model (`conv1.weight`, `layer1.0.bn1.running_mean`)
//   B.ckpt  one tensor per data input of the model (`images`, `tokens`,
//           `labels`), shaped as the model's input; integer inputs (tokens,
//           labels) hold their exact values as floats (all below 2^24)
//   G.ckpt  `loss` (shape (1)) and `<parameter>.grad` for every parameter
// The step is the training graph of the model (batch norm on batch
// statistics) with the gradients of the mean loss marked as outputs; no
// optimizer runs.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <map>

#include "autodiff/autodiff.h"
#include "memfit/builder.h"
#include "onnx/model_source.h"
#include "ops/typed_graph.h"
#include "passes/assign_layouts.h"
#include "train/checkpoint.h"
#include "train/training_program.h"

using namespace memfit;

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "peer_grads: %s\n", message.c_str());
  return 1;
}

// The tensors of `checkpoint` by name.
std::map<std::string, const NamedTensor*> by_name(const Checkpoint& checkpoint) {
  std::map<std::string, const NamedTensor*> out;
  for (const NamedTensor& t : checkpoint.tensors) out[t.name] = &t;
  return out;
}

// The tensor called `name` with shape `shape`, or an error naming what differs.
Result<const NamedTensor*> find(const std::map<std::string, const NamedTensor*>& tensors,
                                const std::string& file, const std::string& name,
                                const Shape& shape) {
  auto it = tensors.find(name);
  if (it == tensors.end()) return Status::error(file + " has no tensor '" + name + "'");
  if (it->second->shape != shape) {
    return Status::error(file + ": '" + name + "' has shape " + shape_string(it->second->shape) +
                         ", the model wants " + shape_string(shape));
  }
  return it->second;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"memfit loss and gradients for the cross-check with PyTorch (bench/peer)"};
  ModelOptions options;
  options.dropout = false;  // PyTorch and memfit draw different masks
  std::string weights_path, inputs_path, out_path;
  int threads = 2;
  std::string backend_name = "cpu";
  bool forward = false;
  auto* model_flag = app.add_option("--model", options.name, "zoo model");
  app.add_option("--onnx", options.onnx, "an ONNX model instead of a zoo model")->excludes(model_flag);
  app.add_flag("--forward", forward, "run the evaluation graph and write its output `logits`");
  app.add_option("--batch", options.batch, "examples")->check(CLI::PositiveNumber);
  app.add_option("--image-size", options.image_size, "side of the input image (0: the model's)");
  app.add_option("--classes", options.classes, "classes (0: the model's)");
  app.add_option("--depth", options.depth, "layers (0: the model's)");
  app.add_option("--width", options.width, "width (0: the model's)");
  app.add_option("--seq-len", options.seq_len, "positions per sequence (0: the model's)");
  app.add_option("--vocab", options.vocab, "vocabulary (0: the model's)");
  app.add_option("--weights", weights_path,
                 "parameters and running statistics (with --onnx: the file's, unless given)");
  app.add_option("--inputs", inputs_path, "one batch: every data input")->required();
  app.add_option("--out", out_path, "where to write the loss and the gradients")->required();
  app.add_option("--threads", threads, "threads of the cpu backend")->check(CLI::PositiveNumber);
  app.add_option("--backend", backend_name, "cpu (oneDNN) or reference (plain loops in double)")
      ->check(CLI::IsMember({"cpu", "reference"}));
  CLI11_PARSE(app, argc, argv);
  if (options.name.empty() && options.onnx.empty()) return fail("give --model or --onnx");
  if (options.onnx.empty() && weights_path.empty()) return fail("--weights is required with --model");
  if (!options.onnx.empty()) options.name = "onnx";

  auto model = make_model(options, !forward);
  if (!model) return fail(model.message());
  Graph& graph = model->graph;
  // Value names survive remove_dead_nodes; ids may not.
  std::vector<std::pair<std::string, std::string>> param_grad_names;  // (parameter, gradient)
  if (!forward) {
    auto grads = append_gradients(graph, model->loss, model->params);
    if (!grads) return fail(grads.message());
    for (size_t i = 0; i < grads->size(); ++i) {
      graph.mark_output((*grads)[i]);
      param_grad_names.emplace_back(graph.value(model->params[i]).name,
                                    graph.value((*grads)[i]).name);
    }
  }
  Graph step = remove_dead_nodes(graph);
  const Status verified = verify_graph(step);
  if (!verified.is_ok()) return fail(verified.message());

  Checkpoint weights;
  if (!weights_path.empty()) {
    auto loaded = load_checkpoint(weights_path);
    if (!loaded) return fail(loaded.message());
    weights = std::move(loaded).value();
  }
  const auto weight_tensors = by_name(weights);
  auto inputs = load_checkpoint(inputs_path);
  if (!inputs) return fail(inputs.message());
  const auto input_tensors = by_name(*inputs);

  StateStore state;
  for (const Value& v : step.values()) {
    if (v.producer.valid() || !is_persistent(v.role)) continue;
    const auto init = model->init.find(v.name);
    if (weights_path.empty() && init != model->init.end() && init->second.values) {
      state[v.name] = *init->second.values;  // the ONNX file's initializer
      continue;
    }
    auto t = find(weight_tensors, weights_path, v.name, v.type.shape);
    if (!t) return fail(t.message());
    state[v.name] = (*t)->data;
  }
  // Integer inputs become i32 buffers; the floats must be whole numbers.
  std::map<std::string, std::vector<float>> f32_inputs;
  std::map<std::string, std::vector<int32_t>> i32_inputs;
  Feeds feeds;
  for (ValueId id : model->inputs) {
    const Value& v = model->graph.value(id);
    if (forward && v.role == Role::label) {  // the evaluation graph does not read them
      feeds[v.name] = (i32_inputs[v.name] = std::vector<int32_t>(static_cast<size_t>(v.elements()), 0)).data();
      continue;
    }
    auto t = find(input_tensors, inputs_path, v.name, v.type.shape);
    if (!t) return fail(t.message());
    if (v.type.dtype == DType::f32) {
      feeds[v.name] = (f32_inputs[v.name] = (*t)->data).data();
      continue;
    }
    std::vector<int32_t>& ints = i32_inputs[v.name];
    for (float x : (*t)->data) {
      if (x != std::floor(x) || std::fabs(x) > 16777216.0f) {
        return fail(inputs_path + ": '" + v.name + "' holds " + std::to_string(x) +
                    ", not a whole number below 2^24");
      }
      ints.push_back(static_cast<int32_t>(x));
    }
    feeds[v.name] = ints.data();
  }

  auto backend = make_backend(parse_name<BackendKind>(backend_name).value(), threads);
  if (!backend) return fail(backend.message());
  // The layouts memfit trains in: blocked convolution networks on cpu.
  auto laid_out = assign_layouts(step, **backend);
  if (!laid_out) return fail(laid_out.message());
  // The layout pass keeps the outputs in order, reordered to plain under new
  // names where they were blocked (weight gradients).
  std::map<std::string, std::string> output_name;
  for (size_t i = 0; i < step.outputs().size(); ++i) {
    output_name[step.value(step.outputs()[i]).name] = laid_out->value(laid_out->outputs()[i]).name;
  }
  auto exe = Executable::compile(std::move(laid_out).value(), **backend);
  if (!exe) return fail(exe.message());
  auto result = (*exe)->run(state, feeds, StepContext{});
  if (!result) return fail(result.message());

  Checkpoint out;
  out.model = options.name;
  if (forward) {
    const Value& logits = model->graph.value(model->logits);
    out.tensors.push_back({"logits", logits.type.shape, result->outputs.at(output_name.at(logits.name))});
    const Status saved = save_checkpoint(out_path, out);
    if (!saved.is_ok()) return fail(saved.message());
    std::printf("logits %s written to %s\n", shape_string(logits.type.shape).c_str(), out_path.c_str());
    return 0;
  }
  const std::string loss_name = output_name.at(model->graph.value(model->loss).name);
  if (!result->outputs.count(loss_name)) return fail("the step has no output '" + loss_name + "'");
  out.tensors.push_back({"loss", {1}, result->outputs.at(loss_name)});
  for (size_t i = 0; i < param_grad_names.size(); ++i) {
    const auto& [param, grad] = param_grad_names[i];
    out.tensors.push_back({param + ".grad", model->graph.value(model->params[i]).type.shape,
                           result->outputs.at(output_name.at(grad))});
  }
  const Status saved = save_checkpoint(out_path, out);
  if (!saved.is_ok()) return fail(saved.message());
  std::printf("loss %.7g, %zu gradients written to %s\n",
              static_cast<double>(out.tensors[0].data[0]), param_grad_names.size(),
              out_path.c_str());
  return 0;
}
