// The memfit command line. Thin: command_line.h binds its flags to
// include/memfit's structs (the step flags once, for train, plan and
// maxbatch); this file runs what it parsed through the library, which holds
// every default and check.
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <new>
#include <utility>
#include <vector>

#include "memfit/builder.h"
#include "memfit/dist.h"
#include "memfit/plan.h"
#include "memfit/step.h"
#include "memfit/train.h"
#include "tools/memfit/command_line.h"

namespace {

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

int run_train(memfit::TrainOptions options, bool json) {
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
  // With --json, stdout holds only the report; the progress lines go to stderr.
  FILE* progress = json ? stderr : stdout;
  auto report = memfit::train(options, [progress](const std::string& line) {
    std::fprintf(progress, "%s\n", line.c_str());
    std::fflush(progress);
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
  if (json) {
    std::fputs(memfit::train_report_json(options, *report).c_str(), stdout);
    return 0;
  }
  if (!report->test_accuracy.empty()) {
    std::printf("final test accuracy: %.2f%%\n", 100.0 * report->test_accuracy.back());
  }
  std::printf("training speed: %.0f examples/s\n", report->examples_per_second);
  std::printf("step memory: planned arena %zu bytes, measured high-water mark %zu bytes\n",
              report->arena_bytes, report->high_water_bytes);
  return 0;
}

// `memfit evaluate`: the loss and accuracy of a checkpoint on a set of examples.
int run_evaluate(const memfit::TrainOptions& options, bool json) {
  FILE* progress = json ? stderr : stdout;
  auto report = memfit::evaluate(options, [progress](const std::string& line) {
    std::fprintf(progress, "%s\n", line.c_str());
    std::fflush(progress);
  });
  if (!report) {
    std::fprintf(stderr, "memfit evaluate: %s\n", report.message().c_str());
    return 1;
  }
  if (json) {
    std::printf("{\n  \"loss\": %.17g,\n  \"accuracy\": %.17g,\n  \"examples\": %lld\n}\n",
                report->loss, report->accuracy, static_cast<long long>(report->examples));
  } else {
    std::printf("loss %.4f%s, accuracy %.2f%% (%lld examples)\n", report->loss,
                report->loss_in_nats ? " nats" : "", 100.0 * report->accuracy,
                static_cast<long long>(report->examples));
  }
  return 0;
}

using memfit::cli::PlanOutput;

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
  auto out = memfit::cli::plan_command(request, output);
  if (!out) {
    std::fprintf(stderr, "memfit plan: %s\n", out.message().c_str());
    return 1;
  }
  std::fputs(out->c_str(), stdout);
  if (output.profile.profile || !output.profile.trace_path.empty()) {
    std::fflush(stdout);
    return run_plan_profile(request, output.profile);
  }
  return 0;
}

int run_max_batch(const memfit::PlanRequest& request, memfit::Capacity vary, bool json) {
  // Each probe is shown once the search has taken 2 s: long searches show progress.
  double searched_seconds = 0;
  auto progress = [&](int64_t value, memfit::Probe probe, double seconds) {
    searched_seconds += seconds;
    if (searched_seconds < 2.0) return;
    std::fprintf(stderr, "memfit maxbatch: %s %lld %s (planned in %.1f s)\n",
                 std::string(memfit::capacity_name(vary)).c_str(), static_cast<long long>(value),
                 probe == memfit::Probe::fits          ? "fits"
                 : probe == memfit::Probe::over_budget ? "does not fit"
                                                       : "does not plan",
                 seconds);
  };
  auto report = memfit::find_max_batch(request, vary, progress);
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
  memfit::cli::CommandLine command_line;
  const memfit::cli::Parsed parsed = command_line.parse(std::vector<std::string>(argv, argv + argc));
  const memfit::cli::Command& c = command_line.command();
  if (!parsed.run) {
    if (parsed.exit_code == 0) {
      std::fputs(parsed.text.c_str(), stdout);
    } else if (!parsed.help.empty()) {
      std::fprintf(stderr, "memfit: %s\n\n%s", parsed.text.c_str(), parsed.help.c_str());
    } else {
      std::fprintf(stderr, "memfit %s: %s\n", c.name.c_str(), parsed.text.c_str());
    }
    return parsed.exit_code;
  }
  // An allocation that fails although the run was checked against the
  // machine's memory (another process took it meanwhile) is reported, never
  // a crash.
  try {
    if (c.name == "train") return run_train(c.train, c.train_json);
    if (c.name == "evaluate") return run_evaluate(c.evaluate, c.evaluate_json);
    if (c.name == "plan") return run_plan(c.plan, c.plan_output);
    if (c.name == "maxbatch") return run_max_batch(c.max_request, c.vary, c.max_json);
    if (c.name == "models") return run_models();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "memfit: out of memory: an allocation failed; make the step smaller (--budget "
                 "BYTES with --policy auto, --recompute, --swap, or a smaller --batch)\n");
    return 1;
  }
  return 0;
}
