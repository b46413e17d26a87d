// The memfit side of the side-by-side comparison with PyTorch (bench/peer/):
// one training step of a zoo model (forward, backward, SGD with momentum 0.9)
// on synthetic data, run on request by the driver bench/peer/compare.py.
//
//   ./build/bench/peer_step --model resnet18 --batch 8 [MODEL SIZE FLAGS]
//        [--threads 2] [--no-sharing] [--recompute none|sqrt|budget] [--warmup 2]
//        [--attention fused|naive] [--no-dropout]
//   ./build/bench/peer_step --version-info   (oneDNN's version, as JSON)
//
// Protocol, one line each way, so that the driver can alternate programs that
// stay loaded (their set-up, like PyTorch's compilation, is paid once):
//   prints  {"ready": true, "arena_bytes": A, "nodes": N}   once compiled and warmed up
//   reads   "run K"   runs K steps, prints {"seconds": [s1, ..., sK]}
//   reads   "done"    prints {"arena_bytes": A, "high_water_bytes": H,
//                             "peak_rss_bytes": R, "start_rss_bytes": S,
//                             "last_loss": L} and exits
//   (R: getrusage's peak resident set; S: the resident set when main() starts)
// Errors go to stderr with exit status 1. The program builds only the step
// graph (no evaluation graph), so its resident memory is the arena (which
// holds the state from one step to the next), the batches and the code.
#include <oneapi/dnnl/dnnl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>

#include "core/random.h"
#include "memfit/builder.h"
#include "train/data_source.h"
#include "train/training_program.h"

using namespace memfit;

namespace {

constexpr int64_t kBatches = 4;  // distinct synthetic batches, used in turn

DataKind data_kind(const std::string& model) {
  auto info = model_info(model);
  return info ? info->data : DataKind::images;
}

// The process's peak resident set: ru_maxrss is in KiB on Linux.
size_t peak_rss_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<size_t>(usage.ru_maxrss) * 1024;
}

// Parameters and state as the model's Init says, drawn like
// TrainingProgram::init_state; optimizer state at zero.
void init_state(const std::vector<std::pair<std::string, Shape>>& persistent, const Model& model,
                StateStore& state) {
  uint64_t key = 0;
  for (const auto& [name, shape] : persistent) {
    std::vector<float>& data = state[name];
    data.assign(static_cast<size_t>(num_elements(shape)), 0.0f);
    auto it = model.init.find(name);
    ++key;
    if (it == model.init.end()) continue;
    for (size_t i = 0; i < data.size(); ++i) {
      switch (it->second.kind) {
        case Init::Kind::zeros:
          break;
        case Init::Kind::ones:
          data[i] = 1.0f;
          break;
        case Init::Kind::uniform:
          data[i] = (2.0f * random_uniform(7, 0, key, i) - 1.0f) * it->second.bound;
          break;
        case Init::Kind::values:
          data[i] = (*it->second.values)[i];
          break;
      }
    }
  }
}

// The process's resident set now: the second field of /proc/self/statm, in pages.
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

int fail(const std::string& message) {
  std::fprintf(stderr, "peer_step: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t start_rss = resident_bytes();
  CLI::App app{"memfit training steps for the comparison with PyTorch (bench/peer)"};
  ModelOptions options;
  int threads = 2;
  bool no_sharing = false;
  std::string recompute_text = "none";
  int warmup = 2;
  float lr = 0.01f;
  app.add_option("--model", options.name, "zoo model");
  app.add_option("--batch", options.batch, "examples per step")->check(CLI::PositiveNumber);
  app.add_option("--image-size", options.image_size, "side of the input image (0: the model's)");
  app.add_option("--classes", options.classes, "classes (0: the model's)");
  app.add_option("--depth", options.depth, "layers (0: the model's)");
  app.add_option("--width", options.width, "width (0: the model's)");
  app.add_option("--seq-len", options.seq_len, "positions per sequence (0: the model's)");
  app.add_option("--vocab", options.vocab, "vocabulary (0: the model's)");
  app.add_flag_callback(
      "--no-dropout", [&options] { options.dropout = false; }, "leave out the dropout layers");
  std::string attention = "fused";
  app.add_option("--attention", attention, "gpt: fused or naive attention")
      ->check(CLI::IsMember({"fused", "naive"}));
  app.add_option("--threads", threads, "threads of the cpu backend")->check(CLI::PositiveNumber);
  app.add_flag("--no-sharing", no_sharing, "a slice of memory per value (no planning)");
  bool plain_layouts = false;
  app.add_flag("--plain-layouts", plain_layouts, "every value in the plain layout");
  app.add_option("--recompute", recompute_text, "none, sqrt, budget, optimal, ...")
      ->check(CLI::IsMember(names_of<Recompute>()));
  app.add_option("--warmup", warmup, "steps run before the first request")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--lr", lr, "SGD learning rate (momentum 0.9)");
  bool version_info = false;
  app.add_flag("--version-info", version_info, "print the oneDNN this program runs and exit");
  CLI11_PARSE(app, argc, argv);
  options.attention = attention == "naive" ? AttentionForm::naive : AttentionForm::fused;
  if (version_info) {
    // memfit calls no BLAS: matmul and linear run oneDNN's own kernels.
    const dnnl_version_t* v = dnnl_version();
    std::printf("{\"onednn\": \"%d.%d.%d (%s)\", \"cpu_runtime\": \"%s\"}\n", v->major, v->minor,
                v->patch, v->hash, v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "not OpenMP");
    return 0;
  }

  if (options.name.empty()) return fail("--model is required");
  StepSpec spec;
  spec.model = options;
  spec.optimizer.lr = lr;
  spec.threads = threads;
  spec.share = !no_sharing;
  spec.blocked_layouts = !plain_layouts;
  auto recompute = parse_name<Recompute>(recompute_text);
  if (!recompute) return fail(recompute.message());
  spec.recompute = *recompute;
  auto compiled = compile_step(spec);
  if (!compiled) return fail(compiled.message());
  const Model& model = compiled->model;
  std::unique_ptr<Executable> exe = std::move(compiled->apply);
  if (const Status allocated = exe->allocate(); !allocated.is_ok()) return fail(allocated.message());
  StateStore state;
  init_state(compiled->persistent, model, state);
  const Status loaded = exe->load_state(state);
  if (!loaded.is_ok()) return fail(loaded.message());
  state = StateStore();  // the arena holds the state from here on

  auto data = synthetic_source(data_kind(options.name), model, kBatches * options.batch, 1, 5);
  if (!data) return fail(data.message());
  std::vector<Batch> batches;
  std::vector<int64_t> examples(static_cast<size_t>(options.batch));
  for (int64_t i = 0; i < kBatches; ++i) {
    batches.push_back(Batch::for_model(model));
    std::iota(examples.begin(), examples.end(), i * options.batch);
    const Status filled = (*data)->fill(false, examples, batches.back());
    if (!filled.is_ok()) return fail(filled.message());
  }

  int64_t steps = 0;
  float last_loss = 0.0f;
  size_t high_water = 0;
  // One step on the next batch; returns its wall-clock seconds.
  auto run_step = [&]() -> Result<double> {
    const Batch& batch = batches[static_cast<size_t>(steps % kBatches)];
    const auto start = std::chrono::steady_clock::now();
    MEMFIT_ASSIGN_OR_RETURN(StepResult result,
                            exe->run(batch.feeds(), StepContext{5, steps, steps, 1.0f}));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++steps;
    last_loss = result.outputs.at("loss")[0];
    high_water = std::max(high_water, result.high_water_bytes);
    return seconds;
  };
  for (int i = 0; i < warmup; ++i) {
    auto s = run_step();
    if (!s) return fail(s.message());
  }
  const size_t arena = exe->plan().arena_bytes;
  std::printf("{\"ready\": true, \"arena_bytes\": %zu, \"nodes\": %zu}\n", arena,
              exe->graph().num_nodes());
  std::fflush(stdout);

  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.rfind("run ", 0) == 0) {
      const long k = std::stol(line.substr(4));
      std::string out = "{\"seconds\": [";
      for (long i = 0; i < k; ++i) {
        auto s = run_step();
        if (!s) return fail(s.message());
        out += (i ? ", " : "") + std::to_string(*s);
      }
      std::printf("%s]}\n", out.c_str());
    } else if (line == "done") {
      std::printf(
          "{\"arena_bytes\": %zu, \"high_water_bytes\": %zu, \"peak_rss_bytes\": %zu, "
          "\"start_rss_bytes\": %zu, \"last_loss\": %.6g}\n",
          arena, high_water, peak_rss_bytes(), start_rss, static_cast<double>(last_loss));
      return 0;
    } else {
      return fail("unknown request '" + line + "' (expected 'run K' or 'done')");
    }
    std::fflush(stdout);
  }
  return fail("the driver closed the input before 'done'");
}
