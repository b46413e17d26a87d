#include "passes/recompute_milp.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "ir/phase.h"
#include "ops/op_table.h"
#include "passes/recompute.h"
#include "passes/recompute_optimal.h"

#ifdef MEMFIT_HAVE_CBC
#include <Cbc_C_Interface.h>
#endif

namespace memfit {

bool milp_available() {
#ifdef MEMFIT_HAVE_CBC
  return true;
#else
  return false;
#endif
}

#ifdef MEMFIT_HAVE_CBC
namespace {

// Stage 1: the droppable nodes and the stages that need them.
struct MilpProblem {
  struct Item {
    std::vector<ValueId> outputs;  // its droppable outputs: kept or recomputed together
    double seconds = 0;
    double mib = 0;                // the outputs' bytes, in MiB (well-scaled coefficients)
    int32_t last = 0;              // L_i: the last stage (1-based) that needs it
    std::vector<int32_t> read_at;  // stages whose node reads it
    std::vector<int32_t> inputs;   // items it reads
  };
  std::vector<Item> items;  // in forward order; only those some stage needs
  int32_t stages = 0;
  double total_mib = 0;
  // base_mib[t - 1]: the bytes of every other value (parameters, gradients,
  // optimizer state, kept activations) live at stage t's node in the graph's
  // order: the same for every choice, but it decides which stage peaks.
  std::vector<double> base_mib;
};

// `mirrored`: by node, the forward nodes the pass mirrors (empty: none).
MilpProblem milp_problem(const Graph& graph, const NodeSeconds& seconds,
                         const std::vector<bool>& mirrored) {
  const size_t num_nodes = graph.num_nodes();
  std::vector<bool> forward(num_nodes);
  for (size_t i = 0; i < num_nodes; ++i) {
    forward[i] = node_phase(graph, graph.nodes()[i]) == Phase::forward;
  }
  auto is_mirrored = [&](NodeId node) {
    return node.valid() && !mirrored.empty() && mirrored[node.idx()];
  };
  std::vector<bool> needed(graph.num_values(), false), fixed(graph.num_values(), false);
  for (size_t i = 0; i < num_nodes; ++i) {
    if (!forward[i]) continue;
    for (ValueId in : graph.nodes()[i].inputs) needed[in.idx()] = true;
  }
  for (ValueId v : graph.outputs()) needed[v.idx()] = fixed[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) needed[u.next.idx()] = fixed[u.next.idx()] = true;
  // item_of[v]: the item that makes droppable value v; -1: none (always kept,
  // or mirrored). A mirrored value is recomputed from scratch for each
  // reader, from the items in through[v] (found through the mirrored values
  // it reads), with mirror_mib[v] of transient clones (its chain's outputs).
  std::vector<int32_t> item_of(graph.num_values(), -1);
  std::vector<std::vector<int32_t>> through(graph.num_values());
  std::vector<double> mirror_mib(graph.num_values(), 0);
  // The items a read of `in` needs held or recomputed in its stage.
  auto items_read = [&](ValueId in, std::vector<int32_t>& out) {
    if (item_of[in.idx()] >= 0) out.push_back(item_of[in.idx()]);
    if (is_mirrored(graph.value(in).producer))
      out.insert(out.end(), through[in.idx()].begin(), through[in.idx()].end());
  };
  auto deduplicate = [](std::vector<int32_t>& items) {
    std::sort(items.begin(), items.end());
    items.erase(std::unique(items.begin(), items.end()), items.end());
  };
  std::vector<MilpProblem::Item> all;
  for (size_t i = 0; i < num_nodes; ++i) {
    if (!forward[i]) continue;
    const Node& node = graph.nodes()[i];
    if (is_mirrored(NodeId(static_cast<int32_t>(i)))) {
      std::vector<int32_t> items;
      double mib = 0;
      for (ValueId in : node.inputs) {
        items_read(in, items);
        if (is_mirrored(graph.value(in).producer)) mib += mirror_mib[in.idx()];
      }
      deduplicate(items);
      for (ValueId out : node.outputs)
        mib += static_cast<double>(graph.value(out).bytes()) / (1 << 20);
      for (ValueId out : node.outputs) {
        through[out.idx()] = items;
        mirror_mib[out.idx()] = mib;
      }
      continue;
    }
    bool any_needed = false;
    for (ValueId out : node.outputs) any_needed = any_needed || needed[out.idx()];
    if (!any_needed) continue;
    MilpProblem::Item item;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueId out = node.outputs[o];
      if (fixed[out.idx()] || always_kept(node, o)) continue;
      item.outputs.push_back(out);
      item.mib += static_cast<double>(graph.value(out).bytes()) / (1 << 20);
      item_of[out.idx()] = static_cast<int32_t>(all.size());
    }
    if (item.outputs.empty()) continue;
    item.seconds = seconds(graph, recompute_form(node));
    for (ValueId in : node.inputs) items_read(in, item.inputs);
    deduplicate(item.inputs);
    all.push_back(std::move(item));
  }
  MilpProblem problem;
  // The live bytes of the values that are not items, over the graph's order
  // (a difference array): inputs from the start, outputs and updates to the end.
  std::vector<int32_t> last_use(graph.num_values(), -1);
  for (size_t i = 0; i < num_nodes; ++i) {
    for (ValueId in : graph.nodes()[i].inputs) last_use[in.idx()] = static_cast<int32_t>(i);
  }
  const auto end = static_cast<int32_t>(num_nodes) - 1;
  for (ValueId v : graph.outputs()) last_use[v.idx()] = end;
  for (const StateUpdate& u : graph.updates())
    last_use[u.state.idx()] = last_use[u.next.idx()] = end;
  std::vector<double> delta(num_nodes + 1, 0);
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const Value& value = graph.values()[v];
    // Mirrored values live only in their readers' stages (added below).
    if (item_of[v] >= 0 || is_mirrored(value.producer)) continue;
    const int32_t def = value.producer.valid() ? value.producer.index : 0;
    const int32_t last = std::max(last_use[v], def);
    const double mib = static_cast<double>(value.bytes()) / (1 << 20);
    delta[static_cast<size_t>(def)] += mib;
    delta[static_cast<size_t>(last) + 1] -= mib;
  }
  std::vector<double> live(num_nodes);
  double running = 0;
  for (size_t i = 0; i < num_nodes; ++i) live[i] = running += delta[i];
  std::vector<int32_t> items;
  for (size_t i = 0; i < num_nodes; ++i) {
    if (forward[i]) continue;
    items.clear();
    double transient = 0;
    for (ValueId in : graph.nodes()[i].inputs) {
      items_read(in, items);
      if (is_mirrored(graph.value(in).producer)) transient += mirror_mib[in.idx()];
    }
    if (items.empty()) continue;
    deduplicate(items);
    ++problem.stages;
    problem.base_mib.push_back(live[i] + transient);
    for (int32_t item : items) all[static_cast<size_t>(item)].read_at.push_back(problem.stages);
  }
  // L_i, in reverse forward order: readers of an item come after it.
  for (size_t i = all.size(); i-- > 0;) {
    if (!all[i].read_at.empty()) all[i].last = std::max(all[i].last, all[i].read_at.back());
    for (int32_t in : all[i].inputs) {
      all[static_cast<size_t>(in)].last = std::max(all[static_cast<size_t>(in)].last, all[i].last);
    }
  }
  // Keep only the needed items, renumbering their inputs.
  std::vector<int32_t> renumber(all.size(), -1);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].last == 0) continue;
    renumber[i] = static_cast<int32_t>(problem.items.size());
    problem.total_mib += all[i].mib;
    problem.items.push_back(std::move(all[i]));
    for (int32_t& in : problem.items.back().inputs) in = renumber[static_cast<size_t>(in)];
  }
  return problem;
}

// Stages 2-3 for memory M (MiB): the items to keep, or an empty result
// (with `feasible` false) when CBC finds no solution in `seconds`.
std::vector<bool> solve_milp(const MilpProblem& p, double memory_mib, double seconds,
                             bool* feasible) {
  Cbc_Model* model = Cbc_newModel();
  Cbc_setLogLevel(model, 0);
  int columns = 0;
  auto add_column = [&](double cost) {
    Cbc_addCol(model, "x", 0, 1, cost, 1, 0, nullptr, nullptr);
    return columns++;
  };
  const size_t n = p.items.size();
  std::vector<int> keep(n), r_base(n), s_base(n);
  for (size_t i = 0; i < n; ++i) {
    const MilpProblem::Item& item = p.items[i];
    keep[i] = add_column(0);
    r_base[i] = columns;
    for (int32_t t = 1; t <= item.last; ++t) add_column(item.seconds);
    s_base[i] = columns;
    for (int32_t t = 2; t <= item.last; ++t) add_column(0);
  }
  auto r = [&](size_t i, int32_t t) { return r_base[i] + t - 1; };
  auto s = [&](size_t i, int32_t t) { return t == 1 ? keep[i] : s_base[i] + t - 2; };
  auto row = [&](std::vector<int> cols, std::vector<double> coefs, char sense, double rhs) {
    Cbc_addRow(model, "c", static_cast<int>(cols.size()), cols.data(), coefs.data(), sense, rhs);
  };
  for (size_t i = 0; i < n; ++i) {
    const MilpProblem::Item& item = p.items[i];
    for (int32_t t : item.read_at) row({s(i, t), r(i, t)}, {1, 1}, 'G', 1);
    for (int32_t t = 1; t <= item.last; ++t) {
      for (int32_t in : item.inputs) {
        const auto j = static_cast<size_t>(in);
        row({r(i, t), r(j, t), s(j, t)}, {1, -1, -1}, 'L', 0);
      }
      if (t < item.last) row({s(i, t + 1), s(i, t), r(i, t)}, {1, -1, -1}, 'L', 0);
    }
    std::vector<int> cols{keep[i]};
    for (int32_t t = 1; t <= item.last; ++t) cols.push_back(r(i, t));
    row(cols, std::vector<double>(cols.size(), 1.0), 'L', 1);
  }
  for (int32_t t = 1; t <= p.stages; ++t) {
    std::vector<int> cols;
    std::vector<double> coefs;
    for (size_t i = 0; i < n; ++i) {
      if (p.items[i].last < t) continue;
      cols.insert(cols.end(), {s(i, t), r(i, t)});
      coefs.insert(coefs.end(), {p.items[i].mib, p.items[i].mib});
    }
    if (!cols.empty()) row(cols, coefs, 'L', memory_mib - p.base_mib[static_cast<size_t>(t - 1)]);
  }
  Cbc_setObjSense(model, 1);
  Cbc_setMaximumSeconds(model, std::max(seconds, 0.1));
  Cbc_solve(model);
  const double* solution = Cbc_bestSolution(model);
  std::vector<bool> kept(n, false);
  *feasible = solution != nullptr;
  if (solution) {
    for (size_t i = 0; i < n; ++i) kept[i] = solution[keep[i]] > 0.5;
  }
  Cbc_deleteModel(model);
  return kept;
}

}  // namespace
#endif

Result<RecomputedGraph> apply_milp(Graph graph, size_t memory_budget, const ArenaOf& arena_of,
                                   const NodeSeconds& seconds, double time_limit, bool mirror) {
#ifndef MEMFIT_HAVE_CBC
  (void)graph, (void)memory_budget, (void)arena_of, (void)seconds, (void)time_limit, (void)mirror;
  return Status::error(
      "--recompute milp needs CBC, and this memfit was built without it: install "
      "coinor-libcbc-dev (scripts/install-deps.sh) and configure again, or use --recompute "
      "optimal");
#else
  RecomputeOptions mirror_alone;
  mirror_alone.mirror = mirror;
  MEMFIT_ASSIGN_OR_RETURN(const std::vector<bool> mirrored, mirrored_nodes(graph, mirror_alone));
  const MilpProblem problem = milp_problem(graph, seconds, mirrored);
  if (problem.items.size() > kMilpMaxNodes) {
    return Status::error(
        "--recompute milp solves graphs of at most " + std::to_string(kMilpMaxNodes) +
        " recomputable forward nodes; this one has " + std::to_string(problem.items.size()) +
        ": use --recompute optimal, or a smaller model");
  }
  const std::vector<Cut> candidates = checkpoint_candidates(graph);
  TrialSet trials(graph, candidates, arena_of, seconds, mirror);
  MEMFIT_ASSIGN_OR_RETURN(const PlannedTrial* plain, trials.plan({}, true));
  MEMFIT_ASSIGN_OR_RETURN(const PlannedTrial* sqrt, trials.plan(sqrt_checkpoints(candidates)));
  MEMFIT_RETURN_IF_ERROR(trials.plan(cut_values(candidates)).status());
  const size_t target = memory_budget > 0 ? memory_budget : sqrt->arena;
  if (plain->arena <= target) return trials.best(target);

  // Stage 4: bisection over M, each solve with an equal share of the time left.
  constexpr int kSolves = 6;
  const auto start = std::chrono::steady_clock::now();
  double base = 0;
  for (double b : problem.base_mib) base = std::max(base, b);
  double lo = base, hi = base + problem.total_mib;
  for (int solve = 0; solve < kSolves; ++solve) {
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double left = time_limit - spent;
    if (left <= 0) break;
    const double mid = (lo + hi) / 2;
    bool feasible = false;
    const std::vector<bool> kept = solve_milp(problem, mid, left / (kSolves - solve), &feasible);
    if (!feasible) {
      lo = mid;
      continue;
    }
    std::vector<ValueId> keep;
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept[i])
        keep.insert(keep.end(), problem.items[i].outputs.begin(), problem.items[i].outputs.end());
    }
    MEMFIT_ASSIGN_OR_RETURN(const PlannedTrial* trial, trials.plan(std::move(keep)));
    (trial->arena <= target ? lo : hi) = mid;
  }
  return trials.best(target);
#endif
}

}  // namespace memfit
