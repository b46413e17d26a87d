// What a run leaves at its end besides checkpoints: the Chrome trace of its
// last step, the ONNX model with the trained weights, and the trained
// tensors in the report.
#pragma once

#include <vector>

#include "memfit/train.h"
#include "train/progress.h"
#include "train/trainer.h"

namespace memfit {

// The model's parameters and model state in `state` (moved out of it), by
// the model's own names (not the optimizer's moments), in the order of
// state_shapes.
std::vector<TrainedTensor> trained_tensors(const TrainingProgram& program, StateStore& state);

// --trace, --save-onnx and keep_trained: rank 0 writes the files and fills
// report.trained; every rank takes part in gathering the state.
Status write_run_outputs(const TrainOptions& options, Trainer& trainer, const LogFn& log,
                         TrainReport& report);

}  // namespace memfit
