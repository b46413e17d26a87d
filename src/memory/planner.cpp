// The planner: liveness and in-place reuse (liveness.cpp), offsets from the
// better of two heap algorithms (heap.cpp), and the plan's statistics.
#include "memory/planner.h"

#include <algorithm>

#include "core/check.h"
#include "memfit/bytes.h"
#include "memory/heap.h"
#include "memory/liveness.h"

namespace memfit {
namespace {

size_t& role_bucket(BytesByRole& bytes, Role role) {
  switch (role) {
    case Role::parameter:
      return bytes.parameters;
    case Role::gradient:
      return bytes.gradients;
    case Role::optimizer_state:
    case Role::state:
      return bytes.optimizer_state;
    case Role::input:
    case Role::label:
    case Role::activation:
    case Role::temporary:
      return bytes.activations;
  }
  MEMFIT_CHECK(false);
  return bytes.activations;
}

// The largest sum of live buffer bytes over the steps, and the first step where it is reached.
std::pair<size_t, int32_t> live_peak(const std::vector<PlanBuffer>& buffers, int32_t steps) {
  // delta[t + 1]: change of live bytes at step t, for t in [-1, steps].
  std::vector<int64_t> delta(static_cast<size_t>(steps) + 3, 0);
  for (const PlanBuffer& b : buffers) {
    delta[static_cast<size_t>(b.live.def + 1)] += static_cast<int64_t>(b.bytes);
    delta[static_cast<size_t>(b.live.last + 2)] -= static_cast<int64_t>(b.bytes);
  }
  int64_t live = 0, peak = 0;
  int32_t peak_step = -1;
  for (int32_t t = -1; t <= steps; ++t) {
    live += delta[static_cast<size_t>(t + 1)];
    if (live > peak) {
      peak = live;
      peak_step = t;
    }
  }
  return {static_cast<size_t>(peak), peak_step};
}

// What the live device buffers at `step` hold, by role: each buffer counted once, as
// the value of its chain defined last at or before the step.
BytesByRole roles_at(const Graph& graph, const Liveness& liveness, int32_t step) {
  std::vector<int32_t> holder(liveness.buffers.size(), -1);
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const Interval live = liveness.value_live[v];
    if (live.def > step || live.last < step) continue;
    holder[static_cast<size_t>(liveness.value_buffer[v])] = static_cast<int32_t>(v);
  }
  BytesByRole bytes;
  for (size_t b = 0; b < liveness.buffers.size(); ++b) {
    if (holder[b] >= 0 && liveness.buffers[b].pool == Pool::device) {
      role_bucket(bytes, graph.values()[static_cast<size_t>(holder[b])].role) += liveness.buffers[b].bytes;
    }
  }
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const int32_t b = liveness.workspace_buffer[n];
    if (b >= 0 && static_cast<int32_t>(n) == step) bytes.workspace += liveness.buffers[static_cast<size_t>(b)].bytes;
  }
  return bytes;
}

std::string human(size_t bytes) { return std::to_string(bytes) + " bytes"; }

// Offsets for the buffers of one pool (indices `of` into `buffers`), by the
// better of the heap algorithms, or one slice each without sharing.
Placement place_pool(const std::vector<PlanBuffer>& all, const std::vector<size_t>& of,
                     bool share) {
  std::vector<PlanBuffer> buffers;
  for (size_t b : of) buffers.push_back(all[b]);
  if (!share) return place_without_sharing(buffers);
  Placement placement = place_by_time(buffers);
  if (greedy_by_size_work(buffers) <= kMaxGreedyWork) {
    Placement by_size = place_greedy_by_size(buffers);
    if (by_size.arena_bytes <= placement.arena_bytes) placement = std::move(by_size);
  }
  return placement;
}

}  // namespace

StateBand make_state_band(const std::vector<std::pair<std::string, size_t>>& states) {
  StateBand band;
  for (const auto& [name, bytes] : states) {
    if (!band.offsets.emplace(name, band.bytes).second) continue;
    band.bytes += align_up(bytes);
  }
  return band;
}

PlanSizes plain_sizes(const Graph& graph) {
  PlanSizes sizes;
  for (const Value& v : graph.values()) sizes.value_bytes.push_back(v.bytes());
  sizes.workspace_bytes.assign(graph.num_nodes(), 0);
  return sizes;
}

namespace {

// Every byte count of a plan (arena, host pool, offsets, the no-sharing sum)
// is at most the sum of all slices and the band: below 2^62, none wraps.
constexpr size_t kMaxPlanBytes = size_t{1} << 62;

Status check_total_bytes(const PlanSizes& sizes, const PlanOptions& options) {
  unsigned __int128 total = options.band.bytes;
  for (size_t bytes : sizes.value_bytes) total += align_up(bytes);
  for (size_t bytes : sizes.workspace_bytes) total += align_up(bytes);
  if (total < kMaxPlanBytes) return Status::ok();
  return Status::error("the step's values and workspaces take " + human_bytes(kMaxPlanBytes) +
                       " or more in all, more than memfit plans; make the model or the batch "
                       "smaller");
}

}  // namespace

Result<MemoryPlan> plan_memory(const Graph& graph, const PlanSizes& sizes, const PlanOptions& options) {
  MEMFIT_RETURN_IF_ERROR(check_total_bytes(sizes, options));
  const Liveness liveness = analyze_liveness(graph, sizes, options);
  // The device arena and the host pool are planned separately, by the same
  // algorithms: a slice's offset is relative to its own pool.
  std::vector<size_t> of_pool[2];
  for (size_t b = 0; b < liveness.buffers.size(); ++b) {
    of_pool[static_cast<size_t>(liveness.buffers[b].pool)].push_back(b);
  }
  // Buffers of the band's values take their slots; the others are placed above it.
  std::vector<int64_t> band_offset(liveness.buffers.size(), -1);
  for (size_t v = 0; v < graph.num_values() && !options.band.offsets.empty(); ++v) {
    const Value& value = graph.values()[v];
    const auto it = options.band.offsets.find(value.name);
    if (value.producer.valid() || it == options.band.offsets.end()) continue;
    const auto b = static_cast<size_t>(liveness.value_buffer[v]);
    if (!is_persistent(value.role) || liveness.buffers[b].pool != Pool::device) {
      return Status::error("state band: '" + value.name + "' is not a persistent device value");
    }
    const size_t end = options.band.bytes;
    if (it->second + liveness.buffers[b].bytes > end) {
      return Status::error("state band: '" + value.name + "' does not fit its slot");
    }
    band_offset[b] = static_cast<int64_t>(it->second);
  }
  std::vector<size_t> above_band;
  for (size_t b : of_pool[0]) {
    if (band_offset[b] < 0) above_band.push_back(b);
  }
  Placement device = place_pool(liveness.buffers, above_band, options.share);
  {
    // Back to one offset per device buffer, in of_pool[0]'s order.
    std::vector<size_t> offsets;
    size_t k = 0;
    for (size_t b : of_pool[0]) {
      offsets.push_back(band_offset[b] >= 0 ? static_cast<size_t>(band_offset[b])
                                            : options.band.bytes + device.offsets[k++]);
    }
    device.offsets = std::move(offsets);
    device.arena_bytes += options.band.bytes;
  }
  const Placement host = place_pool(liveness.buffers, of_pool[1], options.share);
  std::vector<Slice> buffer_slices(liveness.buffers.size());
  for (int p = 0; p < 2; ++p) {
    const Placement& placement = p == 0 ? device : host;
    for (size_t k = 0; k < of_pool[p].size(); ++k) {
      const size_t b = of_pool[p][k];
      buffer_slices[b] = {placement.offsets[k], liveness.buffers[b].bytes, static_cast<Pool>(p)};
    }
  }
  std::vector<PlanBuffer> device_buffers;
  for (size_t b : of_pool[0]) device_buffers.push_back(liveness.buffers[b]);

  MemoryPlan plan;
  plan.value_live = liveness.value_live;
  plan.inplace_of = liveness.inplace_of;
  plan.algorithm = device.algorithm;
  plan.arena_bytes = device.arena_bytes;
  plan.host_bytes = host.arena_bytes;
  for (size_t v = 0; v < graph.num_values(); ++v) {
    plan.value_slices.push_back(buffer_slices[static_cast<size_t>(liveness.value_buffer[v])]);
  }
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    const int32_t b = liveness.workspace_buffer[n];
    plan.workspace_slices.push_back(b < 0 ? Slice{} : buffer_slices[static_cast<size_t>(b)]);
  }
  for (size_t v = 0; v < graph.num_values(); ++v) {
    if (plan.value_slices[v].pool == Pool::device) {
      plan.no_sharing_bytes += align_up(sizes.value_bytes[v]);
    }
  }
  for (size_t bytes : sizes.workspace_bytes) plan.no_sharing_bytes += align_up(bytes);
  std::tie(plan.lower_bound_bytes, plan.peak_step) =
      live_peak(device_buffers, static_cast<int32_t>(graph.num_nodes()));
  plan.by_role = roles_at(graph, liveness, plan.peak_step);

  if (options.budget > 0 && plan.arena_bytes > options.budget) {
    return Status::error("the plan needs " + human(plan.arena_bytes) + ", over the budget of " +
                         human(options.budget) + "; the smallest arena this plan reaches is " +
                         human(plan.arena_bytes) + " (lower bound " + human(plan.lower_bound_bytes) + ")");
  }
  return plan;
}

}  // namespace memfit
