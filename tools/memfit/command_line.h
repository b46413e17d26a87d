// The memfit command line's flags, bound once to include/memfit's structs:
// the parser of the `memfit` program and of the Python module's settings
// (python/), so that both take the same settings with the same checks and
// messages. It parses only; the callers run what it parsed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "memfit/plan.h"
#include "memfit/train.h"

namespace CLI {
class App;
}

namespace memfit::cli {

// What `memfit plan` writes besides the step.
struct PlanOutput {
  bool json = false;
  std::string timeline_path;  // empty: no SVG
  TrainOptions profile;       // with profile or trace_path: run the step and say where time goes
};

// A parsed command line: the subcommand and its settings.
struct Command {
  std::string name;    // train, evaluate, plan, maxbatch or models
  TrainOptions train;  // train
  bool train_json = false;
  PlanRequest plan;  // plan
  PlanOutput plan_output;
  PlanRequest max_request;  // maxbatch
  Capacity vary = Capacity::batch;
  bool max_json = false;
  TrainOptions evaluate;  // evaluate: the checkpoint in evaluate.resume_path
  bool evaluate_json = false;
};

// The outcome of parsing: go on and run `command`, or stop with `exit_code`
// and `text` (help asked for: the help, exit 0; a usage error: its message,
// exit 2, with `help` the program's help when the flags themselves were
// wrong, empty when their combination was).
struct Parsed {
  bool run = false;
  int exit_code = 0;
  std::string text;
  std::string help;
};

constexpr int kUsageError = 2;

class CommandLine {
 public:
  CommandLine();
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // Parses `args` (the program's name first), then checks the settings
  // together (check_step_spec and the combinations the flags alone cannot
  // refuse). Call once.
  Parsed parse(const std::vector<std::string>& args);
  const Command& command() const { return command_; }

 private:
  std::unique_ptr<CLI::App> app_;
  Command command_;
};

// `memfit plan` but its --profile: checks where it will write (--timeline,
// --trace), plans, writes the timeline, and returns the report as text or
// JSON (output.json).
Result<std::string> plan_command(const PlanRequest& request, const PlanOutput& output);

}  // namespace memfit::cli
