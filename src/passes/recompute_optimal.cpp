#include "passes/recompute_optimal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/check.h"
#include "ir/phase.h"
#include "ops/op_table.h"
#include "passes/recompute.h"
#include "passes/recompute_rotor.h"

namespace memfit {

std::optional<ChainSchedule> evaluate_chain(const std::vector<ChainBlock>& blocks,
                                            const std::vector<BlockMode>& modes) {
  const size_t n = blocks.size();
  if (modes.size() != n || n == 0 || modes[n - 1] == BlockMode::checkpointed) return std::nullopt;
  for (size_t b = 0; b + 1 < n; ++b) {
    if (modes[b] == BlockMode::dropped && modes[b + 1] == BlockMode::stored) return std::nullopt;
  }
  ChainSchedule schedule{modes, 0, 0};
  size_t prefix = 0;  // bytes kept for the units before the current one
  for (size_t b = 0; b < n;) {
    if (modes[b] == BlockMode::stored) {
      prefix += blocks[b].saved + blocks[b].output;
      schedule.peak = std::max(schedule.peak, prefix);
      ++b;
      continue;
    }
    // A segment: dropped blocks up to a checkpointed one or the tail.
    size_t need = 0, j = b;
    for (;; ++j) {
      need += blocks[j].saved + blocks[j].output;
      schedule.seconds += blocks[j].seconds;
      if (modes[j] == BlockMode::checkpointed) {
        schedule.seconds -= blocks[j].output_seconds;
        break;
      }
      if (j + 1 == n) break;
    }
    schedule.peak = std::max(schedule.peak, prefix + need);
    if (modes[j] == BlockMode::checkpointed) prefix += blocks[j].output;
    b = j + 1;
  }
  return schedule;
}

std::optional<ChainSchedule> solve_chain(const std::vector<ChainBlock>& blocks, size_t memory) {
  // A segment recomputed at once holds all its blocks' bytes: summed as j
  // grows from b.
  size_t need = 0;
  double seconds = 0;
  auto segment = [&](size_t b, size_t j, size_t m) -> std::optional<double> {
    if (j == b) need = 0, seconds = 0;
    need += blocks[j].saved + blocks[j].output;
    if (need > m) return std::nullopt;
    seconds += blocks[j].seconds;
    return j + 1 == blocks.size() ? seconds : seconds - blocks[j].output_seconds;
  };
  const auto top = solve_top_level(blocks, memory, segment);
  if (!top) return std::nullopt;
  auto schedule = evaluate_chain(blocks, top->modes);
  MEMFIT_CHECK(schedule && schedule->peak <= memory);
  return schedule;
}

GraphChain graph_chain(const Graph& graph, const NodeSeconds& seconds, bool mirror) {
  GraphChain chain;
  // With mirror, the nodes the pass mirrors when nothing is kept; a candidate
  // made by one is left out, so that every checkpoint set chain_keep makes
  // (candidates and non-mirrored values) leaves this set as it is: keeping a
  // value un-mirrors only its own producer (recompute.h, stage 2).
  RecomputeOptions mirror_only;
  mirror_only.mirror = mirror;
  const std::vector<bool> mirrored = mirrored_nodes(graph, mirror_only).value();
  for (Cut& cut : checkpoint_candidates(graph)) {
    const bool any_mirrored = std::any_of(cut.values.begin(), cut.values.end(), [&](ValueId v) {
      return mirrored[graph.value(v).producer.idx()];
    });
    if (!any_mirrored) chain.candidates.push_back(std::move(cut));
  }
  const size_t n = chain.candidates.size();
  chain.blocks.assign(n + 1, ChainBlock{});
  chain.block_values.assign(n + 1, {});
  const size_t num_nodes = graph.num_nodes();
  std::vector<bool> forward(num_nodes);
  for (size_t i = 0; i < num_nodes; ++i) {
    forward[i] = node_phase(graph, graph.nodes()[i]) == Phase::forward;
  }
  // The recompute pass's stage 2 without checkpoints: which forward values it drops.
  std::vector<bool> needed(graph.num_values(), false), backward_reads(graph.num_values(), false);
  for (size_t i = 0; i < num_nodes; ++i) {
    for (ValueId in : graph.nodes()[i].inputs)
      (forward[i] ? needed : backward_reads)[in.idx()] = true;
  }
  std::vector<bool> fixed(graph.num_values(), false);
  for (ValueId v : graph.outputs()) needed[v.idx()] = fixed[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) needed[u.next.idx()] = fixed[u.next.idx()] = true;
  std::vector<bool> droppable(graph.num_values(), false);
  std::vector<int32_t> block_of(num_nodes, -1);
  std::vector<bool> is_candidate(graph.num_values(), false);
  std::vector<int32_t> cut_after(num_nodes, -1);  // the candidate taken after each node
  for (size_t c = 0; c < n; ++c) {
    for (ValueId v : chain.candidates[c].values) is_candidate[v.idx()] = true;
    cut_after[chain.candidates[c].after.idx()] = static_cast<int32_t>(c);
  }
  size_t block = 0;
  for (size_t i = 0; i < num_nodes; ++i) {
    if (!forward[i]) continue;
    const Node& node = graph.nodes()[i];
    block_of[i] = static_cast<int32_t>(block);
    bool any_needed = false;
    for (ValueId out : node.outputs) any_needed = any_needed || needed[out.idx()];
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueId out = node.outputs[o];
      if (!any_needed || fixed[out.idx()] || always_kept(node, o)) continue;
      droppable[out.idx()] = true;
      // A mirrored value is never stored: its clones serve each backward
      // reader, in every schedule alike, so they add the same seconds to all.
      if (mirrored[i]) continue;
      chain.block_values[block].push_back(out);
      if (!is_candidate[out.idx()] && backward_reads[out.idx()]) {
        chain.blocks[block].saved += graph.value(out).bytes();
      }
    }
    if (cut_after[i] >= 0) {
      // c_b's bytes: the sum of its cut's values.
      for (ValueId v : chain.candidates[static_cast<size_t>(cut_after[i])].values) {
        chain.blocks[block].output += graph.value(v).bytes();
      }
      ++block;
    }
  }
  // Stage 2's seconds: the nodes of a block the pass clones, found depth first
  // from the non-mirrored values the backward pass reads (then from the
  // output), never leaving the block (its input is a kept checkpoint or a
  // clone of the block before, counted there). The walk passes through the
  // mirrored nodes the clones read: they are cloned again for the segment.
  std::vector<bool> visited(num_nodes, false);
  std::vector<NodeId> stack;
  auto clone_seconds = [&](ValueId from) {
    double total = 0;
    const NodeId producer = graph.value(from).producer;
    if (visited[producer.idx()] || !droppable[from.idx()]) return total;
    const int32_t b = block_of[producer.idx()];
    visited[producer.idx()] = true;
    stack.push_back(producer);
    while (!stack.empty()) {
      const Node& node = graph.node(stack.back());
      stack.pop_back();
      total += seconds(graph, recompute_form(node));
      for (ValueId in : node.inputs) {
        if (!droppable[in.idx()]) continue;
        const NodeId p = graph.value(in).producer;
        if (block_of[p.idx()] != b || visited[p.idx()]) continue;
        visited[p.idx()] = true;
        stack.push_back(p);
      }
    }
    return total;
  };
  for (size_t b = 0; b <= n; ++b) {
    double inner = 0;
    for (ValueId v : chain.block_values[b]) {
      if (backward_reads[v.idx()] && !is_candidate[v.idx()]) inner += clone_seconds(v);
    }
    double output = 0;
    if (b < n) {
      for (ValueId v : chain.candidates[b].values) {
        if (droppable[v.idx()]) output += clone_seconds(v);
      }
    }
    chain.blocks[b].seconds = inner + output;
    chain.blocks[b].output_seconds = output;
  }
  // through_seconds: the same walk from c_b's values alone.
  std::fill(visited.begin(), visited.end(), false);
  for (size_t b = 0; b < n; ++b) {
    for (ValueId v : chain.candidates[b].values)
      chain.blocks[b].through_seconds += clone_seconds(v);
  }
  return chain;
}

std::vector<ValueId> chain_keep(const GraphChain& chain, const std::vector<BlockMode>& modes) {
  std::vector<ValueId> keep;
  for (size_t b = 0; b < modes.size(); ++b) {
    if (modes[b] == BlockMode::stored) {
      keep.insert(keep.end(), chain.block_values[b].begin(), chain.block_values[b].end());
    } else if (modes[b] == BlockMode::checkpointed) {
      keep.insert(keep.end(), chain.candidates[b].values.begin(), chain.candidates[b].values.end());
    }
  }
  return keep;
}

TrialSet::TrialSet(const Graph& graph, std::vector<Cut> candidates, const ArenaOf& arena_of,
                   const NodeSeconds& seconds, bool mirror)
    : graph_(graph),
      candidates_(std::move(candidates)),
      arena_of_(arena_of),
      seconds_(seconds),
      mirror_(mirror) {
  forward_seconds_ = graph_seconds(graph, seconds, true);
}

Result<const PlannedTrial*> TrialSet::plan(std::vector<ValueId> keep, bool plain) {
  NestedCheckpoints nested;
  nested.keep = std::move(keep);
  return plan_trial(std::move(nested), plain);
}

Result<const PlannedTrial*> TrialSet::plan(const NestedCheckpoints& nested) {
  return plan_trial(nested, false);
}

Result<const PlannedTrial*> TrialSet::plan_trial(NestedCheckpoints nested, bool plain) {
  auto sorted = [](std::vector<ValueId> values) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
  };
  // The plain graph is told apart from every checkpoint set by an invalid id.
  std::vector<ValueId> key = plain ? std::vector<ValueId>{ValueId()} : sorted(nested.keep);
  for (const std::vector<ValueId>& level : nested.levels) {
    key.push_back(ValueId());
    const std::vector<ValueId> values = sorted(level);
    key.insert(key.end(), values.begin(), values.end());
  }
  for (const auto& [k, trial] : trials_) {
    if (k == key) return &trial;
  }
  PlannedTrial trial{RecomputedGraph{graph_, {candidates_.size(), 0, 0}}, 0, 0};
  if (!plain || mirror_) {
    RecomputeOptions options;
    options.mirror = mirror_;
    // With mirror, the plain graph is mirror alone (every other value kept).
    options.keep_others = plain;
    if (!plain) {
      options.keep = sorted(nested.keep);
      options.levels = std::move(nested.levels);
      options.segment_ends = std::move(nested.segment_ends);
      trial.result.summary.checkpoints = kept_cuts(candidates_, options);
      trial.result.summary.levels = options.levels.size();
    }
    RecomputeStats stats;
    MEMFIT_RETURN_IF_ERROR(recompute(trial.result.graph, options, &stats).status());
    trial.result.summary.recomputed_nodes = stats.recomputed_nodes;
    if (stats.recomputed_nodes > 0) {
      trial.recompute_seconds =
          std::max(0.0, graph_seconds(trial.result.graph, seconds_, true) - forward_seconds_);
    }
  }
  MEMFIT_ASSIGN_OR_RETURN(trial.arena, arena_of_(trial.result.graph));
  trials_.emplace_back(std::move(key), std::move(trial));
  return &trials_.back().second;
}

Result<RecomputedGraph> TrialSet::best(size_t target) {
  MEMFIT_CHECK(!trials_.empty());
  auto better = [&](const PlannedTrial& a, const PlannedTrial& b) {
    const bool a_fits = target > 0 && a.arena <= target;
    const bool b_fits = target > 0 && b.arena <= target;
    if (a_fits != b_fits) return a_fits;
    if (a_fits && a.recompute_seconds != b.recompute_seconds) {
      return a.recompute_seconds < b.recompute_seconds;
    }
    if (a.arena != b.arena) return a.arena < b.arena;
    return a.recompute_seconds < b.recompute_seconds;
  };
  size_t best = 0;
  for (size_t t = 1; t < trials_.size(); ++t) {
    if (better(trials_[t].second, trials_[best].second)) best = t;
  }
  return trials_[best].second.result;
}

Result<RecomputedGraph> apply_optimal(Graph graph, size_t memory_budget, const ArenaOf& arena_of,
                                      const NodeSeconds& seconds, bool mirror) {
  const GraphChain chain = graph_chain(graph, seconds, mirror);
  // The baselines are exactly sqrt's and greedy's checkpoint sets, over every
  // candidate (with mirror, the chain may have fewer).
  const std::vector<Cut> candidates = checkpoint_candidates(graph);
  TrialSet trials(graph, candidates, arena_of, seconds, mirror);
  MEMFIT_ASSIGN_OR_RETURN(const PlannedTrial* plain, trials.plan({}, true));
  MEMFIT_ASSIGN_OR_RETURN(const PlannedTrial* sqrt, trials.plan(sqrt_checkpoints(candidates)));
  MEMFIT_RETURN_IF_ERROR(trials.plan(cut_values(candidates)).status());
  const size_t target = memory_budget > 0 ? memory_budget : sqrt->arena;
  if (plain->arena <= target) return trials.best(target);

  // Stage 6's bisection over the DP's budget, in bytes: the single-level DP
  // over the chain in units of budget / kUnits, the multi-level one over the
  // chain merged into at most kRotorBlocks groups in units of budget /
  // kRotorUnits; the schedule of fewer predicted seconds is planned.
  constexpr size_t kUnits = 1024, kRotorUnits = 256;
  const CoarseChain coarse = coarsen_chain(chain.blocks, kRotorBlocks);
  auto scaled = [](std::vector<ChainBlock> blocks, size_t unit) {
    for (ChainBlock& b : blocks) {
      b.output = (b.output + unit - 1) / unit;
      b.saved = (b.saved + unit - 1) / unit;
    }
    return blocks;
  };
  const std::vector<BlockMode> all_stored(chain.blocks.size(), BlockMode::stored);
  size_t lo = 0, hi = evaluate_chain(chain.blocks, all_stored)->peak;
  for (int round = 0; round < 12 && lo + 1 < hi; ++round) {
    const size_t mid = lo + (hi - lo) / 2;
    const size_t unit = std::max<size_t>(1, (mid + kUnits - 1) / kUnits);
    const size_t rotor_unit = std::max<size_t>(1, (mid + kRotorUnits - 1) / kRotorUnits);
    const auto single = solve_chain(scaled(chain.blocks, unit), mid / unit);
    const auto multi = solve_levels(scaled(coarse.blocks, rotor_unit), mid / rotor_unit);
    if (!single && !multi) {
      lo = mid;
      continue;
    }
    const bool nested = multi && (!single || multi->seconds < single->seconds);
    MEMFIT_ASSIGN_OR_RETURN(const PlannedTrial* trial,
                            nested
                                ? trials.plan(levels_keep(chain, expand_schedule(coarse, *multi)))
                                : trials.plan(chain_keep(chain, single->modes)));
    (trial->arena <= target ? lo : hi) = mid;
  }
  MEMFIT_ASSIGN_OR_RETURN(RecomputedGraph best, trials.best(target));
  MEMFIT_ASSIGN_OR_RETURN(const size_t best_arena, arena_of(best.graph));
  if (best_arena <= target) return best;
  // Nothing fits: the DP's model (multi-value cuts of recurrent graphs) can
  // miss a plan of Chen's greedy search, so that search is the fallback.
  MEMFIT_ASSIGN_OR_RETURN(RecomputedGraph greedy,
                          apply_recompute(graph, Recompute::budget, target, arena_of, mirror));
  MEMFIT_ASSIGN_OR_RETURN(const size_t greedy_arena, arena_of(greedy.graph));
  return greedy_arena < best_arena ? greedy : best;
}

}  // namespace memfit
