// The memfit command line. Thin: it parses flags and calls include/memfit.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "memfit/builder.h"
#include "memfit/plan.h"
#include "memfit/train.h"

namespace {

constexpr int kUsageError = 2;

// A flag combination refused after parsing.
int usage_error(const char* command, const std::string& message) {
  std::fprintf(stderr, "memfit %s: %s\n", command, message.c_str());
  return kUsageError;
}

int run_train(const memfit::TrainOptions& options) {
  auto report = memfit::train(options, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  if (!report) {
    std::fprintf(stderr, "memfit train: %s\n", report.message().c_str());
    return 1;
  }
  if (!report->test_accuracy.empty()) {
    std::printf("final test accuracy: %.2f%%\n", 100.0 * report->test_accuracy.back());
  }
  std::printf("training speed: %.0f examples/s\n", report->examples_per_second);
  std::printf("step memory: planned arena %zu bytes, measured high-water mark %zu bytes\n",
              report->arena_bytes, report->high_water_bytes);
  return 0;
}

// Options of `memfit plan` that need more than CLI11 gives.
struct PlanFlags {
  std::string optimizer = "sgd";
  std::string budget;  // empty: no limit
  bool no_sharing = false;
  bool json = false;
  std::string timeline_path;  // empty: no SVG
};

int run_plan(memfit::PlanRequest request, const PlanFlags& flags) {
  if (flags.optimizer == "adamw") request.optimizer.kind = memfit::OptimizerConfig::Kind::adamw;
  // The validator of --budget has accepted it already.
  if (!flags.budget.empty()) request.budget = memfit::parse_bytes(flags.budget).value();
  request.share = !flags.no_sharing;
  auto report = memfit::plan_training_step(request);
  if (!report) {
    std::fprintf(stderr, "memfit plan: %s\n", report.message().c_str());
    return 1;
  }
  if (!flags.timeline_path.empty()) {
    const std::string title = request.model.name + ", batch " +
                              std::to_string(request.model.batch) +
                              ": live memory over one training step";
    std::ofstream file(flags.timeline_path, std::ios::binary | std::ios::trunc);
    file << memfit::timeline_svg(*report, title);
    if (!file.flush()) {
      std::fprintf(stderr, "memfit plan: cannot write the timeline to %s\n",
                   flags.timeline_path.c_str());
      return 1;
    }
  }
  const std::string out = flags.json ? memfit::plan_report_json(request, *report)
                                     : memfit::plan_report_text(request, *report);
  std::fputs(out.c_str(), stdout);
  return 0;
}

// The size flags shared by every command that takes --model.
void add_model_options(CLI::App* cmd, memfit::ModelOptions& model) {
  cmd->add_option("--image-size", model.image_size,
                  "side of the square input image (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--classes", model.classes, "classes of the classifier (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--depth", model.depth,
                  "layers: resnet-cifar 9n+2, LSTM or Transformer layers (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--width", model.width,
                  "channels of the first stage, or the hidden width (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seq-len", model.seq_len, "positions per sequence (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--volume", model.volume, "side of the cubic input volume (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--vocab", model.vocab, "tokens in the vocabulary (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag_callback(
      "--no-dropout", [&model] { model.dropout = false; },
      "leave out the model's dropout layers, in training too (runs that must compute the "
      "same numbers as another framework)");
}

// --recompute and --mirror, shared by train and plan; the strategy is parsed
// once the flags have been checked against the list.
void add_recompute_option(CLI::App* cmd, std::string& strategy, bool& mirror) {
  cmd->add_option(
         "--recompute", strategy,
         "recompute activations in the backward pass instead of keeping them: none, "
         "sqrt (a checkpoint every sqrt(n) blocks), budget (Chen's greedy plan, "
         "searched for the smallest arena or, under --budget, the least recomputation that "
         "fits), recursive (checkpoints nested in log2(n) levels: O(log n) memory), "
         "optimal (dynamic programming over the chain of blocks: the least predicted recompute "
         "time that fits --budget, or sqrt's arena) or milp (an integer program solved by CBC, "
         "for small graphs of any shape)")
      ->check(CLI::IsMember(memfit::recompute_names()))
      ->capture_default_str();
  cmd->add_flag("--mirror", mirror,
                "also recompute the outputs of cheap ops (activations, batch norm, dropout, "
                "scale, add, mul, reshape, transpose) for each backward reader; with any "
                "--recompute, or alone");
}

// --cost and --milp-seconds, shared by train and plan.
void add_cost_options(CLI::App* cmd, std::string& cost, double& milp_seconds) {
  cmd->add_option("--cost", cost,
                  "node times that optimal and milp minimize and plan predicts: measured (each "
                  "distinct node timed on the backend) or roofline (flops and bytes over fixed "
                  "machine constants); default: measured for optimal and milp, else roofline")
      ->check(CLI::IsMember({"measured", "roofline"}));
  cmd->add_option("--milp-seconds", milp_seconds, "--recompute milp: CBC's time limit, in all")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

// Timing every distinct node takes seconds on a large graph, so only the
// strategies that minimize time measure unless asked.
memfit::CostModel parse_cost(const std::string& cost, memfit::Recompute recompute) {
  if (cost.empty()) {
    const bool minimizes_time =
        recompute == memfit::Recompute::optimal || recompute == memfit::Recompute::milp;
    return minimizes_time ? memfit::CostModel::measured : memfit::CostModel::roofline;
  }
  return cost == "roofline" ? memfit::CostModel::roofline : memfit::CostModel::measured;
}

// --swap and --link-gbps, shared by train, plan and maxbatch.
void add_swap_options(CLI::App* cmd, std::string& policy, double& link_gbps) {
  cmd->add_option("--swap", policy,
                  "swap activations to the host pool and back: none, refcount (those idle "
                  "across the peak, copies hidden by compute), budget (largest bytes x idle "
                  "time first, until the arena fits --budget) or tflms (TFLMS: the first "
                  "--swap-n-tensors, swap-ins triggered --swap-lb..--swap-ub nodes ahead)")
      ->check(CLI::IsMember(memfit::swap_names()))
      ->capture_default_str();
  cmd->add_option("--link-gbps", link_gbps,
                  "bandwidth of the host link in GB/s: the copy engine runs no faster, and "
                  "the swap policies plan with it (0: unlimited, planned as 10)")
      ->check(CLI::NonNegativeNumber);
}

// --policy, shared by train, plan and maxbatch.
void add_policy_option(CLI::App* cmd, std::string& policy) {
  cmd->add_option("--policy", policy,
                  "the memory techniques a step may use: none (no sharing), share (the "
                  "planner's sharing only), recompute (sharing and --recompute, default "
                  "budget), swap (sharing and --swap, default budget) or auto (keep, recompute "
                  "or swap each activation: the least predicted step time that fits --budget); "
                  "default: as --recompute, --swap and --mirror say")
      ->check(CLI::IsMember(memfit::policy_names()));
}

// The techniques --policy allows, with --recompute, --swap, --mirror and the
// command's no-sharing flag; an error message when they contradict it.
memfit::Result<memfit::Techniques> resolve_flags(CLI::App* cmd, const std::string& policy,
                                                 const std::string& recompute,
                                                 const std::string& swap, bool mirror,
                                                 bool no_sharing, const char* no_sharing_flag) {
  const memfit::Recompute r = memfit::parse_recompute(recompute).value();
  const memfit::Swap s = memfit::parse_swap(swap).value();
  if (policy.empty()) return memfit::Techniques{!no_sharing, r, s, mirror, false};
  const memfit::Policy p = memfit::parse_policy(policy).value();
  if (no_sharing && p != memfit::Policy::none) {
    return memfit::Status::error(std::string(no_sharing_flag) +
                                 " means --policy none; give one of them");
  }
  return memfit::resolve_policy(p, cmd->count("--recompute") > 0 ? std::optional(r) : std::nullopt,
                                cmd->count("--swap") > 0 ? std::optional(s) : std::nullopt, mirror);
}

// TFLMS's knobs of --swap tflms, shared by train, plan and maxbatch. Bounds
// are checked after parsing (check_tflms_options), so one message names them.
struct TflmsFlags {
  memfit::TflmsOptions options;
  std::string trigger = "chain_rule";
  std::vector<CLI::Option*> given;  // count() > 0: set on the command line
};

void add_tflms_options(CLI::App* cmd, TflmsFlags& flags) {
  memfit::TflmsOptions& o = flags.options;
  flags.given = {
      cmd->add_option("--swap-n-tensors", o.n_tensors,
                      "--swap tflms: swap only the first N candidates in the order of their "
                      "producers (-1: all)")
          ->capture_default_str(),
      cmd->add_option("--swap-lb", o.lb,
                      "--swap tflms: a swap-in starts at least this many nodes before its "
                      "consumer")
          ->capture_default_str(),
      cmd->add_option("--swap-ub", o.ub,
                      "--swap tflms: ... and at most this many (at least --swap-lb)")
          ->capture_default_str(),
      cmd->add_option("--swap-trigger", flags.trigger,
                      "--swap tflms: chain_rule (after the gradient of the op --swap-lb hops "
                      "downstream of the producer) or direct_order (--swap-lb nodes before the "
                      "consumer in the schedule)")
          ->capture_default_str(),
      cmd->add_flag("--swap-fuse", o.fuse,
                    "--swap tflms: consumers within --swap-ub of one trigger share one swap-in "
                    "(fewer copies, the copy stays longer)"),
      cmd->add_flag("--swap-branches", o.branches,
                    "--swap tflms: also swap forward values between two forward readers far "
                    "apart (skip connections)"),
      cmd->add_option("--swap-branch-threshold", o.branch_threshold,
                      "--swap tflms --swap-branches: only readers more than this many nodes "
                      "apart (0: any distance)")
          ->capture_default_str(),
  };
}

// The TFLMS options of `flags`, or a message for the user.
memfit::Result<memfit::TflmsOptions> tflms_options(const TflmsFlags& flags, memfit::Swap swap) {
  if (swap != memfit::Swap::tflms) {
    for (const CLI::Option* option : flags.given) {
      if (option->count() > 0) {
        return memfit::Status::error(option->get_name() +
                                     " is a knob of --swap tflms; add --swap tflms or drop it");
      }
    }
  }
  memfit::TflmsOptions options = flags.options;
  MEMFIT_ASSIGN_OR_RETURN(options.trigger, memfit::parse_tflms_trigger(flags.trigger));
  MEMFIT_RETURN_IF_ERROR(memfit::check_tflms_options(options));
  return options;
}

// Sets what --policy and the strategy flags resolved (`t`) and the TFLMS
// knobs on a request of train, plan or maxbatch (the fields share names);
// an error message when the knobs are refused.
template <typename Request>
memfit::Status apply_techniques(Request& request, const memfit::Techniques& t,
                                const TflmsFlags& tflms_flags) {
  request.recompute = t.recompute;
  request.swap = t.swap;
  request.mirror = t.mirror;
  request.auto_policy = t.automatic;
  MEMFIT_ASSIGN_OR_RETURN(request.tflms, tflms_options(tflms_flags, t.swap));
  return memfit::Status::ok();
}

// The budget validator of plan and maxbatch.
CLI::Validator budget_validator() {
  return CLI::Validator(
      [](std::string& text) {
        auto bytes = memfit::parse_bytes(text);
        if (!bytes) return bytes.message();
        return *bytes == 0 ? std::string("the budget must be more than 0 bytes") : std::string();
      },
      "BYTES");
}

int run_max_batch(memfit::PlanRequest request, const PlanFlags& flags) {
  if (flags.optimizer == "adamw") request.optimizer.kind = memfit::OptimizerConfig::Kind::adamw;
  request.budget = memfit::parse_bytes(flags.budget).value();
  request.share = !flags.no_sharing;
  auto report = memfit::find_max_batch(request);
  if (!report) {
    std::fprintf(stderr, "memfit maxbatch: %s\n", report.message().c_str());
    return 1;
  }
  const std::string out = flags.json ? memfit::max_batch_json(request, *report)
                                     : memfit::max_batch_text(request, *report);
  std::fputs(out.c_str(), stdout);
  return 0;
}

// `memfit models`: every model at its default size, with its exact parameter
// count from its forward graph at batch 1 (built, never run).
int run_models() {
  std::printf("%-13s %12s  %-8s %-15s %7s  %s\n", "model", "parameters", "data", "input", "classes",
              "description");
  for (const memfit::ModelInfo& info : memfit::model_infos()) {
    auto model = memfit::build_model({.name = info.name, .batch = 1}, false);
    if (!model) {
      std::fprintf(stderr, "memfit models: %s\n", model.message().c_str());
      return 1;
    }
    int64_t parameters = 0;
    for (memfit::ValueId p : model->params) {
      parameters += memfit::num_elements(model->graph.value(p).type.shape);
    }
    std::string input;
    for (int64_t d : info.input) input += (input.empty() ? "" : "x") + std::to_string(d);
    std::printf("%-13s %12lld  %-8s %-15s %7lld  %s\n", info.name.c_str(),
                static_cast<long long>(parameters),
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
  std::string optimizer = "sgd";
  float lr = 0;
  auto* cmd = app.add_subcommand("train", "train a model on Fashion-MNIST or synthetic data");
  cmd->add_option("--model", train.model.name, "model to train")
      ->check(CLI::IsMember(memfit::model_names()))
      ->capture_default_str();
  add_model_options(cmd, train.model);
  cmd->add_option("--epochs", train.epochs, "passes over the training set")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--stop-after", train.stop_after,
                  "stop after this epoch, as if interrupted (to --resume later)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch", train.model.batch, "examples per micro-batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--accumulate", train.accumulate, "micro-batches per optimizer step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--optimizer", optimizer, "sgd (momentum 0.9) or adamw")
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->capture_default_str();
  cmd->add_option("--lr", lr, "learning rate (default: 0.05 for sgd, 0.001 for adamw)")
      ->check(CLI::PositiveNumber);
  std::string schedule = "cosine";
  cmd->add_option("--schedule", schedule,
                  "learning rate: constant, or cosine decay to 0 over the run")
      ->check(CLI::IsMember({"constant", "cosine"}))
      ->capture_default_str();
  cmd->add_option("--weight-decay", train.optimizer.weight_decay, "weight decay")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", train.seed, "seed of initialization, shuffling and dropout")
      ->capture_default_str();
  cmd->add_flag("--synthetic", train.synthetic,
                "train on a synthetic data set made for the model's input (any model)");
  cmd->add_option("--data", train.data_dir,
                  "directory of the Fashion-MNIST .gz files (default: "
                  "/usr/share/datasets/fashion-mnist)");
  cmd->add_option("--save", train.save_path, "write a checkpoint here after every epoch");
  cmd->add_option("--resume", train.resume_path, "continue from this checkpoint");
  cmd->add_option("--backend", train.backend, "cpu (oneDNN) or reference (plain loops)")
      ->check(CLI::IsMember({"cpu", "reference"}))
      ->capture_default_str();
  cmd->add_option("--threads", train.threads, "threads of the cpu backend (default: one per core)")
      ->check(CLI::NonNegativeNumber);
  bool no_plan = false;
  cmd->add_flag("--no-plan", no_plan,
                "give every value its own memory instead of the planned sharing");
  cmd->add_flag("--poison", train.poison,
                "fill memory with NaN as soon as its value dies (checks the plan)");
  std::string train_recompute = "none";
  add_recompute_option(cmd, train_recompute, train.mirror);
  std::string train_cost;
  add_cost_options(cmd, train_cost, train.milp_seconds);
  std::string train_swap = "none";
  add_swap_options(cmd, train_swap, train.link_gbps);
  std::string train_policy;
  add_policy_option(cmd, train_policy);
  std::string train_budget;
  cmd->add_option("--budget", train_budget,
                  "largest step arena allowed, e.g. 2GiB; the recompute, swap and auto "
                  "choices fit it, and a step that does not is refused before training")
      ->check(budget_validator());
  TflmsFlags train_tflms;
  add_tflms_options(cmd, train_tflms);
  cmd->add_option("--limit", train.limit,
                  "Fashion-MNIST: use only the first N training and test examples; "
                  "synthetic: N training examples (default 1024)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--log-every", train.log_every, "optimizer steps between progress lines")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  memfit::PlanRequest plan;
  PlanFlags plan_flags;
  auto* plan_cmd =
      app.add_subcommand("plan", "plan the memory of one training step, without running it");
  plan_cmd->add_option("--model", plan.model.name, "model to plan")
      ->check(CLI::IsMember(memfit::model_names()))
      ->required();
  add_model_options(plan_cmd, plan.model);
  plan_cmd->add_option("--batch", plan.model.batch, "examples per micro-batch")
      ->check(CLI::PositiveNumber)
      ->required();
  plan_cmd->add_option("--accumulate", plan.accumulate, "micro-batches per optimizer step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  plan_cmd->add_option("--optimizer", plan_flags.optimizer, "sgd (momentum 0.9) or adamw")
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->capture_default_str();
  plan_cmd->add_option("--backend", plan.backend, "whose layouts and workspaces: cpu or reference")
      ->check(CLI::IsMember({"cpu", "reference"}))
      ->capture_default_str();
  plan_cmd
      ->add_option("--threads", plan.threads,
                   "threads of the cpu backend, whose workspaces depend on them (as train "
                   "--threads; default: one per core)")
      ->check(CLI::NonNegativeNumber);
  plan_cmd
      ->add_option("--budget", plan_flags.budget,
                   "largest arena allowed, e.g. 8MiB or 1.5GB; exit 1 when the plan needs more "
                   "(the message names the smallest arena any --recompute strategy reaches)")
      ->check(CLI::Validator(
          [](std::string& text) {
            auto bytes = memfit::parse_bytes(text);
            if (!bytes) return bytes.message();
            return *bytes == 0 ? std::string("the budget must be more than 0 bytes")
                               : std::string();
          },
          "BYTES"));
  std::string plan_recompute = "none";
  add_recompute_option(plan_cmd, plan_recompute, plan.mirror);
  std::string plan_cost;
  add_cost_options(plan_cmd, plan_cost, plan.milp_seconds);
  std::string plan_swap = "none";
  add_swap_options(plan_cmd, plan_swap, plan.link_gbps);
  std::string plan_policy;
  add_policy_option(plan_cmd, plan_policy);
  TflmsFlags plan_tflms;
  add_tflms_options(plan_cmd, plan_tflms);
  plan_cmd->add_flag("--no-sharing", plan_flags.no_sharing,
                     "give every value and workspace a slice of its own");
  plan_cmd->add_flag("--json", plan_flags.json, "print the report as one JSON object");
  plan_cmd->add_option("--timeline", plan_flags.timeline_path,
                       "write the live bytes over the step as an SVG image to this file");

  memfit::PlanRequest max_request;
  PlanFlags max_flags;
  auto* max_cmd = app.add_subcommand(
      "maxbatch", "find the largest batch whose training step fits a budget (plans only)");
  max_cmd->add_option("--model", max_request.model.name, "model to plan")
      ->check(CLI::IsMember(memfit::model_names()))
      ->required();
  add_model_options(max_cmd, max_request.model);
  max_cmd->add_option("--budget", max_flags.budget, "largest arena allowed, e.g. 16GiB")
      ->check(budget_validator())
      ->required();
  max_cmd->add_option("--optimizer", max_flags.optimizer, "sgd (momentum 0.9) or adamw")
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->capture_default_str();
  max_cmd
      ->add_option("--backend", max_request.backend,
                   "whose layouts and workspaces: cpu or reference")
      ->check(CLI::IsMember({"cpu", "reference"}))
      ->capture_default_str();
  max_cmd
      ->add_option("--threads", max_request.threads,
                   "threads of the cpu backend, whose workspaces depend on them (default: one "
                   "per core)")
      ->check(CLI::NonNegativeNumber);
  std::string max_recompute = "none";
  add_recompute_option(max_cmd, max_recompute, max_request.mirror);
  std::string max_swap = "none";
  add_swap_options(max_cmd, max_swap, max_request.link_gbps);
  std::string max_policy;
  add_policy_option(max_cmd, max_policy);
  TflmsFlags max_tflms;
  add_tflms_options(max_cmd, max_tflms);
  max_cmd->add_flag("--no-sharing", max_flags.no_sharing,
                    "give every value and workspace a slice of its own");
  max_cmd->add_flag("--json", max_flags.json,
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

  if (cmd->parsed()) {
    auto t = resolve_flags(cmd, train_policy, train_recompute, train_swap, train.mirror, no_plan,
                           "--no-plan");
    if (!t) return usage_error("train", t.message());
    train.plan = t->share;
    const memfit::Status applied = apply_techniques(train, *t, train_tflms);
    if (!applied.is_ok()) return usage_error("train", applied.message());
    train.budget = train_budget.empty() ? 0 : memfit::parse_bytes(train_budget).value();
    train.cost = parse_cost(train_cost, train.recompute);
    train.schedule = schedule == "constant" ? memfit::Schedule::constant : memfit::Schedule::cosine;
    if (optimizer == "adamw") {
      train.optimizer.kind = memfit::OptimizerConfig::Kind::adamw;
      train.optimizer.lr = lr > 0 ? lr : 1e-3f;
    } else {
      train.optimizer.lr = lr > 0 ? lr : 0.05f;
    }
    return run_train(train);
  }
  if (plan_cmd->parsed()) {
    auto t = resolve_flags(plan_cmd, plan_policy, plan_recompute, plan_swap, plan.mirror,
                           plan_flags.no_sharing, "--no-sharing");
    if (!t) return usage_error("plan", t.message());
    plan_flags.no_sharing = !t->share;
    const memfit::Status applied = apply_techniques(plan, *t, plan_tflms);
    if (!applied.is_ok()) return usage_error("plan", applied.message());
    plan.cost = parse_cost(plan_cost, plan.recompute);
    return run_plan(plan, plan_flags);
  }
  if (max_cmd->parsed()) {
    auto t = resolve_flags(max_cmd, max_policy, max_recompute, max_swap, max_request.mirror,
                           max_flags.no_sharing, "--no-sharing");
    if (!t) return usage_error("maxbatch", t.message());
    max_flags.no_sharing = !t->share;
    const memfit::Status applied = apply_techniques(max_request, *t, max_tflms);
    if (!applied.is_ok()) return usage_error("maxbatch", applied.message());
    return run_max_batch(max_request, max_flags);
  }
  if (models_cmd->parsed()) return run_models();
  return 0;
}
