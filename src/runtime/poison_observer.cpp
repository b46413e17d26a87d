#include "runtime/poison_observer.h"

#include <algorithm>
#include <limits>

namespace memfit {

Result<std::unique_ptr<PoisonObserver>> PoisonObserver::make(const Graph& graph,
                                                             const MemoryPlan& plan,
                                                             const Device& device, std::byte* arena,
                                                             std::byte* host, SwapStream* copies,
                                                             size_t arena_from) {
  auto observer = std::unique_ptr<PoisonObserver>(new PoisonObserver(device, arena, host, copies));
  // A slice dies after its value's last reader, unless a value written in
  // place over it lives on in the same bytes; values live to the end never die.
  std::vector<bool> continued(graph.num_values(), false);
  for (ValueId over : plan.inplace_of) {
    if (over.valid()) continued[over.idx()] = true;
  }
  std::vector<std::vector<Slice>>& dead_after = observer->dead_after_;
  dead_after.resize(graph.num_nodes());
  const auto end = static_cast<int32_t>(graph.num_nodes());
  for (size_t v = 0; v < graph.num_values(); ++v) {
    const int32_t last = plan.value_live[v].last;
    if (continued[v] || last < 0 || last >= end) continue;
    dead_after[static_cast<size_t>(last)].push_back(plan.value_slices[v]);
  }
  for (size_t n = 0; n < graph.num_nodes(); ++n) {
    if (plan.workspace_slices[n].bytes > 0) dead_after[n].push_back(plan.workspace_slices[n]);
    const OpKind op = graph.nodes()[n].op;
    observer->copy_nodes_.push_back(op == OpKind::to_host || op == OpKind::to_device);
  }
  MEMFIT_RETURN_IF_ERROR(
      observer->poison(Slice{arena_from, plan.arena_bytes - arena_from, Pool::device}));
  MEMFIT_RETURN_IF_ERROR(observer->poison(Slice{0, plan.host_bytes, Pool::host}));
  return observer;
}

Status PoisonObserver::poison(const Slice& slice) const {
  if (slice.pool == Pool::device) return device_.poison(at(slice), slice.bytes);
  // The host pool is host memory on every device.
  std::fill_n(reinterpret_cast<float*>(at(slice)), slice.bytes / sizeof(float),
              std::numeric_limits<float>::quiet_NaN());
  return Status::ok();
}

void PoisonObserver::after_node(size_t n, Status& failed) {
  if (copy_nodes_[n]) {
    // The copy may still read what dies here: poison after it, in stream order.
    for (const Slice& slice : dead_after_[n]) copies_->poison(at(slice), slice.bytes);
    return;
  }
  for (const Slice& slice : dead_after_[n]) {
    // A copy into or out of a host slice may still run (on a GPU the
    // compute stream, not the host, waits for it): after it, in order.
    if (slice.pool == Pool::host && copies_) {
      copies_->poison(at(slice), slice.bytes);
    } else if (failed.is_ok()) {
      failed = poison(slice);
    }
  }
}

}  // namespace memfit
