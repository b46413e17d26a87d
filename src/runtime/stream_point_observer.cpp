#include "runtime/stream_point_observer.h"

#include "ops/op_table.h"

namespace memfit {

Result<std::unique_ptr<StreamPointObserver>> StreamPointObserver::make(const Graph& graph,
                                                                       const Device& device) {
  auto observer = std::unique_ptr<StreamPointObserver>(new StreamPointObserver(device));
  int64_t points = 0;
  for (const Node& node : graph.nodes()) {
    observer->point_of_.push_back(op_info(node.op).comm ? points++ : -1);
  }
  observer->recorded_.assign(graph.num_nodes(), 0);
  MEMFIT_ASSIGN_OR_RETURN(observer->points_, device.stream_points(static_cast<size_t>(points)));
  return observer;
}

void StreamPointObserver::after_kernel(size_t n, Status& failed) {
  if (point_of_[n] < 0) return;
  recorded_[n] = 0;
  if (points_ && failed.is_ok()) {
    failed = points_->record(static_cast<size_t>(point_of_[n]));
    recorded_[n] = failed.is_ok();
  }
  if (!recorded_[n]) {
    const Status waited = device_.synchronize();
    if (failed.is_ok()) failed = waited;
  }
}

Status StreamPointObserver::before_collective(size_t n) {
  if (!recorded_[n]) return Status::ok();
  return points_->wait(static_cast<size_t>(point_of_[n]));
}

}  // namespace memfit
