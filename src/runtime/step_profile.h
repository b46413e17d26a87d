// Where a step's time goes: the kernel seconds an executable measured, by op
// kind and by phase, per step; and one step as a Chrome trace.
//
// Phases: forward, backward and update are node_phase's (src/ir/phase.h);
// "recompute" is the forward nodes whose outputs lead to neither the loss
// (a graph output) nor a state update: recomputed activations; "swap copies" is the copy stream's
// time, which runs beside compute, and "copy waits" the part of it compute waited for (the
// swap_wait nodes among them); "data in/out" is copying the batch into the arena at the start of a
// step and the outputs out at its end (with any update not written in place over its state: none in
// the zoo; the state itself stays in the arena); "executor" is the rest of the step's wall-clock
// time (dispatch, poisoning; on a GPU also the gaps between kernels, such as compute waiting for a
// swap-in's copy).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memfit/status.h"
#include "runtime/executor.h"

namespace memfit {

struct ProfileRow {
  std::string name;      // an op kind or a phase
  int64_t nodes = 0;     // nodes of the step graph counted in it (0 for non-node rows)
  double seconds = 0;    // per step
  std::string backends;  // op kinds: which backends ran its nodes, e.g. "cpu" or "cpu, reference"
};

struct StepProfile {
  int64_t steps = 0;         // runs averaged over
  double step_seconds = 0;   // wall-clock seconds per step
  std::vector<ProfileRow> by_phase;  // in the order of the phases above
  std::vector<ProfileRow> by_op;     // compute nodes by op kind, most seconds first
};

// The mean step of every run of `exe` so far (node_seconds and totals).
// Needs at least one run.
StepProfile profile_runs(const Executable& exe);

// The profile as a table: one line per phase, then one per op kind.
std::string format_profile(const StepProfile& profile);

// The last step of `exe` in the Chrome trace event format (JSON; chrome://tracing
// and Perfetto open it): one lane for compute, with the data copies at its
// ends, and one for the copy engine; each event names its node, op kind,
// phase and backend.
std::string chrome_trace_json(const Executable& exe);
Status write_chrome_trace(const Executable& exe, const std::string& path);

}  // namespace memfit
