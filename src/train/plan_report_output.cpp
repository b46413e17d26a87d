// The forms of a plan report: the table `memfit plan` prints, its JSON, and
// the timeline as an SVG image. All plain text, written by hand so that the
// library needs no JSON or graphics dependency.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "core/text.h"
#include "memfit/plan.h"
#include "passes/auto_policy.h"

namespace memfit {
namespace {

// Arena over lower bound: 1 means the placement wastes nothing.
double fragmentation(const PlanReport& report) {
  if (report.lower_bound_bytes == 0) return 1.0;
  return static_cast<double>(report.arena_bytes) / static_cast<double>(report.lower_bound_bytes);
}

struct RoleRow {
  const char* name;
  size_t bytes;
};

std::vector<RoleRow> role_rows(const BytesByRole& roles) {
  return {{"parameters", roles.parameters},
          {"gradients", roles.gradients},
          {"optimizer_state", roles.optimizer_state},
          {"activations", roles.activations},
          {"workspace", roles.workspace}};
}

std::string xml_text(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A step of 1, 2 or 5 times a power of ten that cuts `range` into about `ticks` parts.
double nice_step(double range, int ticks) {
  const double raw = range / ticks;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalized = raw / magnitude;
  const double factor = normalized <= 1 ? 1 : normalized <= 2 ? 2 : normalized <= 5 ? 5 : 10;
  return factor * magnitude;
}

// Decimals that show every multiple of `step` exactly enough to tell ticks apart.
int tick_decimals(double step) {
  return std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
}

constexpr double kMiB = 1024.0 * 1024.0;

struct PhaseStyle {
  const char* band;  // background of the phase's steps
  const char* fill;  // the live bytes during the phase
  const char* text;  // its label
};

PhaseStyle phase_style(Phase phase) {
  switch (phase) {
    case Phase::forward:
      return {"#eaf1fa", "#7ba7d9", "#1f5a96"};
    case Phase::backward:
      return {"#fdf0e4", "#f2a766", "#a4520f"};
    case Phase::update:
      return {"#e9f5e7", "#84c281", "#2e7d32"};
  }
  return {"#eeeeee", "#aaaaaa", "#333333"};
}

// Consecutive nodes of one phase: steps [begin, end).
struct PhaseRun {
  size_t begin = 0, end = 0;
  Phase phase = Phase::forward;
};

std::vector<PhaseRun> phase_runs(const std::vector<TimelinePoint>& timeline) {
  std::vector<PhaseRun> runs;
  for (size_t i = 0; i < timeline.size(); ++i) {
    if (runs.empty() || runs.back().phase != timeline[i].phase) {
      runs.push_back({i, i, timeline[i].phase});
    }
    runs.back().end = i + 1;
  }
  return runs;
}

// The plot area of the timeline, in SVG user units, and its scales.
struct Frame {
  static constexpr double kWidth = 960, kHeight = 500;
  static constexpr double kLeft = 80, kRight = 120, kTop = 76, kBottom = 60;
  double steps = 1;    // the x axis spans steps [0, steps]
  double max_mib = 1;  // the y axis spans [0, max_mib]
  double x(double step) const { return kLeft + step / steps * (kWidth - kLeft - kRight); }
  double y(double mib) const { return bottom() - mib / max_mib * (bottom() - kTop); }
  double bottom() const { return kHeight - kBottom; }
  double right() const { return kWidth - kRight; }
};

void svg_phase_bands(const std::vector<PhaseRun>& runs, const Frame& f, std::string& svg) {
  for (const PhaseRun& run : runs) {
    const PhaseStyle style = phase_style(run.phase);
    const double x0 = f.x(static_cast<double>(run.begin)), x1 = f.x(static_cast<double>(run.end));
    svg += format(R"(<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill="%s"/>)"
                  "\n",
                  x0, Frame::kTop, x1 - x0, f.bottom() - Frame::kTop, style.band);
    // The name inside its band where it fits; the legend names every phase anyway.
    const std::string name(phase_name(run.phase));
    if (x1 - x0 > 8.0 * static_cast<double>(name.size())) {
      svg += format(R"(<text x="%.2f" y="%.2f" text-anchor="middle" font-size="13" )"
                    R"(fill="%s">%s</text>)"
                    "\n",
                    (x0 + x1) / 2, Frame::kTop + 16, style.text, name.c_str());
    }
  }
}

void svg_axes(const Frame& f, double y_step, std::string& svg) {
  const int decimals = tick_decimals(y_step);
  for (int i = 0; i * y_step <= f.max_mib * (1 + 1e-9); ++i) {
    const double y = f.y(i * y_step);
    svg += format(R"(<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="#cccccc" )"
                  R"(stroke-width="0.6"/>)"
                  "\n",
                  Frame::kLeft, y, f.right(), y);
    svg += format(R"(<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="#000000"/>)"
                  "\n",
                  Frame::kLeft - 5, y, Frame::kLeft, y);
    svg += format(R"(<text x="%.2f" y="%.2f" text-anchor="end" font-size="12">%.*f</text>)"
                  "\n",
                  Frame::kLeft - 8, y + 4, decimals, i * y_step);
  }
  const double x_step = std::max(1.0, nice_step(f.steps, 10));
  for (int i = 0; i * x_step <= f.steps; ++i) {
    const double x = f.x(i * x_step);
    svg += format(R"(<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="#000000"/>)"
                  "\n",
                  x, f.bottom(), x, f.bottom() + 5);
    svg += format(R"(<text x="%.2f" y="%.2f" text-anchor="middle" font-size="12">%.0f</text>)"
                  "\n",
                  x, f.bottom() + 19, i * x_step);
  }
  svg += format(R"(<path d="M %.2f %.2f V %.2f H %.2f" fill="none" stroke="#000000"/>)"
                "\n",
                Frame::kLeft, Frame::kTop, f.bottom(), f.right());
  svg += format(R"(<text x="%.2f" y="%.2f" text-anchor="middle" font-size="13">)"
                "step (nodes in schedule order)</text>\n",
                (Frame::kLeft + f.right()) / 2, Frame::kHeight - 16);
  const double mid_y = (Frame::kTop + f.bottom()) / 2;
  svg += format(R"(<text x="22" y="%.2f" text-anchor="middle" font-size="13" )"
                R"svg(transform="rotate(-90 22 %.2f)">live memory (MiB)</text>)svg"
                "\n",
                mid_y, mid_y);
}

// The live bytes as a step function, node i over [i, i + 1]: an area in
// each phase's colour under one outline.
void svg_live_bytes(const PlanReport& report, const std::vector<PhaseRun>& runs, const Frame& f,
                    std::string& svg) {
  auto steps = [&](size_t begin, size_t end) {
    std::string points;
    for (size_t i = begin; i < end; ++i) {
      const double y = f.y(static_cast<double>(report.timeline[i].live_bytes) / kMiB);
      const auto step = static_cast<double>(i);
      points += format(" %.2f,%.2f %.2f,%.2f", f.x(step), y, f.x(step + 1), y);
    }
    return points;
  };
  for (const PhaseRun& run : runs) {
    svg +=
        format(R"(<polygon points="%.2f,%.2f)", f.x(static_cast<double>(run.begin)), f.bottom()) +
        steps(run.begin, run.end) +
        format(R"( %.2f,%.2f" fill="%s"/>)"
               "\n",
               f.x(static_cast<double>(run.end)), f.bottom(), phase_style(run.phase).fill);
  }
  if (!report.timeline.empty()) {
    svg += R"(<polyline points=")" + steps(0, report.timeline.size()).substr(1) +
           R"(" fill="none" stroke="#2b2b2b" stroke-width="1.4"/>)" + "\n";
  }
  // A tooltip per node for viewers that show them.
  for (const TimelinePoint& point : report.timeline) {
    svg += format(R"(<rect x="%.2f" y="%.2f" width="%.2f" height="%.2f" fill-opacity="0">)",
                  f.x(point.step), Frame::kTop, f.x(point.step + 1.0) - f.x(point.step),
                  f.bottom() - Frame::kTop);
    svg += format("<title>step %d, %s (%s): ", point.step, xml_text(point.node).c_str(),
                  std::string(phase_name(point.phase)).c_str()) +
           human_bytes(point.live_bytes) + "</title></rect>\n";
  }
}

// A label of two lines in the right margin, centred on height y.
void svg_margin_label(const Frame& f, double y, const char* colour, const std::string& first,
                      const std::string& second, std::string& svg) {
  svg +=
      format(R"(<text x="%.2f" y="%.2f" font-size="12" fill="%s">)", f.right() + 8, y - 3, colour) +
      first + format(R"(<tspan x="%.2f" dy="14">)", f.right() + 8) + second + "</tspan></text>\n";
}

// The arena (dashed) and the lower bound (dotted, its peak marked), labelled
// in the right margin, where no data lies; labels closer than two lines are
// pushed apart (the arena is never below the bound).
void svg_limits(const PlanReport& report, const Frame& f, std::string& svg) {
  const double arena_y = f.y(static_cast<double>(report.arena_bytes) / kMiB);
  const double bound_y = f.y(static_cast<double>(report.lower_bound_bytes) / kMiB);
  svg += format(R"(<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="#333333" )"
                R"(stroke-width="1.2" stroke-dasharray="2 3"/>)"
                "\n",
                Frame::kLeft, bound_y, f.right(), bound_y);
  svg += format(R"(<line x1="%.2f" y1="%.2f" x2="%.2f" y2="%.2f" stroke="#c0392b" )"
                R"(stroke-width="1.8" stroke-dasharray="8 4"/>)"
                "\n",
                Frame::kLeft, arena_y, f.right(), arena_y);
  constexpr double kLabelGap = 32;
  const double push = std::max(0.0, (kLabelGap - (bound_y - arena_y)) / 2);
  svg_margin_label(f, arena_y - push, "#c0392b", "planned arena", human_bytes(report.arena_bytes),
                   svg);
  svg_margin_label(f, bound_y + push, "#333333", "lower bound",
                   human_bytes(report.lower_bound_bytes), svg);
  if (report.peak_step >= 0 && static_cast<size_t>(report.peak_step) < report.timeline.size()) {
    const double x = f.x(report.peak_step + 0.5);
    svg += format(R"(<circle cx="%.2f" cy="%.2f" r="4" fill="#333333"/>)"
                  "\n",
                  x, bound_y);
    svg += format(R"(<text x="%.2f" y="%.2f" text-anchor="middle" font-size="12" )"
                  R"(stroke="#ffffff" stroke-width="3" paint-order="stroke">peak, step %d</text>)"
                  "\n",
                  x, bound_y - 9, report.peak_step);
  }
}

// The title, then a legend of the phases and, at the right, what no sharing
// would need: usually far above the plot, so it is stated instead of drawn.
void svg_title_and_legend(const PlanReport& report, const std::string& title, const Frame& f,
                          std::string& svg) {
  svg += format(R"(<text x="%.2f" y="28" font-size="17" font-weight="bold">)", Frame::kLeft) +
         xml_text(title) + "</text>\n";
  double x = Frame::kLeft;
  for (Phase phase : {Phase::forward, Phase::backward, Phase::update}) {
    const PhaseStyle style = phase_style(phase);
    svg += format(R"(<rect x="%.2f" y="44" width="14" height="14" fill="%s" stroke="%s"/>)"
                  "\n",
                  x, style.fill, style.text);
    svg += format(R"(<text x="%.2f" y="56" font-size="13">%s</text>)"
                  "\n",
                  x + 20, std::string(phase_name(phase)).c_str());
    x += 110;
  }
  svg += format(R"(<text x="%.2f" y="56" text-anchor="end" font-size="12" fill="#555555">)",
                f.right()) +
         "without sharing: " + human_bytes(report.no_sharing_bytes) + "</text>\n";
}

}  // namespace

std::string plan_report_text(const PlanRequest& request, const PlanReport& report) {
  const StepSpec& spec = request.step;
  const Techniques& t = report.techniques;
  std::string out =
      format("memfit plan: %s, batch %lld, accumulate %lld, %s, %s backend (%s, %d threads), "
             "sharing %s\n",
             spec.model.name.c_str(), static_cast<long long>(spec.model.batch),
             static_cast<long long>(spec.accumulate),
             std::string(name_of(spec.optimizer.kind)).c_str(), report.backend.c_str(),
             report.isa.c_str(), report.threads, t.share ? "on" : "off");
  if (report.blocked_values > 0) {
    out += format("  layouts: %zu values in %s (channel-blocked), %zu in %s (weights), %zu reorder "
                  "nodes\n",
                  report.blocked_values, report.layout.c_str(), report.weight_values,
                  report.weight_layout.c_str(), report.reorders);
  }
  auto bytes_line = [&](const char* label, size_t bytes) {
    out += format("  %-20s %12s %14zu bytes\n", label, human_bytes(bytes).c_str(), bytes);
  };
  bytes_line("no sharing", report.no_sharing_bytes);
  bytes_line("planned arena", report.arena_bytes);
  bytes_line("lower bound", report.lower_bound_bytes);
  bytes_line("host pool", report.host_bytes);
  if (spec.budget > 0) bytes_line("budget", spec.budget);
  out += format("  %-20s %12.4f (arena / lower bound)\n", "fragmentation", fragmentation(report));
  if (report.peak_step >= 0 && static_cast<size_t>(report.peak_step) < report.timeline.size()) {
    const TimelinePoint& peak = report.timeline[static_cast<size_t>(report.peak_step)];
    out += format("  at the peak, step %d (%s, %s):\n", peak.step, peak.node.c_str(),
                  std::string(phase_name(peak.phase)).c_str());
  }
  for (const RoleRow& row : role_rows(report.by_role)) {
    const double share = report.lower_bound_bytes == 0
                             ? 0.0
                             : 100.0 * static_cast<double>(row.bytes) /
                                   static_cast<double>(report.lower_bound_bytes);
    out += format("    %-18s %12s %14zu bytes %6.1f%%\n", row.name, human_bytes(row.bytes).c_str(),
                  row.bytes, share);
  }
  out += format("  %-20s %12zu\n", "nodes", report.num_nodes);
  out += format("  %-20s %12s\n", "heap algorithm", report.algorithm.c_str());
  // Under auto, the recompute and swap rows are auto's, named by its plan below.
  out += format("  %-20s %12s\n", "recompute",
                t.automatic
                    ? "by auto"
                    : (std::string(name_of(t.recompute)) + (t.mirror ? "+mirror" : "")).c_str());
  if (t.recompute != Recompute::none || t.mirror) {
    out += format("  %-20s %12zu of %zu candidates\n", "checkpoints", report.checkpoints,
                  report.checkpoint_candidates);
    if (report.checkpoint_levels > 0) {
      out += format("  %-20s %12zu below the kept ones\n", "checkpoint levels",
                    report.checkpoint_levels);
    }
    out += format("  %-20s %12zu\n", "recomputed nodes", report.recomputed_nodes);
  }
  out += format("  %-20s %12s\n", "swap",
                t.automatic ? "by auto" : std::string(name_of(t.swap)).c_str());
  if (t.automatic) {
    out += format("  %-20s %12s  (plan chosen: %s)\n", "policy", "auto", report.auto_choice.c_str());
    out += format(
        "  %-20s %12s\n", "recomputed",
        auto_recomputed_text(report.auto_choice, report.recomputed_values, report.recomputed_nodes)
            .c_str());
  }
  if (t.swap != Swap::none || t.automatic) {
    out += format("  %-20s %12zu of %zu candidates, %s%s\n", "swapped", report.swapped_values,
                  report.swap_candidates, human_bytes(report.swapped_bytes).c_str(),
                  report.swap_waits_in_order ? ", compute waiting for each copy out" : "");
  }
  if (t.swap == Swap::tflms) {
    out += format("  %-20s %s\n", "tflms", tflms_options_text(spec.tflms).c_str());
    out += format("  %-20s %12zu (%zu branch swaps, %zu chain_rule fallbacks)\n", "swap-ins",
                  report.swap_ins, report.branch_swaps, report.trigger_fallbacks);
  }
  out += format("  %-20s %12.6f s  (%s cost model)\n", "predicted step",
                report.predicted_step_seconds, std::string(name_of(t.cost)).c_str());
  out += format("  %-20s %12.6f s\n", "of it, recompute", report.predicted_recompute_seconds);
  if (report.ranks > 1) {
    out += format("  %-20s %12lld (one rank's step; --batch is per rank; --shard %s)\n",
                  "data parallel ranks", static_cast<long long>(report.ranks),
                  std::string(shard_name(spec.shard)).c_str());
    out += format("  %-20s %12zu of at least %g MB, the largest %s; %s summed\n", "gradient buckets",
                  report.buckets, spec.bucket_mb, human_bytes(report.largest_bucket_bytes).c_str(),
                  human_bytes(report.reduced_bytes).c_str());
    out += format("  %-20s %12.6f s  (%s; of it %.6f s not hidden by the backward pass)\n",
                  "predicted all-reduce", report.predicted_comm_seconds,
                  spec.comm_gbps > 0 ? format("--comm-gbps %g", spec.comm_gbps).c_str()
                                     : "network unlimited, predicted as 10 GB/s",
                  report.predicted_exposed_comm_seconds);
  }
  return out;
}

std::string plan_report_json(const PlanRequest& request, const PlanReport& report) {
  const StepSpec& spec = request.step;
  const Techniques& t = report.techniques;
  std::string out = "{\n";
  out += "  \"model\": " + json_string(spec.model.name) + ",\n";
  out += format("  \"batch\": %lld,\n  \"accumulate\": %lld,\n",
                static_cast<long long>(spec.model.batch), static_cast<long long>(spec.accumulate));
  out += "  \"optimizer\": " + json_string(name_of(spec.optimizer.kind)) + ",\n";
  out += "  \"backend\": " + json_string(report.backend) + ",\n";
  out += "  \"isa\": " + json_string(report.isa) + ",\n";
  out += format("  \"threads\": %d,\n", report.threads);
  out += "  \"layout\": " + json_string(report.layout) + ",\n";
  out += format("  \"blocked_values\": %zu,\n", report.blocked_values);
  out += "  \"weight_layout\": " + json_string(report.weight_layout) + ",\n";
  out += format("  \"weight_values\": %zu,\n  \"reorders\": %zu,\n", report.weight_values,
                report.reorders);
  out += format("  \"sharing\": %s,\n  \"budget_bytes\": %zu,\n", t.share ? "true" : "false",
                spec.budget);
  out += format("  \"arena_bytes\": %zu,\n  \"lower_bound_bytes\": %zu,\n", report.arena_bytes,
                report.lower_bound_bytes);
  out += format("  \"host_bytes\": %zu,\n", report.host_bytes);
  out += format("  \"no_sharing_bytes\": %zu,\n  \"fragmentation\": %.6f,\n",
                report.no_sharing_bytes, fragmentation(report));
  out += "  \"by_role\": {";
  const char* separator = "";
  for (const RoleRow& row : role_rows(report.by_role)) {
    out += format("%s\"%s\": %zu", separator, row.name, row.bytes);
    separator = ", ";
  }
  out += "},\n";
  out +=
      format("  \"num_nodes\": %zu,\n  \"peak_step\": %d,\n", report.num_nodes, report.peak_step);
  out += "  \"algorithm\": " + json_string(report.algorithm) + ",\n";
  out += "  \"recompute\": " + json_string(name_of(t.recompute)) + ",\n";
  out += format("  \"mirror\": %s,\n", t.mirror ? "true" : "false");
  out += "  \"swap\": " + json_string(name_of(t.swap)) + ",\n";
  out += "  \"policy\": " + json_string(policy_of(t)) + ",\n";
  out += "  \"auto_choice\": " + json_string(report.auto_choice) + ",\n";
  out += format("  \"recomputed_values\": %zu,\n", report.recomputed_values);
  out += format("  \"link_gbps\": %g,\n  \"swap_candidates\": %zu,\n  \"swapped_values\": %zu,\n",
                spec.link_gbps, report.swap_candidates, report.swapped_values);
  out += format("  \"swapped_bytes\": %zu,\n", report.swapped_bytes);
  out += format("  \"swap_waits_in_order\": %s,\n", report.swap_waits_in_order ? "true" : "false");
  if (t.swap == Swap::tflms) {
    out += "  \"tflms\": " + json_string(tflms_options_text(spec.tflms)) + ",\n";
    out += format("  \"swap_ins\": %zu,\n  \"branch_swaps\": %zu,\n  \"trigger_fallbacks\": %zu,\n",
                  report.swap_ins, report.branch_swaps, report.trigger_fallbacks);
  }
  out += format(
      "  \"checkpoint_candidates\": %zu,\n  \"checkpoints\": %zu,\n  \"checkpoint_levels\": %zu,\n",
      report.checkpoint_candidates, report.checkpoints, report.checkpoint_levels);
  out += format("  \"recomputed_nodes\": %zu,\n", report.recomputed_nodes);
  out += "  \"cost_model\": " + json_string(name_of(t.cost)) + ",\n";
  out += format("  \"predicted_step_seconds\": %.9g,\n  \"predicted_recompute_seconds\": %.9g,\n",
                report.predicted_step_seconds, report.predicted_recompute_seconds);
  out += format("  \"ranks\": %lld,\n  \"bucket_mb\": %g,\n  \"comm_gbps\": %g,\n",
                static_cast<long long>(report.ranks), spec.bucket_mb, spec.comm_gbps);
  out += "  \"shard\": " + json_string(shard_name(spec.shard)) + ",\n";
  out += format("  \"buckets\": %zu,\n  \"reduced_bytes\": %zu,\n  \"largest_bucket_bytes\": %zu,\n",
                report.buckets, report.reduced_bytes, report.largest_bucket_bytes);
  out += format("  \"predicted_comm_seconds\": %.9g,\n  \"predicted_exposed_comm_seconds\": %.9g,\n",
                report.predicted_comm_seconds, report.predicted_exposed_comm_seconds);
  out += "  \"timeline\": [";
  separator = "\n";
  for (const TimelinePoint& point : report.timeline) {
    out += format("%s    {\"step\": %d, \"node\": ", separator, point.step) +
           json_string(point.node) + ", \"phase\": " + json_string(phase_name(point.phase)) +
           format(", \"live_bytes\": %zu}", point.live_bytes);
    separator = ",\n";
  }
  out += report.timeline.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

std::string timeline_svg(const PlanReport& report, const std::string& title) {
  size_t highest = std::max(report.arena_bytes, report.lower_bound_bytes);
  for (const TimelinePoint& point : report.timeline) highest = std::max(highest, point.live_bytes);
  Frame frame;
  frame.steps = static_cast<double>(std::max<size_t>(report.timeline.size(), 1));
  // Head room above the arena line for its label.
  const double top_mib = std::max(static_cast<double>(highest) / kMiB * 1.12, 1e-3);
  const double y_step = nice_step(top_mib, 6);
  frame.max_mib = std::ceil(top_mib / y_step) * y_step;

  std::string svg =
      format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" )"
             R"(viewBox="0 0 %.0f %.0f" font-family="DejaVu Sans, Arial, sans-serif">)"
             "\n",
             Frame::kWidth, Frame::kHeight, Frame::kWidth, Frame::kHeight);
  svg += R"(<rect width="100%" height="100%" fill="#ffffff"/>)"
         "\n";
  const std::vector<PhaseRun> runs = phase_runs(report.timeline);
  svg_title_and_legend(report, title, frame, svg);
  svg_phase_bands(runs, frame, svg);
  svg_axes(frame, y_step, svg);
  svg_live_bytes(report, runs, frame, svg);
  svg_limits(report, frame, svg);
  svg += "</svg>\n";
  return svg;
}

}  // namespace memfit
