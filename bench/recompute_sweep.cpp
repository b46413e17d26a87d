// The depth sweep of recomputation: planned memory and measured step time of
// resnet-cifar over its depth and lstm-lm over its sequence length, for each
// recompute strategy, side by side in one run. Prints one markdown table per
// model and writes an SVG plot of activation memory against n.
//
//   ./build/bench/recompute_sweep [--strategies none,sqrt,recursive] [--mirror]
//       [--depths 29,56,110,164,326,650,1001] [--seq-lens 100,200,500,1000,2000,5000]
//       [--plan-batch 64] [--time-batch 8] [--seq-batch 20] [--time-depth 164]
//       [--time-seq 100]
//       [--steps 3] [--threads 2] [--svg FILE] [--chain 32,64,...,1024]
//       [--budget-ratio R] [--cost roofline|measured] [--interleave]
//
// Planned: the arena of one SGD training step at --plan-batch on the cpu
// backend (memfit plan's), and its activation memory: the arena minus the
// parameter and optimizer-state bytes live at the peak, i.e. what the step
// needs beyond the model's persistent state (activations, their gradients,
// parameter gradients in flight, workspaces). lstm-lm is planned and timed
// at --seq-batch (its default batch, 20). Measured: the median wall time
// of --steps training steps after one warm-up step, at --time-batch, for
// depths up to --time-depth and sequence lengths up to --time-seq (0: none).
// --mirror adds each strategy again with mirror; a strategy written S+mirror
// is S with mirror. --budget-ratio R: the budget-driven strategies (budget,
// optimal, milp) get a memory budget of the first strategy's arena (at the
// same size and batch) divided by R. --cost: the node times optimal and milp
// minimize (measured: each distinct node timed on the backend, 3 runs).
// --interleave: at the timed sizes each strategy's step is compiled once and
// kept, warmed up by one step, then --steps rounds run one step of each
// strategy in turn (none, X, Y, none, X, Y, ...), so that load on the
// machine falls on every strategy alike; the row's arena and recomputed
// nodes are then those of the timed step (at --time-batch), its step time
// the median, and every step's time and the load average (/proc/loadavg)
// before and after are printed.
// After each table, the growth: activation MiB / n, / sqrt(n) and / log2(n)
// per strategy, the one that stays flat telling the order of growth.
// --depths '' or --seq-lens '' leaves that model out (and its SVG panel).
// --mirror adds each strategy again with mirror. --chain first prints the
// planned arena (reference backend) of a chain of n tanh layers of 64 KiB
// each (tests/recompute_levels_test.cpp asserts its growth), in layers.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "autodiff/autodiff.h"
#include "memfit/plan.h"
#include "train/data_source.h"
#include "train/training_program.h"

using namespace memfit;

namespace {

struct Flags {
  std::vector<std::string> strategies = {"none", "sqrt", "recursive"};
  bool mirror = false;
  std::vector<int64_t> depths = {29, 56, 110, 164, 326, 650, 1001};
  std::vector<int64_t> seq_lens = {100, 200, 500, 1000, 2000, 5000};
  int64_t plan_batch = 64, time_batch = 8, seq_batch = 20, time_depth = 164, time_seq = 100,
          steps = 3;
  int threads = 2;
  std::string svg;
  std::vector<int64_t> chain;
  double budget_ratio = 0;  // 0: no memory budget
  CostModel cost = CostModel::roofline;
  bool interleave = false;
};

// "S+mirror" names strategy S with mirror.
constexpr std::string_view kMirrorSuffix = "+mirror";
bool mirrored(const std::string& s) { return s.ends_with(kMirrorSuffix); }
std::string strategy_name(const std::string& s) {
  return mirrored(s) ? s.substr(0, s.size() - kMirrorSuffix.size()) : s;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  if (text.empty()) return parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  return parts;
}

std::vector<int64_t> numbers(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& part : split(text)) out.push_back(std::atoll(part.c_str()));
  return out;
}

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "recompute_sweep: %s (see the comment at the top of bench/recompute_sweep.cpp)\n",
               problem);
  std::exit(2);
}

Flags parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--mirror" || flag == "--interleave") {
      (flag == "--mirror" ? f.mirror : f.interleave) = true;
      continue;
    }
    if (i + 1 >= argc) usage(("no value after " + flag).c_str());
    const std::string value = argv[++i];
    if (flag == "--strategies") {
      f.strategies = split(value);
    } else if (flag == "--depths") {
      f.depths = numbers(value);
    } else if (flag == "--seq-lens") {
      f.seq_lens = numbers(value);
    } else if (flag == "--plan-batch") {
      f.plan_batch = std::atoll(value.c_str());
    } else if (flag == "--time-batch") {
      f.time_batch = std::atoll(value.c_str());
    } else if (flag == "--time-depth") {
      f.time_depth = std::atoll(value.c_str());
    } else if (flag == "--seq-batch") {
      f.seq_batch = std::atoll(value.c_str());
    } else if (flag == "--time-seq") {
      f.time_seq = std::atoll(value.c_str());
    } else if (flag == "--steps") {
      f.steps = std::max<int64_t>(1, std::atoll(value.c_str()));
    } else if (flag == "--threads") {
      f.threads = std::atoi(value.c_str());
    } else if (flag == "--chain") {
      f.chain = numbers(value);
    } else if (flag == "--svg") {
      f.svg = value;
    } else if (flag == "--budget-ratio") {
      f.budget_ratio = std::atof(value.c_str());
    } else if (flag == "--cost") {
      if (value != "roofline" && value != "measured") usage("--cost is roofline or measured");
      f.cost = value == "measured" ? CostModel::measured : CostModel::roofline;
    } else {
      usage(("unknown flag " + flag).c_str());
    }
  }
  for (const std::string& s : f.strategies) {
    if (!parse_name<Recompute>(strategy_name(s))) usage(("unknown strategy " + s).c_str());
  }
  return f;
}

struct Variant {
  Recompute recompute;
  bool mirror;
  std::string label() const {
    return std::string(name_of(recompute)) + (mirror ? "+mirror" : "");
  }
  // The strategies that a memory budget steers.
  bool budgeted() const {
    return recompute == Recompute::budget || recompute == Recompute::optimal ||
           recompute == Recompute::milp;
  }
};

struct Cell {
  size_t arena = 0, activation = 0, recomputed = 0;
  double seconds = -1;  // < 0: not measured
  bool timed_plan = false;  // arena and recomputed nodes of the timed step (no activation)
};

OptimizerConfig sgd() {
  OptimizerConfig o;
  o.lr = 0.01f;
  return o;
}

Cell plan_cell(const ModelOptions& model, const Variant& v, size_t budget, CostModel cost) {
  PlanRequest request;
  request.step.model = model;
  request.step.optimizer = sgd();
  request.step.recompute = v.recompute;
  request.step.mirror = v.mirror;
  request.step.budget = v.budgeted() ? budget : 0;
  request.step.cost = cost;
  auto report = plan_training_step(request);
  if (!report) {
    std::fprintf(stderr, "recompute_sweep: %s\n", report.message().c_str());
    std::exit(1);
  }
  Cell c;
  c.arena = report->arena_bytes;
  c.activation = report->arena_bytes - report->by_role.parameters - report->by_role.optimizer_state;
  c.recomputed = report->recomputed_nodes;
  return c;
}

// One variant's training step, compiled, with its state and one batch of
// synthetic data.
struct TimedStep {
  std::unique_ptr<TrainingProgram> program;
  StateStore state;
  Batch batch;
  StepCounters counters;
  std::vector<double> seconds;  // of the timed steps
};

std::unique_ptr<TimedStep> compile_timed_step(const ModelOptions& model, const Variant& v,
                                        DataKind data_kind, int threads, size_t budget,
                                        CostModel cost) {
  auto timed = std::make_unique<TimedStep>();
  StepSpec spec;
  spec.model = model;
  spec.optimizer = sgd();
  spec.threads = threads;
  spec.budget = v.budgeted() ? budget : 0;
  spec.recompute = v.recompute;
  spec.mirror = v.mirror;
  spec.cost = cost;
  auto program = TrainingProgram::create(spec, model.batch);
  if (!program) {
    std::fprintf(stderr, "recompute_sweep: %s\n", program.message().c_str());
    std::exit(1);
  }
  timed->program = std::move(*program);
  timed->program->init_state(timed->state, 1);
  if (!timed->program->load_state(timed->state).is_ok()) std::exit(1);
  auto data = synthetic_source(data_kind, timed->program->model(), model.batch, model.batch, 5);
  if (!data) {
    std::fprintf(stderr, "recompute_sweep: %s\n", data.message().c_str());
    std::exit(1);
  }
  timed->batch = Batch::for_model(timed->program->model());
  std::vector<int64_t> examples(static_cast<size_t>(model.batch));
  std::iota(examples.begin(), examples.end(), 0);
  if (!(*data)->fill(false, examples, timed->batch).is_ok()) std::exit(1);
  return timed;
}

// Runs one step; its wall seconds.
double run_step(TimedStep& timed) {
  const auto start = std::chrono::steady_clock::now();
  if (!timed.program->micro_step(timed.batch.feeds(), 1, 1.0f, timed.counters)) {
    std::exit(1);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The middle one, or the mean of the middle two.
double median(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  const size_t half = seconds.size() / 2;
  return seconds.size() % 2 ? seconds[half] : (seconds[half - 1] + seconds[half]) / 2;
}

// The median seconds of `steps` training steps after a warm-up step.
double time_steps(const ModelOptions& model, const Variant& v, DataKind data_kind, int threads,
                  int64_t steps, size_t budget, CostModel cost) {
  const auto timed = compile_timed_step(model, v, data_kind, threads, budget, cost);
  run_step(*timed);  // warms up
  for (int64_t s = 0; s < steps; ++s) timed->seconds.push_back(run_step(*timed));
  return median(timed->seconds);
}

std::string load_average() {
  std::ifstream file("/proc/loadavg");
  std::string line;
  std::getline(file, line);
  return line;
}

// --interleave: every variant compiled (variant 0 first: the budget is its
// arena / ratio), warmed up, then `steps` rounds of one step each in turn.
void time_interleaved(const ModelOptions& model, const std::vector<Variant>& variants,
                      DataKind data_kind, const Flags& f, std::vector<Cell>& row) {
  std::vector<std::unique_ptr<TimedStep>> timed;
  size_t budget = 0;
  for (const Variant& v : variants) {
    timed.push_back(compile_timed_step(model, v, data_kind, f.threads, budget, f.cost));
    if (timed.size() == 1 && f.budget_ratio > 0) {
      budget = static_cast<size_t>(static_cast<double>(timed[0]->program->arena_bytes()) /
                                   f.budget_ratio);
      std::fprintf(stderr, "budget of the budget-driven strategies: %zu bytes\n", budget);
    }
  }
  std::fprintf(stderr, "load average before: %s\n", load_average().c_str());
  for (auto& t : timed) run_step(*t);  // warm-up
  for (int64_t round = 0; round < f.steps; ++round) {
    for (size_t k = 0; k < variants.size(); ++k) {
      timed[k]->seconds.push_back(run_step(*timed[k]));
      std::fprintf(stderr, "round %lld %s: %.3f s\n", static_cast<long long>(round),
                   variants[k].label().c_str(), timed[k]->seconds.back());
    }
  }
  std::fprintf(stderr, "load average after: %s\n", load_average().c_str());
  for (size_t k = 0; k < variants.size(); ++k) {
    Cell& c = row[k];
    c.arena = timed[k]->program->arena_bytes();
    c.recomputed = timed[k]->program->recompute_summary().recomputed_nodes;
    c.activation = 0;
    c.timed_plan = true;
    c.seconds = median(timed[k]->seconds);
    const auto [low, high] =
        std::minmax_element(timed[k]->seconds.begin(), timed[k]->seconds.end());
    std::printf("%s: arena %zu bytes, steps min %.3f median %.3f max %.3f s\n",
                variants[k].label().c_str(), c.arena, *low, c.seconds, *high);
  }
}

// n tanh layers of `width` floats over a parameter, summed into the loss,
// with the backward pass (as tests/recompute_levels_test.cpp builds it).
Graph tanh_chain(int64_t n, int64_t width) {
  const std::string type = "f32[" + std::to_string(width) + "]";
  std::string text = "memfit-graph 1\ninput %w " + type + " parameter\n";
  std::string previous = "w";
  for (int64_t i = 1; i <= n; ++i) {
    const std::string t = "t" + std::to_string(i);
    text += "node " + t + " = tanh(%" + previous + ") -> %" + t + " " + type + " activation\n";
    previous = t;
  }
  text += "node loss = reduce_sum(%" + previous +
          ") {axes=[0] keepdims=false} -> %loss f32[] activation\noutput %loss\n";
  Graph g = parse_graph(text).value();
  if (!append_gradients(g, g.find_value("loss"), {g.find_value("w")}).is_ok()) std::exit(1);
  return g;
}

void print_chain(const Flags& f, const std::vector<Variant>& variants) {
  constexpr int64_t kWidth = 16384;
  constexpr size_t kLayer = kWidth * sizeof(float);
  std::printf("tanh chain: planned arena in layers of %zu bytes (reference backend)\n\n| n |",
              kLayer);
  for (const Variant& v : variants) std::printf(" %s |", v.label().c_str());
  std::printf("\n|---|");
  for (size_t k = 0; k < variants.size(); ++k) std::printf("---|");
  std::printf("\n");
  const auto backend = make_reference_backend();
  const ArenaOf unused = [](const Graph&) -> Result<size_t> { return size_t{0}; };
  for (int64_t n : f.chain) {
    const Graph g = tanh_chain(n, kWidth);
    std::printf("| %lld |", static_cast<long long>(n));
    for (const Variant& v : variants) {
      auto recomputed = apply_recompute(g, v.recompute, 0, unused, v.mirror);
      if (!recomputed) std::exit(1);
      auto prepared = Executable::prepare(std::move(recomputed->graph), *backend);
      if (!prepared) std::exit(1);
      std::printf(" %.1f |", static_cast<double>((*prepared)->plan().arena_bytes) / kLayer);
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

double mib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

struct Sweep {
  std::string model, axis;  // "resnet-cifar", "depth"
  std::vector<int64_t> sizes;
  std::vector<std::vector<Cell>> cells;  // [size][variant]
};

void print_table(const Sweep& s, const std::vector<Variant>& variants, const Flags& f) {
  const bool resnet = s.model == "resnet-cifar";
  std::printf(
      "\n%s: planned at batch %lld; step time at batch %lld, %d threads (median of %lld)\n\n",
      s.model.c_str(), static_cast<long long>(resnet ? f.plan_batch : f.seq_batch),
      static_cast<long long>(resnet ? f.time_batch : f.seq_batch), f.threads,
      static_cast<long long>(f.steps));
  std::printf(
      "| %s | strategy | arena MiB | activation MiB | arena / none | recomputed nodes | "
      "step s | time / none |\n|---|---|---|---|---|---|---|---|\n",
      s.axis.c_str());
  for (size_t i = 0; i < s.sizes.size(); ++i) {
    const Cell& base = s.cells[i][0];
    for (size_t k = 0; k < variants.size(); ++k) {
      const Cell& c = s.cells[i][k];
      std::string step = "-", ratio = "-";
      if (c.seconds >= 0) {
        char buffer[64];
        std::snprintf(buffer, sizeof buffer, "%.3f", c.seconds);
        step = buffer;
        if (base.seconds > 0) {
          std::snprintf(buffer, sizeof buffer, "%.2f", c.seconds / base.seconds);
          ratio = buffer;
        }
      }
      char activation[32] = "-";
      if (!c.timed_plan) std::snprintf(activation, sizeof activation, "%.1f", mib(c.activation));
      std::printf("| %lld | %s | %.1f | %s | %.3f | %zu | %s | %s |\n",
                  static_cast<long long>(s.sizes[i]), variants[k].label().c_str(), mib(c.arena),
                  activation, static_cast<double>(c.arena) / static_cast<double>(base.arena),
                  c.recomputed, step.c_str(), ratio.c_str());
    }
  }
  std::printf("\n%s growth: activation MiB / n, / sqrt(n), / log2(n)\n\n| %s |", s.model.c_str(),
              s.axis.c_str());
  for (const Variant& v : variants) std::printf(" %s |", v.label().c_str());
  std::printf("\n|---|");
  for (size_t k = 0; k < variants.size(); ++k) std::printf("---|");
  std::printf("\n");
  for (size_t i = 0; i < s.sizes.size(); ++i) {
    const auto n = static_cast<double>(s.sizes[i]);
    std::printf("| %lld |", static_cast<long long>(s.sizes[i]));
    for (size_t k = 0; k < variants.size(); ++k) {
      // A timed step's plan (--interleave) has no activation bytes: "-".
      const double a = mib(s.cells[i][k].activation);
      if (s.cells[i][k].timed_plan) std::printf(" - |");
      else std::printf(" %.3f, %.2f, %.1f |", a / n, a / std::sqrt(n), a / std::log2(n));
    }
    std::printf("\n");
  }
  std::fflush(stdout);
}

// One panel: activation MiB against n, a polyline per variant, linear axes.
std::string panel(const Sweep& s, const std::vector<Variant>& variants, double x0, double y0,
                  double w, double h) {
  static const char* kColors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd",
                                  "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"};
  double max_x = 1, max_y = 1;
  for (size_t i = 0; i < s.sizes.size(); ++i) {
    max_x = std::max(max_x, static_cast<double>(s.sizes[i]));
    for (const Cell& c : s.cells[i]) max_y = std::max(max_y, mib(c.activation));
  }
  auto px = [&](double x) { return x0 + w * x / max_x; };
  auto py = [&](double y) { return y0 + h - h * y / max_y; };
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#999'/>\n"
                "<text x='%.1f' y='%.1f' font-size='14' text-anchor='middle'>%s: activation MiB "
                "against %s</text>\n",
                x0, y0, w, h, x0 + w / 2, y0 - 10, s.model.c_str(), s.axis.c_str());
  out += buf;
  for (int t = 0; t <= 4; ++t) {  // ticks
    const double y = max_y * t / 4, x = max_x * t / 4;
    std::snprintf(buf, sizeof buf,
                  "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%.0f</text>\n"
                  "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%.0f</text>\n"
                  "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#eee'/>\n",
                  x0 - 4, py(y) + 4, y, px(x), y0 + h + 14, x, x0, py(y), x0 + w, py(y));
    out += buf;
  }
  for (size_t k = 0; k < variants.size(); ++k) {
    std::string points;
    for (size_t i = 0; i < s.sizes.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(static_cast<double>(s.sizes[i])),
                    py(mib(s.cells[i][k].activation)));
      points += buf;
    }
    const char* color = kColors[k % 8];
    out += "<polyline fill='none' stroke-width='2' stroke='" + std::string(color) + "' points='" +
           points + "'/>\n";
    for (size_t i = 0; i < s.sizes.size(); ++i) {
      std::snprintf(buf, sizeof buf,
                    "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'><title>%s %s %lld: %.1f "
                    "MiB</title></circle>\n",
                    px(static_cast<double>(s.sizes[i])), py(mib(s.cells[i][k].activation)), color,
                    variants[k].label().c_str(), s.axis.c_str(), static_cast<long long>(s.sizes[i]),
                    mib(s.cells[i][k].activation));
      out += buf;
    }
    std::snprintf(buf, sizeof buf, "<text x='%.1f' y='%.1f' font-size='12' fill='%s'>%s</text>\n",
                  x0 + 10, y0 + 18 + 16.0 * static_cast<double>(k), color,
                  variants[k].label().c_str());
    out += buf;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const Flags f = parse_flags(argc, argv);
  std::vector<Variant> variants;
  for (const std::string& s : f.strategies)
    variants.push_back({parse_name<Recompute>(strategy_name(s)).value(), mirrored(s)});
  if (f.mirror) {
    for (const std::string& s : f.strategies)
      variants.push_back({parse_name<Recompute>(strategy_name(s)).value(), true});
  }
  if (!f.chain.empty()) print_chain(f, variants);
  std::vector<Sweep> sweeps;
  sweeps.push_back({"resnet-cifar", "depth", f.depths, {}});
  sweeps.push_back({"lstm-lm", "sequence length", f.seq_lens, {}});
  std::erase_if(sweeps, [](const Sweep& s) { return s.sizes.empty(); });
  for (Sweep& s : sweeps) {
    const bool resnet = s.model == "resnet-cifar";
    for (int64_t n : s.sizes) {
      ModelOptions model{.name = s.model, .batch = resnet ? f.plan_batch : f.seq_batch};
      if (resnet) {
        model.depth = n;
      } else {
        model.seq_len = n;
      }
      const int64_t time_limit = resnet ? f.time_depth : f.time_seq;
      const DataKind kind = resnet ? DataKind::images : DataKind::tokens;
      std::vector<Cell> row(variants.size());
      if (f.interleave && n <= time_limit) {
        model.batch = f.time_batch;
        time_interleaved(model, variants, kind, f, row);
        s.cells.push_back(row);
        std::fprintf(stderr, "%s %lld done\n", s.model.c_str(), static_cast<long long>(n));
        continue;
      }
      size_t budget = 0;
      for (size_t k = 0; k < variants.size(); ++k) {
        row[k] = plan_cell(model, variants[k], budget, f.cost);
        if (k == 0 && f.budget_ratio > 0)
          budget = static_cast<size_t>(static_cast<double>(row[0].arena) / f.budget_ratio);
      }
      if (n <= time_limit) {
        model.batch = resnet ? f.time_batch : f.seq_batch;
        // The budget at the time batch: the first variant's arena there.
        size_t time_budget = 0;
        if (f.budget_ratio > 0) {
          time_budget = static_cast<size_t>(
              static_cast<double>(plan_cell(model, variants[0], 0, f.cost).arena) / f.budget_ratio);
        }
        // Interleaved rounds, so that load on the machine falls on every variant alike.
        std::vector<std::vector<double>> rounds(variants.size());
        for (int round = 0; round < 2; ++round) {
          for (size_t k = 0; k < variants.size(); ++k) {
            rounds[k].push_back(
                time_steps(model, variants[k], kind, f.threads, f.steps, time_budget, f.cost));
          }
        }
        for (size_t k = 0; k < variants.size(); ++k) {
          row[k].seconds = *std::min_element(rounds[k].begin(), rounds[k].end());
        }
      }
      s.cells.push_back(row);
      std::fprintf(stderr, "%s %lld done\n", s.model.c_str(), static_cast<long long>(n));
    }
    print_table(s, variants, f);
  }
  if (!f.svg.empty()) {
    const double w = 460, h = 300;
    std::string svg =
        "<svg xmlns='http://www.w3.org/2000/svg' width='1100' height='400' "
        "font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
    for (size_t i = 0; i < sweeps.size(); ++i) {
      svg += panel(sweeps[i], variants, 70 + 540 * static_cast<double>(i), 40, w, h);
    }
    svg += "</svg>\n";
    std::ofstream file(f.svg, std::ios::binary | std::ios::trunc);
    file << svg;
    if (!file.flush()) {
      std::fprintf(stderr, "recompute_sweep: cannot write %s\n", f.svg.c_str());
      return 1;
    }
  }
  return 0;
}
