// The `milp` recomputation strategy: an exact mixed-integer program in the
// spirit of Checkmate (Jain et al. 2020) over which forward values to keep
// and when to recompute the others, for graphs of any shape (long skip
// connections, as in U-Net, which leave the chain strategies nothing to
// cut), solved with CBC (COIN-OR branch and cut) under a time limit.
//
// Input invariants: a verified step graph (the recompute pass's input); at
// most kMilpMaxNodes forward nodes whose outputs the pass may drop.
//
// 1. Variables. The droppable forward nodes i (their outputs are what the
//    recompute pass may drop); the stages t = 1..T, one per non-forward node
//    that reads a droppable value, in graph order; L_i, the last stage that
//    needs i (a backward reader of i, or a droppable node that reads i and
//    is needed later). Binary: k_i (keep i's outputs from the forward pass),
//    R_{t,i} (recompute i in stage t), S_{t,i} (i held at the start of t;
//    S_{1,i} = k_i), for t <= L_i.
// 2. Constraints. A stage's node reads only what is held or recomputed in
//    it: S_{t,i} + R_{t,i} >= 1; a recomputation reads its droppable inputs
//    the same way: R_{t,j} <= R_{t,i} + S_{t,i}; nothing is held that was
//    not held or recomputed in the stage before: S_{t+1,i} <= S_{t,i} +
//    R_{t,i}; single level, as the rewrite pass clones each node once and
//    never a kept one: sum_t R_{t,i} <= 1 - k_i; memory: in every stage the
//    bytes held or recomputed, sum_i bytes_i (S_{t,i} + R_{t,i}), plus the
//    bytes of every other value live at the stage's node in the graph's
//    order (parameters, gradients, state: the same for every choice, but
//    they decide which stage peaks), at most M.
//    Objective: least predicted seconds, sum cost_i R_{t,i}.
// 3. Solve with CBC (Cbc_C_Interface), each solve under its share of the
//    time limit; the solution maps onto the rewrite pass as the
//    checkpoints {outputs of i : k_i = 1}. A solve that finds no feasible
//    solution in time counts as infeasible.
// 4. Search, as `optimal`'s stage 6: the planner's arena is the truth; the
//    target is the memory budget or else sqrt's arena; the plain graph,
//    sqrt's and the all-candidates checkpoint sets are planned, then a
//    bisection over M (at most 6 solves, between the largest stage's other
//    bytes and that plus the bytes of all droppable values) plans each solution; the least
//    predicted recomputation time that fits wins, else the smallest arena.
// Mirror: the mirrored nodes are those the pass mirrors when nothing is
//    kept (mirrored_nodes); they are not items, so no solution keeps their
//    outputs and the pass mirrors the same nodes under every solution. A
//    stage (or a recomputation) that reads a mirrored value reads, through
//    the mirrored chain its per-reader clones recompute, the items that
//    chain reads; the chain's bytes count in that stage's other bytes, and
//    the mirrored values' forward lifetimes in none. The per-reader clones
//    cost the same under every solution, so the objective leaves them out
//    (the trials' predicted seconds include them). Every trial mirrors.
// Guarantees: as the recompute pass's; a graph with more droppable forward
// nodes than kMilpMaxNodes is refused with a message that names the limit.
// Cost: at most 6 CBC solves of O(T * n) binaries and constraints, n the
// droppable nodes, within `time_limit` seconds in all (plus the planning).
#pragma once

#include "cost/cost_model.h"
#include "passes/recompute_strategy.h"

namespace memfit {

inline constexpr size_t kMilpMaxNodes = 120;

// Whether this build has CBC (coinor-libcbc-dev, found by CMake).
bool milp_available();

// With `mirror`, every rewrite mirrors too (stage 1's mirrored nodes).
Result<RecomputedGraph> apply_milp(Graph graph, size_t memory_budget, const ArenaOf& arena_of,
                                   const NodeSeconds& seconds, double time_limit,
                                   bool mirror = false);

}  // namespace memfit
