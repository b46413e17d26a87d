// What the ranks of a data-parallel run must agree on, and rank 0's state
// shared with the others.
#include "train/ranks.h"

#include <algorithm>
#include <string>

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

Result<bool> any_rank(Communicator& comm, bool yes) {
  double flag = yes ? 1 : 0;
  MEMFIT_RETURN_IF_ERROR(comm.all_reduce_max(&flag, 1));
  return flag > 0;
}

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

Status check_same_settings(Communicator& comm, uint64_t mine) {
  MEMFIT_ASSIGN_OR_RETURN(const int differing, rank_unlike_rank0(comm, mine));
  if (differing < 0) return Status::ok();
  return Status::error(
      "the ranks were started with different settings (model, step flags, "
      "data, optimizer or run flags; rank " +
      std::to_string(differing) +
      "'s differ from rank 0's): give every rank of mpirun the same command line");
}

Status check_replicas(const TrainingProgram& program, Communicator& comm, int64_t step) {
  MEMFIT_ASSIGN_OR_RETURN(const uint64_t mine, state_hash(program));
  MEMFIT_ASSIGN_OR_RETURN(const int differing, rank_unlike_rank0(comm, mine));
  if (differing < 0) return Status::ok();
  return Status::error("the parameters or optimizer state of rank " + std::to_string(differing) +
                       " differ from rank 0's after optimizer step " + std::to_string(step) +
                       " (--check-replicas)");
}

// Rank 0's batch-norm running statistics, in every rank's arena: each rank
// updates its own from its own rows while it trains (as DistributedDataParallel
// without broadcast_buffers); evaluation and checkpoints use rank 0's.
Status share_rank0_model_state(Communicator& comm, TrainingProgram& program) {
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
    MEMFIT_RETURN_IF_ERROR(comm.broadcast(data.data(), data.size() * sizeof(float), 0));
  }
  return program.load_state(state);
}

Status share_rank0_state(Communicator& comm, const TrainingProgram& program, StateStore& state,
                         StepCounters& counters, int64_t& first_epoch) {
  int64_t position[3] = {counters.micro_step, counters.optimizer_step, first_epoch};
  MEMFIT_RETURN_IF_ERROR(comm.broadcast(position, sizeof position, 0));
  counters = StepCounters{position[0], position[1]};
  first_epoch = position[2];
  for (const auto& [name, shape] : program.state_shapes()) {
    std::vector<float>& data = state[name];
    MEMFIT_RETURN_IF_ERROR(comm.broadcast(data.data(), data.size() * sizeof(float), 0));
  }
  return Status::ok();
}

}  // namespace memfit
