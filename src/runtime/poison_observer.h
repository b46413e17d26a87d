// Poison mode: every range is filled with NaN when its value dies (after its
// last reader, unless a value written in place over it lives on in the same
// bytes) and every workspace after its node, so that a plan that lets a
// tensor be read after its bytes were reused fails loudly. Made once the
// arena and the host pool exist, which it fills with NaN first.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "memory/memory_plan.h"
#include "runtime/device.h"
#include "runtime/step_observer.h"

namespace memfit {

class PoisonObserver final : public StepObserver {
 public:
  // Poisons the arena from `arena_from` on (the bytes below it hold state of
  // another executable that shares the arena) and the whole host pool.
  // `device`, `arena`, `host` and `copies` (null without copy nodes) are not
  // owned.
  static Result<std::unique_ptr<PoisonObserver>> make(const Graph& graph, const MemoryPlan& plan,
                                                      const Device& device, std::byte* arena,
                                                      std::byte* host, SwapStream* copies,
                                                      size_t arena_from);

  void after_node(size_t n, Status& failed) override;

 private:
  PoisonObserver(const Device& device, std::byte* arena, std::byte* host, SwapStream* copies)
      : device_(device), arena_(arena), host_(host), copies_(copies) {}
  std::byte* at(const Slice& slice) const {
    return (slice.pool == Pool::host ? host_ : arena_) + slice.offset;
  }
  Status poison(const Slice& slice) const;

  const Device& device_;
  std::byte* arena_;
  std::byte* host_;
  SwapStream* copies_;
  std::vector<bool> copy_nodes_;                // per node: to_host or to_device
  std::vector<std::vector<Slice>> dead_after_;  // per node: slices whose values die there
};

}  // namespace memfit
