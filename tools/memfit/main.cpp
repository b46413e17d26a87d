// The memfit command line. Thin: it binds flags to include/memfit's structs
// (the step flags once, for train, plan and maxbatch) and calls the library,
// which holds every default and check.
#include <CLI/CLI.hpp>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "memfit/builder.h"
#include "memfit/dist.h"
#include "memfit/bytes.h"
#include "memfit/plan.h"
#include "memfit/step.h"
#include "memfit/train.h"
#include "core/output_path.h"

namespace {

constexpr int kUsageError = 2;

// A flag combination refused after parsing.
int usage_error(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "memfit %s: %s\n", command.c_str(), message.c_str());
  return kUsageError;
}

// A flag whose value is one of Enum's names (include/memfit/techniques.h).
// Accepts the names of Enum's table; the message of a wrong one is the
// library's own ("unknown swap trigger 'x'; use chain_rule or direct_order").
template <typename Enum>
CLI::Validator name_validator() {
  std::string list;
  for (const auto& name : memfit::names_of<Enum>()) list += (list.empty() ? "" : ",") + name;
  return CLI::Validator(
      [](std::string& text) {
        auto parsed = memfit::parse_name<Enum>(text);
        return parsed ? std::string() : parsed.message();
      },
      "{" + list + "}");
}

template <typename Enum>
CLI::Option* add_named(CLI::App* cmd, const std::string& flag, Enum& target,
                       const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          flag, [&target](const std::string& text) { target = memfit::parse_name<Enum>(text).value(); },
          help)
      ->check(name_validator<Enum>())
      ->default_str(std::string(memfit::name_of(target)));
}
template <typename Enum>
CLI::Option* add_named(CLI::App* cmd, const std::string& flag, std::optional<Enum>& target,
                       const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          flag, [&target](const std::string& text) { target = memfit::parse_name<Enum>(text).value(); },
          help)
      ->check(name_validator<Enum>());
}

// A flag that takes one of a few names, the first the default; an unknown
// name is refused with the list.
template <typename Enum>
CLI::Option* add_choice(CLI::App* cmd, const std::string& flag, Enum& target,
                        const std::vector<std::pair<std::string, Enum>>& choices,
                        const std::string& help) {
  std::vector<std::string> names;
  for (const auto& choice : choices) names.push_back(choice.first);
  return cmd
      ->add_option_function<std::string>(
          flag,
          [&target, choices](const std::string& text) {
            for (const auto& [name, value] : choices) {
              if (name == text) target = value;
            }
          },
          help)
      ->check(CLI::IsMember(names))
      ->default_str(names.front());
}

// The check of a number flag: a finite number (never nan or infinity), more
// than 0 (`positive`) or at least 0. Its messages say the range in words.
CLI::Validator number_validator(bool positive) {
  return CLI::Validator(
      [positive](std::string& text) {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size()) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(value)) return "'" + text + "' is not a finite number";
        if (positive && !(value > 0)) return "must be more than 0, not " + text;
        if (!positive && value < 0) return "must be 0 or more, not " + text;
        return std::string();
      },
      positive ? "POSITIVE" : "NONNEGATIVE");
}
const CLI::Validator kPositive = number_validator(true);
const CLI::Validator kNonNegative = number_validator(false);

CLI::Validator bytes_validator() {
  return CLI::Validator(
      [](std::string& text) {
        auto bytes = memfit::parse_bytes(text);
        if (!bytes) return bytes.message();
        return *bytes == 0 ? std::string("the budget must be more than 0 bytes") : std::string();
      },
      "BYTES");
}

void add_model_flags(CLI::App* cmd, memfit::ModelOptions& model) {
  cmd->add_option("--model", model.name, "model (memfit models lists them)")
      ->check(CLI::IsMember(memfit::model_names()))
      ->capture_default_str();
  cmd->add_option("--onnx", model.onnx,
                  "take the model from this ONNX file (opset 13 to 17) instead of --model; "
                  "its first dimension is the batch")
      ->excludes("--model");
  add_choice(cmd, "--loss", model.loss, {{"cross-entropy", "cross-entropy"}, {"mse", "mse"}},
             "--onnx: the loss over the model's first output: cross-entropy (classes last, "
             "integer labels) or mse (labels of the output's shape)");
  cmd->add_option("--batch", model.batch, "examples per micro-batch")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--image-size", model.image_size,
                  "side of the square input image (0: the model's)")
      ->check(kNonNegative);
  cmd->add_option("--classes", model.classes, "classes of the classifier (0: the model's)")
      ->check(kNonNegative);
  cmd->add_option("--depth", model.depth,
                  "layers: resnet-cifar 9n+2, LSTM or Transformer layers (0: the model's)")
      ->check(kNonNegative);
  cmd->add_option("--width", model.width,
                  "channels of the first stage, or the hidden width (0: the model's)")
      ->check(kNonNegative);
  cmd->add_option("--seq-len", model.seq_len, "positions per sequence (0: the model's)")
      ->check(kNonNegative);
  cmd->add_option("--volume", model.volume, "side of the cubic input volume (0: the model's)")
      ->check(kNonNegative);
  cmd->add_option("--vocab", model.vocab, "tokens in the vocabulary (0: the model's)")
      ->check(kNonNegative);
  add_choice(cmd, "--attention", model.attention,
             {{"fused", memfit::AttentionForm::fused}, {"naive", memfit::AttentionForm::naive}},
             "attention of gpt, transformer and seq2seq: fused (one op that keeps no positions x "
             "positions matrix) or naive (matmul, softmax, dropout, matmul: the same math, for "
             "comparison)");
  cmd->add_flag_callback(
      "--no-dropout", [&model] { model.dropout = false; },
      "leave out the model's dropout layers, in training too (runs that must compute the "
      "same numbers as another framework)");
}

void add_technique_flags(CLI::App* cmd, memfit::StepSpec& spec) {
  using memfit::TflmsOptions;
  add_named(cmd, "--policy", spec.policy,
            "the memory techniques a step may use: none (no sharing), share (the planner's "
            "sharing only), recompute (sharing and --recompute, default budget), swap (sharing "
            "and --swap, default budget) or auto (keep, recompute or swap each activation: the "
            "least predicted step time that fits --budget); default: as --recompute, --swap and "
            "--mirror say");
  cmd->add_flag_callback(
      "--no-sharing,--no-plan", [&spec] { spec.share = false; },
      "give every value and workspace a slice of its own (--policy none)");
  add_named(cmd, "--recompute", spec.recompute,
            "recompute activations in the backward pass instead of keeping them: none, sqrt (a "
            "checkpoint every sqrt(n) blocks), budget (Chen's greedy plan, searched for the "
            "smallest arena or, under --budget, the least recomputation that fits), recursive "
            "(checkpoints nested in log2(n) levels: O(log n) memory), optimal (dynamic "
            "programming over the chain of blocks: the least predicted recompute time that fits "
            "--budget, or sqrt's arena) or milp (an integer program solved by CBC, for small "
            "graphs of any shape); default none");
  cmd->add_flag_callback(
      "--no-fuse", [&spec] { spec.fuse = false; },
      "keep every gradient contribution's matmul and its add apart (fusion adds the product "
      "into the running sum)");
  cmd->add_flag_callback(
      "--plain-layouts", [&spec] { spec.blocked_layouts = false; },
      "keep every value in the plain row-major layout (by default the cpu backend keeps the "
      "values of convolutions, batch norm and pooling in oneDNN's channel-blocked layout, with "
      "reorder nodes where they meet other ops)");
  cmd->add_flag("--mirror", spec.mirror,
                "also recompute the outputs of cheap ops (activations, batch norm, dropout, "
                "scale, add, mul, reshape, transpose) for each backward reader; with any "
                "--recompute, or alone");
  add_named(cmd, "--cost", spec.cost,
            "node times that optimal, milp and auto minimize and plans predict: measured (each "
            "distinct node timed on the backend) or roofline (flops and bytes over fixed "
            "machine constants; deterministic)");
  cmd->add_option("--milp-seconds", spec.milp_seconds, "--recompute milp: CBC's time limit, in all")
      ->check(kPositive)
      ->capture_default_str();
  add_named(cmd, "--swap", spec.swap,
            "swap activations to the host pool and back: none, refcount (those idle across the "
            "peak, copies hidden by compute), budget (largest bytes x idle time first, until the "
            "arena fits --budget) or tflms (TFLMS: the first --swap-n-tensors, swap-ins "
            "triggered --swap-lb..--swap-ub nodes ahead); default none");
  cmd->add_option("--link-gbps", spec.link_gbps,
                  "bandwidth of the host link in GB/s: the copy engine runs no faster, and the "
                  "swap policies plan with it (0: unlimited, planned as 10)")
      ->check(kNonNegative);
  TflmsOptions& o = spec.tflms;
  cmd->add_option("--swap-n-tensors", o.n_tensors,
                  "--swap tflms: swap only the first N candidates in the order of their producers "
                  "(-1: all)")
      ->capture_default_str();
  cmd->add_option("--swap-lb", o.lb,
                  "--swap tflms: a swap-in starts at least this many nodes before its consumer")
      ->capture_default_str();
  cmd->add_option("--swap-ub", o.ub, "--swap tflms: ... and at most this many (at least --swap-lb)")
      ->capture_default_str();
  add_named(cmd, "--swap-trigger", o.trigger,
            "--swap tflms: chain_rule (after the gradient of the op --swap-lb hops downstream of "
            "the producer) or direct_order (--swap-lb nodes before the consumer in the "
            "schedule)");
  cmd->add_flag("--swap-fuse", o.fuse,
                "--swap tflms: consumers within --swap-ub of one trigger share one swap-in "
                "(fewer copies, the copy stays longer)");
  cmd->add_flag("--swap-branches", o.branches,
                "--swap tflms: also swap forward values between two forward readers far apart "
                "(skip connections)");
  cmd->add_option("--swap-branch-threshold", o.branch_threshold,
                  "--swap tflms --swap-branches: only readers more than this many nodes apart "
                  "(0: any distance)")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--budget",
         [&spec](const std::string& text) { spec.budget = memfit::parse_bytes(text).value(); },
         "largest step arena allowed, e.g. 2GiB or 1.5GB; the recompute, swap and auto choices "
         "fit it, and a step that does not is refused before anything runs, naming the smallest "
         "arena any --recompute strategy reaches")
      ->check(bytes_validator());
}

// The flags of one training step, bound once for train, plan and maxbatch.
void add_step_flags(CLI::App* cmd, memfit::StepSpec& spec) {
  add_model_flags(cmd, spec.model);
  cmd->add_option("--accumulate", spec.accumulate, "micro-batches per optimizer step")
      ->check(kPositive)
      ->capture_default_str();
  add_named(cmd, "--optimizer", spec.optimizer.kind, "sgd (momentum 0.9) or adamw");
  using Kind = memfit::OptimizerConfig::Kind;
  char lr_help[96];
  std::snprintf(lr_help, sizeof lr_help, "learning rate (default: %g for sgd, %g for adamw)",
                memfit::default_learning_rate(Kind::sgd), memfit::default_learning_rate(Kind::adamw));
  cmd->add_option("--lr", spec.optimizer.lr, lr_help)->check(kPositive);
  cmd->add_option("--weight-decay", spec.optimizer.weight_decay, "weight decay")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--backend", spec.backend,
                  "cpu (oneDNN) or reference (plain loops): whose kernels, layouts and "
                  "workspaces")
      ->check(CLI::IsMember({"cpu", "reference"}))
      ->capture_default_str();
  cmd->add_option("--threads", spec.threads,
                  "threads of the cpu backend, whose oneDNN workspaces depend on them (plan with "
                  "the count train runs with; default: one per core)")
      ->check(kNonNegative);
  cmd->add_option("--bucket-mb", spec.bucket_mb,
                  "data parallel: gradients are summed over the ranks in buckets of this many MB "
                  "(1e6 bytes), each started as soon as the backward pass completes it (0: one "
                  "per gradient)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--comm-gbps", spec.comm_gbps,
                  "data parallel: the network's bandwidth per rank in GB/s: the communication "
                  "thread runs no faster, and plans predict with it (0: unlimited, predicted as "
                  "10)")
      ->check(kNonNegative);
  add_choice(cmd, "--shard", spec.shard,
             {{"none", memfit::Shard::none},
              {"optimizer", memfit::Shard::optimizer},
              {"gradients", memfit::Shard::gradients}},
             "data parallel (ZeRO): each rank keeps the optimizer state of 1/N of the parameters "
             "(optimizer), and also only 1/N of the summed gradients (gradients); default none");
  add_technique_flags(cmd, spec);
}

// --ranks, for plan and maxbatch: the data-parallel width to plan for.
void add_ranks_flag(CLI::App* cmd, memfit::StepSpec& spec) {
  cmd->add_option("--ranks", spec.ranks,
                  "plan one rank of a data-parallel run of this many ranks (mpirun -np N memfit "
                  "train): its step, gradient buckets and communication, without starting any "
                  "process")
      ->check(kPositive)
      ->capture_default_str();
}

// --profile and --trace, for train and plan.
void add_profile_flags(CLI::App* cmd, memfit::TrainOptions& train) {
  cmd->add_flag("--profile", train.profile,
                "print where a step's time goes: by phase (forward, backward, update, recompute, "
                "copies) and by op kind, the mean of the steps after the first");
  cmd->add_option("--trace", train.trace_path,
                  "write one step as a Chrome trace (JSON; Perfetto or chrome://tracing open it), "
                  "with compute and copy-engine lanes");
}

void add_train_flags(CLI::App* cmd, memfit::TrainOptions& train) {
  cmd->add_option("--epochs", train.epochs, "passes over the training set")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--stop-after", train.stop_after,
                  "stop after this epoch, as if interrupted (to --resume later)")
      ->check(kNonNegative);
  add_named(cmd, "--schedule", train.schedule,
            "learning rate: constant, or cosine decay to 0 over the run");
  cmd->add_option("--seed", train.seed, "seed of initialization, shuffling and dropout")
      ->capture_default_str();
  cmd->add_flag("--synthetic", train.synthetic,
                "train on a synthetic data set made for the model's input (any model)");
  cmd->add_option("--data", train.data_dir,
                  "directory of the Fashion-MNIST .gz files (default: "
                  "/usr/share/datasets/fashion-mnist)");
  cmd->add_option("--save", train.save_path, "write a checkpoint here after every epoch");
  cmd->add_option("--resume", train.resume_path, "continue from this checkpoint");
  cmd->add_option("--save-onnx", train.save_onnx_path,
                  "--onnx: write the model with its trained weights to this ONNX file at the end");
  cmd->add_flag("--poison", train.poison,
                "fill memory with NaN as soon as its value dies (checks the plan)");
  cmd->add_option("--limit", train.limit,
                  "Fashion-MNIST: use only the first N training and test examples; synthetic: N "
                  "training examples (default 1024)")
      ->check(kNonNegative);
  cmd->add_option("--log-every", train.log_every, "optimizer steps between progress lines")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_flag("--check-replicas", train.check_replicas,
                "data parallel: after every optimizer step, check that every rank's parameters "
                "and optimizer state are bit-identical to rank 0's");
  add_profile_flags(cmd, train);
}

// The signal (SIGINT, SIGTERM) that asked training to stop; 0: none.
volatile std::sig_atomic_t stop_signal = 0;

// The first SIGINT or SIGTERM asks training to stop after its current step;
// the handler then reverts to the default (SA_RESETHAND), so a second one
// ends the process at once.
extern "C" void on_stop_signal(int signal) {
  stop_signal = signal;
  static const char message[] =
      "\nmemfit train: stopping after this step (a second signal stops at once)\n";
  const ssize_t written = write(STDERR_FILENO, message, sizeof message - 1);
  (void)written;
}

void catch_stop_signals() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int run_train(memfit::TrainOptions options) {
  catch_stop_signals();
  options.stop_requested = [] { return stop_signal != 0; };
  // Started by mpirun as one of several ranks: data parallel over MPI.
  std::unique_ptr<memfit::Communicator> comm;
  if (memfit::launched_by_mpi()) {
    auto mpi = memfit::make_mpi_communicator();
    if (!mpi) {
      std::fprintf(stderr, "memfit train: %s\n", mpi.message().c_str());
      return 1;
    }
    comm = std::move(mpi).value();
    options.comm = comm.get();
  }
  auto report = memfit::train(options, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  if (!report) {
    std::fprintf(stderr, "memfit train: %s\n", report.message().c_str());
    // The other ranks may be waiting for this one in a collective: end them all.
    if (comm) {
      std::fprintf(stderr, "memfit train: rank %d of %d failed; ending every rank\n", comm->rank(),
                   comm->size());
      std::fflush(stderr);
      comm->abort(1);
    }
    return 1;
  }
  if (comm && comm->rank() != 0) return report->stopped ? 128 + stop_signal : 0;  // rank 0 reports
  if (report->stopped) {
    std::fprintf(stderr, "memfit train: stopped by %s%s\n", stop_signal == SIGTERM ? "SIGTERM" : "SIGINT",
                 options.save_path.empty() ? "" : (", checkpoint " + options.save_path + " written").c_str());
    return 128 + stop_signal;
  }
  if (!report->test_accuracy.empty()) {
    std::printf("final test accuracy: %.2f%%\n", 100.0 * report->test_accuracy.back());
  }
  std::printf("training speed: %.0f examples/s\n", report->examples_per_second);
  std::printf("step memory: planned arena %zu bytes, measured high-water mark %zu bytes\n",
              report->arena_bytes, report->high_water_bytes);
  return 0;
}

// What `memfit plan` writes besides the step.
struct PlanOutput {
  bool json = false;
  std::string timeline_path;  // empty: no SVG
  memfit::TrainOptions profile;  // with profile or trace_path: run the step and say where time goes
};

// Steps `memfit plan --profile` runs on synthetic data: one left out, the rest averaged.
constexpr int64_t kProfileSteps = 6;

// Runs the planned step on synthetic data (kProfileSteps optimizer steps) and
// prints only its profile and where the trace went.
int run_plan_profile(const memfit::PlanRequest& request, memfit::TrainOptions options) {
  options.step = request.step;
  options.synthetic = true;
  options.epochs = 1;
  options.schedule = memfit::Schedule::constant;
  options.limit = kProfileSteps * request.step.model.batch * request.step.accumulate;
  auto report = memfit::train(options, [](const std::string& line) {
    if (line.rfind("profile", 0) == 0 || line.rfind("trace", 0) == 0) std::printf("%s\n", line.c_str());
  });
  if (!report) {
    std::fprintf(stderr, "memfit plan: running the step to profile it: %s\n", report.message().c_str());
    return 1;
  }
  return 0;
}

int run_plan(const memfit::PlanRequest& request, const PlanOutput& output) {
  // Where plan will write, checked before it plans.
  for (const auto& [path, flag] : {std::pair{output.timeline_path, "--timeline"},
                                   std::pair{output.profile.trace_path, "--trace"}}) {
    if (path.empty()) continue;
    if (const memfit::Status ok = memfit::check_output_path(path, flag); !ok.is_ok()) {
      std::fprintf(stderr, "memfit plan: %s\n", ok.message().c_str());
      return 1;
    }
  }
  auto report = memfit::plan_training_step(request);
  if (!report) {
    std::fprintf(stderr, "memfit plan: %s\n", report.message().c_str());
    return 1;
  }
  if (!output.timeline_path.empty()) {
    const memfit::ModelOptions& model = request.step.model;
    const std::string title = model.name + ", batch " + std::to_string(model.batch) +
                              ": live memory over one training step";
    errno = 0;
    std::ofstream file(output.timeline_path, std::ios::binary | std::ios::trunc);
    file << memfit::timeline_svg(*report, title);
    if (!file.flush()) {
      std::fprintf(stderr, "memfit plan: cannot write the timeline to %s: %s\n",
                   output.timeline_path.c_str(), errno != 0 ? std::strerror(errno) : "write failed");
      return 1;
    }
  }
  const std::string out = output.json ? memfit::plan_report_json(request, *report)
                                      : memfit::plan_report_text(request, *report);
  std::fputs(out.c_str(), stdout);
  if (output.profile.profile || !output.profile.trace_path.empty()) {
    std::fflush(stdout);
    return run_plan_profile(request, output.profile);
  }
  return 0;
}

int run_max_batch(const memfit::PlanRequest& request, memfit::Capacity vary, bool json) {
  auto report = memfit::find_max_batch(request, vary);
  if (!report) {
    std::fprintf(stderr, "memfit maxbatch: %s\n", report.message().c_str());
    return 1;
  }
  const std::string out = json ? memfit::max_batch_json(request, *report)
                               : memfit::max_batch_text(request, *report);
  std::fputs(out.c_str(), stdout);
  return 0;
}

// `memfit models`: every model at its default size, with its parameter count.
int run_models() {
  std::printf("%-13s %12s  %-8s %-15s %7s  %s\n", "model", "parameters", "data", "input", "classes",
              "description");
  for (const memfit::ModelInfo& info : memfit::model_infos()) {
    auto parameters = memfit::parameter_count({.name = info.name, .batch = 1});
    if (!parameters) {
      std::fprintf(stderr, "memfit models: %s\n", parameters.message().c_str());
      return 1;
    }
    std::string input;
    for (int64_t d : info.input) input += (input.empty() ? "" : "x") + std::to_string(d);
    std::printf("%-13s %12lld  %-8s %-15s %7lld  %s\n", info.name.c_str(),
                static_cast<long long>(*parameters),
                std::string(memfit::data_kind_name(info.data)).c_str(), input.c_str(),
                static_cast<long long>(info.classes), info.description.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"memfit: train deep networks inside a fixed memory budget"};
  app.require_subcommand(1);

  memfit::TrainOptions train;
  auto* train_cmd = app.add_subcommand("train", "train a model on Fashion-MNIST or synthetic data");
  add_step_flags(train_cmd, train.step);
  add_train_flags(train_cmd, train);

  memfit::PlanRequest plan;
  PlanOutput plan_output;
  auto* plan_cmd =
      app.add_subcommand("plan", "plan the memory of one training step, without running it");
  add_step_flags(plan_cmd, plan.step);
  plan_cmd->get_option("--batch")->required();
  plan_cmd->add_flag("--json", plan_output.json, "print the report as one JSON object");
  plan_cmd->add_option("--timeline", plan_output.timeline_path,
                       "write the live bytes over the step as an SVG image to this file");
  add_ranks_flag(plan_cmd, plan.step);
  add_profile_flags(plan_cmd, plan_output.profile);
  plan_cmd->get_option("--profile")->excludes("--json");
  plan_cmd->get_option("--trace")->excludes("--json");

  memfit::PlanRequest max_request;
  bool max_json = false;
  auto* max_cmd = app.add_subcommand(
      "maxbatch",
      "find the largest batch (or, with --vary seq-len, the longest sequence) whose training "
      "step fits a budget (plans only)");
  add_step_flags(max_cmd, max_request.step);
  max_cmd->get_option("--budget")->required();
  add_ranks_flag(max_cmd, max_request.step);
  memfit::Capacity max_vary = memfit::Capacity::batch;
  add_choice(max_cmd, "--vary", max_vary,
             {{"batch", memfit::Capacity::batch}, {"seq-len", memfit::Capacity::seq_len}},
             "the dimension to search: batch (examples per micro-batch) or seq-len (the longest "
             "sequence at --batch, for sequence models)");
  max_cmd->add_flag("--json", max_json,
                    "print one JSON object (max_batch, arena_bytes, host_bytes, "
                    "predicted_step_seconds, ...)");

  auto* models_cmd =
      app.add_subcommand("models", "list every model with its parameter count and input shape");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "memfit: " << e.what() << "\n\n" << app.help();
    return kUsageError;
  }

  for (auto [cmd, spec] : {std::pair{train_cmd, &train.step}, std::pair{plan_cmd, &plan.step},
                           std::pair{max_cmd, &max_request.step}}) {
    if (!cmd->parsed()) continue;
    if (cmd != train_cmd && cmd->count("--model") == 0 && cmd->count("--onnx") == 0) {
      return usage_error(cmd->get_name(), "give --model NAME or --onnx FILE");
    }
    if (!spec->model.onnx.empty()) {
      if (cmd->count("--attention") > 0) {
        return usage_error(cmd->get_name(), "--attention chooses a zoo model's attention; an ONNX "
                                            "model's is that of its file");
      }
      spec->model.name = std::filesystem::path(spec->model.onnx).stem().string();
    } else if (!spec->model.loss.empty()) {
      return usage_error(cmd->get_name(), "--loss applies to --onnx models; a zoo model has its own loss");
    }
    const memfit::Status checked = memfit::check_step_spec(*spec);
    if (!checked.is_ok()) return usage_error(cmd->get_name(), checked.message());
    // Ranks come from mpirun for train, from --ranks for plan and maxbatch.
    const bool one_rank = cmd == train_cmd ? !memfit::launched_by_mpi() : spec->ranks == 1;
    if (spec->shard != memfit::Shard::none && one_rank) {
      return usage_error(cmd->get_name(),
                         cmd == train_cmd
                             ? "--shard divides state among the ranks of mpirun -np N; run under "
                               "mpirun, or drop --shard"
                             : "--shard divides state among ranks: add --ranks N (N > 1)");
    }
  }
  // An allocation that fails although the run was checked against the
  // machine's memory (another process took it meanwhile) is reported, never
  // a crash.
  try {
    if (train_cmd->parsed()) return run_train(train);
    if (plan_cmd->parsed()) return run_plan(plan, plan_output);
    if (max_cmd->parsed()) return run_max_batch(max_request, max_vary, max_json);
    if (models_cmd->parsed()) return run_models();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "memfit: out of memory: an allocation failed; make the step smaller (--budget "
                 "BYTES with --policy auto, --recompute, --swap, or a smaller --batch)\n");
    return 1;
  }
  return 0;
}
