#include "runtime/step_profile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>

#include "core/check.h"
#include "core/output_path.h"
#include "core/text.h"
#include "ir/phase.h"
#include "ops/op_table.h"

namespace memfit {
namespace {

bool is_copy(const Node& node) { return op_info(node.op).copy; }

// The phase row of each node: 0 forward, 1 backward, 2 update, 3 recompute,
// 4 swap copies. A forward node is a recomputation when none of its outputs
// reaches, through forward nodes, a graph output or a state update: it only
// serves the backward pass (the model's own forward nodes all lead to the
// loss or to a state update; dead nodes are gone).
std::vector<int> node_phase_rows(const Graph& graph) {
  std::vector<bool> reaches(graph.num_values(), false);
  for (ValueId v : graph.outputs()) reaches[v.idx()] = true;
  for (const StateUpdate& u : graph.updates()) reaches[u.next.idx()] = true;
  std::vector<int> rows(graph.num_nodes());
  for (size_t n = graph.num_nodes(); n-- > 0;) {
    const Node& node = graph.nodes()[n];
    if (is_copy(node)) {
      rows[n] = 4;
      continue;
    }
    switch (node_phase(graph, node)) {
      case Phase::forward: {
        const bool original = std::any_of(node.outputs.begin(), node.outputs.end(),
                                          [&](ValueId v) { return reaches[v.idx()]; });
        rows[n] = original ? 0 : 3;
        if (original) {
          for (ValueId v : node.inputs) reaches[v.idx()] = true;
        }
        break;
      }
      case Phase::backward:
        rows[n] = 1;
        break;
      case Phase::update:
        rows[n] = 2;
        break;
    }
  }
  return rows;
}

const char* const kPhaseRows[] = {"forward", "backward", "update", "recompute", "swap copies"};

std::string phase_label(int row) { return kPhaseRows[row]; }

}  // namespace

StepProfile profile_runs(const Executable& exe) {
  const RunTotals& totals = exe.totals();
  MEMFIT_CHECK(totals.runs > 0);
  const Graph& graph = exe.graph();
  const double runs = static_cast<double>(totals.runs);
  StepProfile profile;
  profile.steps = totals.runs;
  profile.step_seconds = totals.seconds / runs;

  const std::vector<int> rows = node_phase_rows(graph);
  std::vector<ProfileRow> phases(5);
  for (int r = 0; r < 5; ++r) phases[static_cast<size_t>(r)].name = phase_label(r);
  std::map<std::string, ProfileRow> ops;
  std::map<std::string, std::set<std::string>> op_backends;
  double compute = 0;
  ProfileRow waits{"copy waits", 0, totals.copy_wait_seconds / runs, ""};
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.nodes()[n];
    const double seconds = exe.node_seconds()[n] / runs;
    if (node.op == OpKind::swap_wait) {
      // A stream's wait for a swap-out's copy: on a GPU its span on the
      // kernel clock is the time compute stood still (on the host the
      // executor waits before it, counted above, and it takes no time).
      ++waits.nodes;
      waits.seconds += seconds;
      continue;
    }
    ProfileRow& phase = phases[static_cast<size_t>(rows[n])];
    ++phase.nodes;
    phase.seconds += seconds;
    if (is_copy(node)) continue;
    compute += seconds;
    const std::string name(op_name(node.op));
    ProfileRow& op = ops[name];
    op.name = name;
    ++op.nodes;
    op.seconds += seconds;
    op_backends[name].insert(exe.node_backends()[n]);
  }
  const double state = totals.io_seconds / runs;
  phases.push_back(waits);
  phases.push_back(ProfileRow{"data in/out", 0, state, ""});
  phases.push_back(ProfileRow{
      "executor", 0, std::max(0.0, profile.step_seconds - compute - waits.seconds - state), ""});
  profile.by_phase = std::move(phases);

  for (auto& [name, row] : ops) {
    for (const std::string& backend : op_backends[name]) {
      row.backends += (row.backends.empty() ? "" : ", ") + backend;
    }
    profile.by_op.push_back(row);
  }
  std::stable_sort(profile.by_op.begin(), profile.by_op.end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.seconds > b.seconds; });
  return profile;
}

std::string format_profile(const StepProfile& profile) {
  const double step = profile.step_seconds;
  auto share = [step](double seconds) { return step > 0 ? 100.0 * seconds / step : 0.0; };
  std::string out = format("profile: %.4f s per step (mean of %lld steps)\n", step,
                           static_cast<long long>(profile.steps));
  out += format("  %-22s %6s %12s %7s\n", "phase", "nodes", "ms/step", "share");
  for (const ProfileRow& row : profile.by_phase) {
    const std::string nodes = row.nodes > 0 ? std::to_string(row.nodes) : "";
    out += format("  %-22s %6s %12.3f %6.1f%%\n", row.name.c_str(), nodes.c_str(),
                  1e3 * row.seconds, share(row.seconds));
  }
  out += "  (swap copies run on the copy stream beside compute; copy waits are the part\n"
         "   compute waited for)\n";
  out += format("  %-22s %6s %12s %7s  %s\n", "op kind", "nodes", "ms/step", "share", "backend");
  for (const ProfileRow& row : profile.by_op) {
    out += format("  %-22s %6lld %12.3f %6.1f%%  %s\n", row.name.c_str(),
                  static_cast<long long>(row.nodes), 1e3 * row.seconds, share(row.seconds),
                  row.backends.c_str());
  }
  return out;
}

std::string chrome_trace_json(const Executable& exe) {
  const Graph& graph = exe.graph();
  const StepTimeline& step = exe.last_step();
  MEMFIT_CHECK(step.nodes.size() == graph.num_nodes());
  const std::vector<int> rows = node_phase_rows(graph);
  constexpr int kCompute = 1, kCopy = 2;
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  auto lane_name = [&](int tid, const char* name) {
    out += format(
        "{\"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"name\": \"thread_name\", "
        "\"args\": {\"name\": \"%s\"}},\n",
        tid, name);
  };
  lane_name(kCompute, "compute");
  lane_name(kCopy, "copy engine");
  auto event = [&](int tid, const std::string& name, const std::string& category, const Span& span,
                   const std::string& args) {
    out += format("{\"ph\": \"X\", \"pid\": 1, \"tid\": %d, \"name\": %s, \"cat\": %s, "
                  "\"ts\": %.3f, \"dur\": %.3f, \"args\": {%s}},\n",
                  tid, json_string(name).c_str(), json_string(category).c_str(), 1e6 * span.start,
                  1e6 * (span.end - span.start), args.c_str());
  };
  event(kCompute, "data in", "data in/out", step.data_in, "");
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const Node& node = graph.nodes()[n];
    const std::string op(op_name(node.op));
    const std::string args = "\"op\": " + json_string(op) +
                             ", \"phase\": " + json_string(phase_label(rows[n])) +
                             ", \"backend\": " + json_string(exe.node_backends()[n]);
    event(is_copy(node) ? kCopy : kCompute, node.name, op, step.nodes[n], args);
  }
  event(kCompute, "data out", "data in/out", step.data_out, "");
  // The last event ends the list: JSON allows no trailing comma.
  out.resize(out.size() - 2);
  out += "\n]}\n";
  return out;
}

Status write_chrome_trace(const Executable& exe, const std::string& path) {
  MEMFIT_RETURN_IF_ERROR(check_writable_kind(path, "--trace"));
  errno = 0;
  std::ofstream file(path);
  if (!file) {
    return Status::error("cannot write the trace to '" + path + "': " + std::strerror(errno));
  }
  file << chrome_trace_json(exe);
  file.close();
  if (!file) {
    return Status::error("writing the trace to '" + path + "' failed: " +
                         (errno != 0 ? std::strerror(errno) : "write error"));
  }
  return Status::ok();
}

}  // namespace memfit
