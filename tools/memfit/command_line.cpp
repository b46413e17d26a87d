// The flags of train, plan, maxbatch and models, and the checks of their
// combinations (command_line.h).
#include "tools/memfit/command_line.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include "core/output_path.h"
#include "memfit/builder.h"
#include "memfit/bytes.h"
#include "memfit/dist.h"
#include "memfit/step.h"

namespace memfit::cli {
namespace {

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
          flag,
          [&target](const std::string& text) { target = memfit::parse_name<Enum>(text).value(); },
          help)
      ->check(name_validator<Enum>())
      ->default_str(std::string(memfit::name_of(target)));
}
template <typename Enum>
CLI::Option* add_named(CLI::App* cmd, const std::string& flag, std::optional<Enum>& target,
                       const std::string& help) {
  return cmd
      ->add_option_function<std::string>(
          flag,
          [&target](const std::string& text) { target = memfit::parse_name<Enum>(text).value(); },
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
// than 0 (`positive`) or at least 0; with `float32`, one that a 32-bit float
// holds as a normal number (a smaller non-zero value would become 0 or lose
// its precision). Its messages say the range in words.
CLI::Validator number_validator(bool positive, bool float32 = false) {
  return CLI::Validator(
      [positive, float32](std::string& text) {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size()) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(value)) return "'" + text + "' is not a finite number";
        // An integer past int64 would be clamped (or wrapped) by the conversion.
        if (text.find_first_not_of("+-0123456789") == std::string::npos) {
          const char* digits = text.c_str() + (text[0] == '+' ? 1 : 0);
          int64_t integer = 0;
          if (std::from_chars(digits, text.c_str() + text.size(), integer).ec ==
              std::errc::result_out_of_range) {
            return "'" + text + "' is out of range (at most 9223372036854775807)";
          }
        }
        if (positive && !(value > 0)) return "must be more than 0, not " + text;
        if (!positive && value < 0) return "must be 0 or more, not " + text;
        if (float32 && value != 0 &&
            (value < std::numeric_limits<float>::min() ||
             value > std::numeric_limits<float>::max())) {
          return "'" + text + "' is outside a 32-bit float's range (1.2e-38 to 3.4e+38)";
        }
        return std::string();
      },
      positive ? "POSITIVE" : "NONNEGATIVE");
}
const CLI::Validator kPositive = number_validator(true);
const CLI::Validator kNonNegative = number_validator(false);
const CLI::Validator kPositiveFloat32 = number_validator(true, true);
const CLI::Validator kNonNegativeFloat32 = number_validator(false, true);
// A file or directory flag: an empty path (an unset shell variable) would
// read as the flag not given.
const CLI::Validator kPath(
    [](std::string& text) {
      return text.empty() ? std::string("is an empty path") : std::string();
    },
    "PATH");

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
      ->check(kPath)
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
                  "swap policies plan with it (0: on --backend cuda the link measured when it "
                  "starts, else unlimited and planned as 10)")
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
         "arena any combination of techniques reaches")
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
                memfit::default_learning_rate(Kind::sgd),
                memfit::default_learning_rate(Kind::adamw));
  cmd->add_option("--lr", spec.optimizer.lr, lr_help)->check(kPositiveFloat32);
  cmd->add_option("--weight-decay", spec.optimizer.weight_decay, "weight decay")
      ->check(kNonNegativeFloat32)
      ->capture_default_str();
  add_named(cmd, "--backend", spec.backend,
            "cpu (oneDNN), reference (plain loops) or cuda (an NVIDIA GPU: cuDNN, cuBLAS and "
            "memfit's own kernels, one rank): whose kernels, layouts and workspaces");
  cmd->add_flag("--fastest-kernels", spec.fastest_kernels,
                "--backend cuda: cuDNN's and cuBLAS's fastest algorithms (TF32 tensor cores on "
                "Ampere and newer; steps are not bit-reproducible); default: the first "
                "deterministic FP32 algorithm");
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
                  "with compute and copy-engine lanes")
      ->check(kPath);
}

void add_train_flags(CLI::App* cmd, memfit::TrainOptions& train) {
  cmd->add_option("--epochs", train.epochs, "passes over the training set")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--stop-after", train.stop_after,
                  "stop after this epoch, as if interrupted (to --resume later; 0: run to the end)")
      ->check(kNonNegative);
  add_named(cmd, "--schedule", train.schedule,
            "learning rate after the warmup: constant, or cosine or linear decay to --min-lr "
            "over the rest of the run");
  cmd->add_option("--warmup-steps", train.warmup_steps,
                  "optimizer steps at the start whose learning rate rises linearly to --lr")
      ->check(kNonNegative);
  cmd->add_option("--min-lr", train.min_lr,
                  "the learning rate cosine and linear decay end at (at most --lr)")
      ->check(kNonNegative);
  cmd->add_option("--seed", train.seed, "seed of initialization, shuffling and dropout")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_flag("--synthetic", train.synthetic,
                "train on a synthetic data set made for the model's input (any model)");
  cmd->add_option("--data", train.data_path,
                  "the training examples: a .npz of numpy arrays named as the model's inputs "
                  "(memfit models; e.g. images and labels), first dimension the examples, or "
                  "a directory of the Fashion-MNIST .gz files (default: "
                  "/usr/share/datasets/fashion-mnist)")
      ->check(kPath);
  cmd->add_option("--val-data", train.val_data_path,
                  "--data FILE: validation examples in the same form, evaluated after every "
                  "epoch (none: no evaluation)")
      ->check(kPath);
  cmd->add_option("--tokens", train.tokens_path,
                  "the training examples of a sequence model: a flat file of token ids; each "
                  "example is a window of --seq-len + 1 tokens at a seeded random offset, an "
                  "epoch the file's length over the window")
      ->check(kPath);
  cmd->add_option("--val-tokens", train.val_tokens_path,
                  "--tokens FILE: validation tokens, evaluated after every epoch (none: no "
                  "evaluation)")
      ->check(kPath);
  cmd->add_option_function<std::string>(
         "--token-dtype",
         [&train](const std::string& text) { train.token_bytes = text == "uint32" ? 4 : 2; },
         "the type of the ids in --tokens files: uint16 (default) or uint32")
      ->check(CLI::IsMember({"uint16", "uint32"}));
  cmd->add_option("--save", train.save_path, "write a checkpoint here after every epoch")
      ->check(kPath);
  cmd->add_option("--resume", train.resume_path, "continue from this checkpoint")->check(kPath);
  cmd->add_option("--save-onnx", train.save_onnx_path,
                  "--onnx: write the model with its trained weights to this ONNX file at the end")
      ->check(kPath);
  cmd->add_flag("--poison", train.poison,
                "fill memory with NaN as soon as its value dies (checks the plan)");
  cmd->add_option("--limit", train.limit,
                  "Fashion-MNIST and --data FILE: use only the first N training and test "
                  "examples; --tokens: N windows an epoch; synthetic: N "
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

// The checkpoint and the examples of `memfit evaluate`.
void add_evaluate_flags(CLI::App* cmd, memfit::TrainOptions& o) {
  cmd->add_option("--checkpoint", o.resume_path,
                  "the checkpoint to evaluate (memfit train --save, or Trainer.save in Python)")
      ->check(kPath)
      ->required();
  cmd->add_option("--data", o.data_path,
                  "evaluate on every example of this .npz (or .npy) of arrays named as the "
                  "model's inputs, or on the test set of the Fashion-MNIST files in this "
                  "directory (default: /usr/share/datasets/fashion-mnist)")
      ->check(kPath);
  cmd->add_option("--tokens", o.tokens_path,
                  "evaluate on windows of --seq-len + 1 tokens of this flat file of token ids")
      ->check(kPath);
  cmd->add_option_function<std::string>(
         "--token-dtype", [&o](const std::string& text) { o.token_bytes = text == "uint32" ? 4 : 2; },
         "the type of the ids in the --tokens file: uint16 (default) or uint32")
      ->check(CLI::IsMember({"uint16", "uint32"}));
  cmd->add_flag("--synthetic", o.synthetic, "evaluate on the test set of the synthetic data set");
  cmd->add_option("--limit", o.limit,
                  "evaluate on the first N examples (--tokens: N windows; 0: all)")
      ->check(kNonNegative);
  cmd->add_option("--seed", o.seed, "the seed of the run (token windows, synthetic data)")
      ->check(kNonNegative)
      ->capture_default_str();
}

// The same file, though named two ways ("a" and "./a", or two hard links to
// it); false if either is empty.
bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code error;
  if (std::filesystem::equivalent(a, b, error) && !error) return true;
  const std::filesystem::path first = std::filesystem::weakly_canonical(a, error);
  if (error) return a == b;
  const std::filesystem::path second = std::filesystem::weakly_canonical(b, error);
  return error ? a == b : first == second;
}

using NamedPaths = std::vector<std::pair<const char*, std::string>>;

// Two output flags that name one file (the later write would destroy the
// earlier), or an output that names an input (the model or the checkpoint
// would be lost; --save over --resume is how a run continues, and allowed).
std::string check_distinct_outputs(const NamedPaths& outputs, const NamedPaths& inputs = {}) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      if (same_file(outputs[i].second, outputs[j].second)) {
        return std::string(outputs[i].first) + " and " + outputs[j].first + " both write " +
               outputs[j].second + ": give each its own file";
      }
    }
    for (const auto& [input, path] : inputs) {
      if (std::string_view(outputs[i].first) == "--save" && std::string_view(input) == "--resume")
        continue;
      if (same_file(outputs[i].second, path)) {
        return std::string(outputs[i].first) + " would overwrite " + path + ", which " + input +
               " reads: give it another file";
      }
    }
  }
  return "";
}

// The settings of every subcommand checked together; empty: fine, else the
// message of a usage error.
std::string check_combinations(CLI::App& app, Command& command) {
  CLI::App* train_cmd = app.get_subcommand("train");
  CLI::App* plan_cmd = app.get_subcommand("plan");
  CLI::App* max_cmd = app.get_subcommand("maxbatch");
  CLI::App* eval_cmd = app.get_subcommand("evaluate");
  for (auto [cmd, spec] :
       {std::pair{train_cmd, &command.train.step}, std::pair{plan_cmd, &command.plan.step},
        std::pair{max_cmd, &command.max_request.step},
        std::pair{eval_cmd, &command.evaluate.step}}) {
    if (!cmd->parsed()) continue;
    if (cmd != train_cmd && cmd->count("--model") == 0 && cmd->count("--onnx") == 0) {
      return "give --model NAME or --onnx FILE";
    }
    if (!spec->model.onnx.empty()) {
      if (cmd->count("--attention") > 0) {
        return "--attention chooses a zoo model's attention; an ONNX model's is that of its file";
      }
      for (const char* size : {"--image-size", "--classes", "--depth", "--width", "--seq-len",
                               "--volume", "--vocab"}) {
        if (cmd->count(size) > 0) {
          return std::string(size) +
                 " sizes a zoo model; an ONNX model's sizes are those of its file";
        }
      }
      if (cmd == max_cmd && command.vary == memfit::Capacity::seq_len) {
        return "--vary seq-len needs a zoo sequence model; an ONNX model's sequence length is "
               "fixed in its file (vary the batch instead)";
      }
      spec->model.name = std::filesystem::path(spec->model.onnx).stem().string();
    } else if (!spec->model.loss.empty()) {
      return "--loss applies to --onnx models; a zoo model has its own loss";
    }
    const Status checked = check_step_spec(*spec);
    if (!checked.is_ok()) return checked.message();
    // By value, as the --swap-* knobs are: the default given again changes
    // nothing, and the budget advice (which knows values, not flags) agrees.
    if (spec->milp_seconds != StepSpec{}.milp_seconds) {
      const auto t = resolve_techniques(*spec);
      if (t && t->recompute != Recompute::milp) {
        return "--milp-seconds is a knob of --recompute milp: add it or drop --milp-seconds";
      }
    }
    // Ranks come from mpirun for train, from --ranks for plan and maxbatch.
    const bool one_rank = cmd == train_cmd ? !launched_by_mpi() : spec->ranks == 1;
    if (spec->shard != Shard::none && one_rank) {
      return cmd == train_cmd ? "--shard divides state among the ranks of mpirun -np N; run under "
                                "mpirun, or drop --shard"
                              : "--shard divides state among ranks: add --ranks N (N > 1)";
    }
  }
  if (train_cmd->parsed()) {
    const memfit::TrainOptions& t = command.train;
    return check_distinct_outputs(
        {{"--save", t.save_path}, {"--trace", t.trace_path}, {"--save-onnx", t.save_onnx_path}},
        {{"--onnx", t.step.model.onnx}, {"--resume", t.resume_path}});
  }
  if (plan_cmd->parsed()) {
    const PlanOutput& out = command.plan_output;
    if (command.plan.step.ranks > 1 && (out.profile.profile || !out.profile.trace_path.empty())) {
      return "--profile and --trace run the step in this one process, as one rank: drop --ranks";
    }
    return check_distinct_outputs(
        {{"--timeline", out.timeline_path}, {"--trace", out.profile.trace_path}},
        {{"--onnx", command.plan.step.model.onnx}});
  }
  return "";
}

}  // namespace

CommandLine::CommandLine()
    : app_(std::make_unique<CLI::App>("memfit: train deep networks inside a fixed memory budget",
                                      "memfit")) {
  CLI::App& app = *app_;
  Command& c = command_;
  app.require_subcommand(1);

  auto* train_cmd = app.add_subcommand(
      "train", "train a model on Fashion-MNIST, synthetic data or your own files (--data, --tokens)");
  add_step_flags(train_cmd, c.train.step);
  add_train_flags(train_cmd, c.train);
  train_cmd->add_flag("--json", c.train_json,
                      "print the report as one JSON object at the end (losses, test accuracy, "
                      "speed, arena); progress lines go to stderr");

  auto* plan_cmd =
      app.add_subcommand("plan", "plan the memory of one training step, without running it");
  add_step_flags(plan_cmd, c.plan.step);
  plan_cmd->get_option("--batch")->required();
  plan_cmd->add_flag("--json", c.plan_output.json, "print the report as one JSON object");
  plan_cmd
      ->add_option("--timeline", c.plan_output.timeline_path,
                   "write the live bytes over the step as an SVG image to this file")
      ->check(kPath);
  plan_cmd
      ->add_option("--dump-graphs", c.plan.dump_graphs,
                   "write the step graph's IR text after each pass that changed it to this "
                   "directory, as DIR/step-NN-PASS.ir (docs/pipeline.md); earlier dumps there "
                   "are replaced")
      ->check(kPath);
  add_ranks_flag(plan_cmd, c.plan.step);
  add_profile_flags(plan_cmd, c.plan_output.profile);
  plan_cmd->get_option("--profile")->excludes("--json");
  plan_cmd->get_option("--trace")->excludes("--json");

  auto* max_cmd = app.add_subcommand(
      "maxbatch",
      "find the largest batch (or, with --vary seq-len, the longest sequence) whose training "
      "step fits a budget (plans only)");
  add_step_flags(max_cmd, c.max_request.step);
  max_cmd->get_option("--budget")->required();
  add_ranks_flag(max_cmd, c.max_request.step);
  add_choice(max_cmd, "--vary", c.vary,
             {{"batch", Capacity::batch}, {"seq-len", Capacity::seq_len}},
             "the dimension to search: batch (examples per micro-batch) or seq-len (the longest "
             "sequence at --batch, for sequence models)");
  max_cmd->add_flag("--json", c.max_json,
                    "print one JSON object (max_batch, arena_bytes, host_bytes, "
                    "predicted_step_seconds, ...)");

  auto* eval_cmd = app.add_subcommand(
      "evaluate", "a checkpoint's model on a set of examples: its loss and accuracy");
  add_step_flags(eval_cmd, c.evaluate.step);
  add_evaluate_flags(eval_cmd, c.evaluate);
  eval_cmd->add_flag("--json", c.evaluate_json,
                     "print one JSON object (loss, accuracy, examples)");

  app.add_subcommand("models", "list every model with its parameter count and input shape");
}

CommandLine::~CommandLine() = default;

Parsed CommandLine::parse(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  for (const std::string& arg : args) argv.push_back(arg.c_str());
  CLI::App& app = *app_;
  // CLI11 would say only that a subcommand is required.
  if (args.size() > 1 && !args[1].empty() && args[1][0] != '-') {
    std::string names;
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == args[1];
    }
    if (!known) {
      return Parsed{.run = false,
                    .exit_code = kUsageError,
                    .text = "unknown command '" + args[1] + "'; the commands are " + names,
                    .help = app.help()};
    }
  }
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    std::ostringstream out, err;
    if (e.get_exit_code() == 0) {  // help
      const int code = app.exit(e, out, err);
      return Parsed{.run = false, .exit_code = code, .text = out.str() + err.str(), .help = ""};
    }
    return Parsed{.run = false, .exit_code = kUsageError, .text = e.what(), .help = app.help()};
  }
  for (CLI::App* sub : app.get_subcommands()) command_.name = sub->get_name();
  const std::string problem = check_combinations(app, command_);
  if (!problem.empty()) {
    return Parsed{.run = false, .exit_code = kUsageError, .text = problem, .help = ""};
  }
  return Parsed{.run = true, .exit_code = 0, .text = "", .help = ""};
}

Result<std::string> plan_command(const PlanRequest& request, const PlanOutput& output) {
  for (const auto& [path, flag] : {std::pair{output.timeline_path, "--timeline"},
                                   std::pair{output.profile.trace_path, "--trace"}}) {
    if (path.empty()) continue;
    MEMFIT_RETURN_IF_ERROR(check_output_path(path, flag));
  }
  MEMFIT_ASSIGN_OR_RETURN(const PlanReport report, plan_training_step(request));
  if (!output.timeline_path.empty()) {
    const ModelOptions& model = request.step.model;
    const std::string title = model.name + ", batch " + std::to_string(model.batch) +
                              ": live memory over one training step";
    errno = 0;
    std::ofstream file(output.timeline_path, std::ios::binary | std::ios::trunc);
    file << timeline_svg(report, title);
    if (!file.flush()) {
      return Status::error("cannot write the timeline to " + output.timeline_path + ": " +
                           (errno != 0 ? std::strerror(errno) : "write failed"));
    }
  }
  return output.json ? plan_report_json(request, report) : plan_report_text(request, report);
}

}  // namespace memfit::cli
