// The ranks of a training run: what they must agree on, rank 0's state
// shared with the others, and what they find summed or joined.
#include "train/ranks.h"

#include <algorithm>
#include <string>

#include "backends/cuda/nccl_communicator.h"
#include "core/hash.h"

namespace memfit {
namespace {

// FNV-1a over the bytes of the parameters and the optimizer state, in
// checkpoint order (batch-norm running statistics are each rank's own).
Result<uint64_t> state_hash(const TrainingProgram& program) {
  StateStore state;
  MEMFIT_RETURN_IF_ERROR(program.store_state(state));
  uint64_t h = kFnv1aOffset;
  for (const auto& [name, shape] : program.state_shapes()) {
    if (program.is_model_state(name)) continue;
    const std::vector<float>& data = state[name];
    h = fnv1a(data.data(), data.size() * sizeof(float), h);
  }
  return h;
}

// The highest rank whose `mine` is not rank 0's, or -1 when every rank's is.
Result<int> rank_unlike_rank0(Communicator& comm, uint64_t mine) {
  uint64_t first = mine;
  MEMFIT_RETURN_IF_ERROR(comm.broadcast(&first, sizeof first, 0));
  double differing = mine != first ? comm.rank() : -1;
  MEMFIT_RETURN_IF_ERROR(comm.all_reduce_max(&differing, 1));
  return static_cast<int>(differing);
}

}  // namespace

uint64_t settings_hash(const TrainOptions& o, const TrainingProgram& program,
                       const DataSource& data) {
  const OptimizerConfig& opt = o.step.optimizer;
  std::string text = o.step.model.name + '|' + std::to_string(program.step_graph().num_nodes()) +
                     '|' + std::to_string(program.step_executable().plan().arena_bytes);
  for (const auto& [name, shape] : program.state_shapes()) text += '|' + name + shape_string(shape);
  text += '|' + data.description();
  for (const double v :
       {static_cast<double>(o.step.model.batch), static_cast<double>(o.step.accumulate),
        static_cast<double>(data.train_count()), static_cast<double>(data.test_count()),
        static_cast<double>(o.epochs), static_cast<double>(o.stop_after),
        static_cast<double>(o.schedule), static_cast<double>(o.seed), static_cast<double>(opt.kind),
        static_cast<double>(opt.lr), static_cast<double>(opt.momentum),
        static_cast<double>(opt.weight_decay), static_cast<double>(o.check_replicas),
        static_cast<double>(o.log_every)}) {
    text += '|' + std::to_string(v);
  }
  return fnv1a(text.data(), text.size());
}

Result<Ranks> Ranks::join(Communicator* given, BackendKind backend) {
  Ranks ranks;
  if (given == nullptr) {
    ranks.owned_ = make_local_communicator();
    given = ranks.owned_.get();
  }
  ranks.comm_ = given;
  // The cuda backend's gradient buckets are in GPU memory: its ranks sum
  // them with NCCL, which the run's communicator starts.
  if (backend == BackendKind::cuda && given->size() > 1 && !given->sums_gpu_memory()) {
    MEMFIT_ASSIGN_OR_RETURN(ranks.owned_, cuda::make_nccl_communicator(*given));
    ranks.comm_ = ranks.owned_.get();
  }
  return ranks;
}

std::function<void(const std::string&)> Ranks::lead_log(
    const std::function<void(const std::string&)>& log) const {
  if (lead()) return log;
  return [](const std::string&) {};
}

Result<bool> Ranks::any(bool yes) {
  if (size() == 1) return yes;
  double flag = yes ? 1 : 0;
  MEMFIT_RETURN_IF_ERROR(comm_->all_reduce_max(&flag, 1));
  return flag > 0;
}

Result<float> Ranks::mean(float value) {
  if (size() == 1) return value;
  double sum = value;
  MEMFIT_RETURN_IF_ERROR(comm_->all_reduce_sum(&sum, 1));
  return static_cast<float>(sum / static_cast<double>(size()));
}

Status Ranks::sum(double* values, size_t count) {
  if (size() == 1) return Status::ok();
  return comm_->all_reduce_sum(values, count);
}

std::span<const int64_t> Ranks::rows(std::span<const int64_t> order, int64_t micro_batch,
                                     int64_t batch) const {
  return order.subspan(static_cast<size_t>((micro_batch * size() + rank()) * batch),
                       static_cast<size_t>(batch));
}

uint64_t Ranks::dropout_seed(uint64_t seed) const {
  if (lead()) return seed;
  return seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank()));
}

Status Ranks::on_lead(const std::function<Status()>& work, const std::string& failed_on_lead) {
  const Status mine = lead() ? work() : Status::ok();
  MEMFIT_ASSIGN_OR_RETURN(const bool failed, any(!mine.is_ok()));
  if (!mine.is_ok()) return mine;
  if (failed) return Status::error(failed_on_lead);
  return Status::ok();
}

Status Ranks::check_same_settings(const TrainOptions& options, const TrainingProgram& program,
                                  const DataSource& data) {
  if (size() == 1) return Status::ok();
  MEMFIT_ASSIGN_OR_RETURN(const int differing,
                          rank_unlike_rank0(*comm_, settings_hash(options, program, data)));
  if (differing < 0) return Status::ok();
  return Status::error(
      "the ranks were started with different settings (model, step flags, "
      "data, optimizer or run flags; rank " +
      std::to_string(differing) +
      "'s differ from rank 0's): give every rank of mpirun the same command line");
}

Status Ranks::check_replicas(const TrainingProgram& program, int64_t step) {
  if (size() == 1) return Status::ok();
  MEMFIT_ASSIGN_OR_RETURN(const uint64_t mine, state_hash(program));
  MEMFIT_ASSIGN_OR_RETURN(const int differing, rank_unlike_rank0(*comm_, mine));
  if (differing < 0) return Status::ok();
  return Status::error("the parameters or optimizer state of rank " + std::to_string(differing) +
                       " differ from rank 0's after optimizer step " + std::to_string(step) +
                       " (--check-replicas)");
}

Status Ranks::share_state(const TrainingProgram& program, StateStore& state, StepCounters& counters,
                          int64_t& first_epoch) {
  if (size() == 1) return Status::ok();
  int64_t position[3] = {counters.micro_step, counters.optimizer_step, first_epoch};
  MEMFIT_RETURN_IF_ERROR(comm_->broadcast(position, sizeof position, 0));
  counters = StepCounters{position[0], position[1]};
  first_epoch = position[2];
  for (const auto& [name, shape] : program.state_shapes()) {
    std::vector<float>& data = state[name];
    MEMFIT_RETURN_IF_ERROR(comm_->broadcast(data.data(), data.size() * sizeof(float), 0));
  }
  return Status::ok();
}

// Each rank updates its own running statistics from its own rows while it
// trains (as DistributedDataParallel without broadcast_buffers); evaluation
// and checkpoints use rank 0's.
Status Ranks::share_model_state(TrainingProgram& program) {
  if (size() == 1) return Status::ok();
  const auto& shapes = program.state_shapes();
  const bool any = std::any_of(shapes.begin(), shapes.end(), [&](const auto& entry) {
    return program.is_model_state(entry.first);
  });
  if (!any) return Status::ok();  // no batch norm: nothing to copy in and out
  StateStore state;
  MEMFIT_RETURN_IF_ERROR(program.store_state(state));
  for (const auto& [name, shape] : shapes) {
    if (!program.is_model_state(name)) continue;
    std::vector<float>& data = state[name];
    MEMFIT_RETURN_IF_ERROR(comm_->broadcast(data.data(), data.size() * sizeof(float), 0));
  }
  return program.load_state(state);
}

}  // namespace memfit
