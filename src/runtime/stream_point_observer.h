// Off the host, a comm node's collective must not read its bucket before the
// kernels that fill it have run, and a kernel's launch returns before it runs.
// After each comm node's kernel a stream point is recorded on the compute
// stream, and the communication thread waits for it while the host goes on
// issuing kernels. Without a point (a device without them, or a record that
// failed) the host waits for the device there instead. On the host a kernel
// has run when its launch returns: the executor installs none.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "memfit/ir.h"
#include "runtime/device.h"
#include "runtime/step_observer.h"

namespace memfit {

class StreamPointObserver final : public StepObserver {
 public:
  // One point per comm node of `graph`, made once and recorded again on
  // every step; `device` (not owned) is the one its kernels run on.
  static Result<std::unique_ptr<StreamPointObserver>> make(const Graph& graph,
                                                           const Device& device);

  void after_kernel(size_t n, Status& failed) override;
  // On the communication thread.
  Status before_collective(size_t n) override;

 private:
  explicit StreamPointObserver(const Device& device) : device_(device) {}

  const Device& device_;
  std::unique_ptr<StreamPoints> points_;  // null where the device has none
  std::vector<int64_t> point_of_;         // per node: its point, -1 if not a comm node
  // Per node: its point was recorded in this step. Written before its
  // collective is issued, read by the communication thread.
  std::vector<char> recorded_;
};

}  // namespace memfit
