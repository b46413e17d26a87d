#include "train/run_outputs.h"

#include <utility>
#include <vector>

#include "onnx/model_source.h"
#include "runtime/step_profile.h"

namespace memfit {

std::vector<TrainedTensor> trained_tensors(const TrainingProgram& program, StateStore& state) {
  const Model& model = program.model();
  std::vector<TrainedTensor> trained;
  for (const auto& [name, shape] : program.state_shapes()) {
    if (!model.init.contains(name)) continue;  // optimizer state
    trained.push_back({name, shape, std::move(state[name]), !program.is_model_state(name)});
  }
  return trained;
}

Status write_run_outputs(const TrainOptions& options, Trainer& trainer, const LogFn& log,
                         TrainReport& report) {
  const bool lead = trainer.ranks().lead();
  if (!options.trace_path.empty() && lead) {
    MEMFIT_RETURN_IF_ERROR(
        write_chrome_trace(trainer.program().step_executable(), options.trace_path));
    log("trace of the last step written to " + options.trace_path);
  }
  if (options.save_onnx_path.empty() && !options.keep_trained) return Status::ok();
  MEMFIT_ASSIGN_OR_RETURN(StateStore state, trainer.state());  // every rank: shards are gathered
  if (lead && !options.save_onnx_path.empty()) {
    MEMFIT_RETURN_IF_ERROR(
        save_trained_onnx(options.step.model, state.tensors(), options.save_onnx_path));
    log("saved the trained model to " + options.save_onnx_path);
  }
  if (lead && options.keep_trained) report.trained = trained_tensors(trainer.program(), state);
  return Status::ok();
}

}  // namespace memfit
