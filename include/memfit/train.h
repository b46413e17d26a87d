// Training: options, the report, and the entry point used by `memfit train`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memfit/dist.h"
#include "memfit/ir.h"
#include "memfit/status.h"
#include "memfit/step.h"

namespace memfit {

// One optimizer step as training reports it (TrainOptions::on_step).
struct StepRecord {
  int64_t epoch = 0;  // from 1
  int64_t step = 0;   // optimizer steps done, those before a resume included
  int64_t steps = 0;  // optimizer steps of the whole run (epochs x steps per epoch)
  double loss = 0;    // the mean of this step's micro-batches (over every rank)
  double examples_per_second = 0;  // this step's examples (every rank's) over its time
};

// A trained model's tensor after the run (TrainOptions::keep_trained):
// a parameter, or model state that is not trained but updated (batch
// norm's running statistics), plain row-major.
struct TrainedTensor {
  std::string name;  // the model's name: the zoo's, or the ONNX file's initializer
  Shape shape;
  std::vector<float> data;
  bool parameter = true;  // false: model state
};

// A training run: one step (the same StepSpec `memfit plan` plans) and the
// loop around it.
struct TrainOptions {
  StepSpec step;
  int64_t epochs = 2;
  int64_t stop_after = 0;   // stop after this epoch, as if interrupted (the schedule
                            // still spans `epochs`); 0: run to the end
  Schedule schedule = Schedule::cosine;
  int64_t warmup_steps = 0;  // optimizer steps whose learning rate rises linearly to lr
  float min_lr = 0;          // the floor cosine and linear decay end at (<= the learning rate)
  uint64_t seed = 1;
  bool synthetic = false;   // a synthetic data set made for the model, not Fashion-MNIST
  // --data: a directory of Fashion-MNIST's files (empty: Debian's
  // /usr/share/datasets/fashion-mnist), or a file of the model's inputs as
  // numpy arrays (.npz of arrays named as the inputs, or .npy).
  std::string data_path;
  std::string val_data_path;  // --val-data: validation arrays for --data FILE; empty: none
  // --tokens: a flat file of token ids (token_bytes each, little-endian); each
  // example is a window of seq_len + 1 of them at a seeded random offset.
  std::string tokens_path;
  std::string val_tokens_path;  // --val-tokens: validation token file; empty: none
  int64_t token_bytes = 2;      // 2: uint16 ids, 4: uint32
  std::string save_path;    // checkpoint written after every epoch; empty: none
  std::string resume_path;  // checkpoint to continue from; empty: start afresh
  std::string save_onnx_path;  // the ONNX model (step.model.onnx) with the trained weights,
                               // written at the end of the run; empty: none
  bool poison = false;      // fill memory with NaN as soon as its value dies
  int64_t limit = 0;        // Fashion-MNIST: use only the first `limit` training and test
                            // examples (0: all); synthetic: training examples (0: 1024)
  int64_t log_every = 100;  // optimizer steps between progress lines
  bool profile = false;     // log the mean step's time by phase and op kind at the end
                            // (the steps that update the parameters, the first left out)
  std::string trace_path;   // write the last such step as a Chrome trace here; empty: none
  // Asked after every optimizer step (null: never): true ends the run there,
  // with a checkpoint of that position when save_path is set, which --resume
  // continues from the next step (`memfit train` asks whether SIGINT or
  // SIGTERM came).
  std::function<bool()> stop_requested;
  // Called after every optimizer step (null: never), on rank 0 only.
  std::function<void(const StepRecord&)> on_step;
  // Copy the trained parameters and model state into TrainReport::trained
  // at the end of the run (or where stop_requested ended it).
  bool keep_trained = false;

  // Data parallelism: the ranks of the run (not owned); null: one process.
  // Each rank runs step.model.batch rows of every micro-batch of
  // ranks * batch examples, the micro-batch one process would read with that
  // batch: rank r its rows r * batch .. (r + 1) * batch. Gradients, losses
  // and evaluation counts are summed over the ranks; rank 0 alone logs and
  // writes checkpoints, and its state (initial or resumed) is every rank's.
  // step.ranks must be 1 (then it is set to comm->size()) or comm->size().
  Communicator* comm = nullptr;
  // After every optimizer step, compare a hash of each rank's state with rank
  // 0's; a difference ends the run with an error naming the rank.
  bool check_replicas = false;
};

struct TrainReport {
  std::vector<float> losses;  // the loss of every micro-batch, in order, this run only
  std::vector<double> test_accuracy;  // after each epoch run
  std::vector<double> test_loss;      // after each epoch run: the mean loss of the test batches
  double examples_per_second = 0;     // training examples over training time
  size_t arena_bytes = 0;             // the planned arena of a training step
  size_t high_water_bytes = 0;        // the most arena bytes a step touched (measured)
  int64_t optimizer_steps = 0;        // total, including those before a resume
  int64_t ranks = 1;                  // data-parallel ranks of the run (mpirun -np)
  bool stopped = false;               // stop_requested ended the run before its end
  std::vector<TrainedTensor> trained;  // with keep_trained (rank 0): in the model's order
};

// Trains on Fashion-MNIST or synthetic data; `log` receives progress lines.
Result<TrainReport> train(const TrainOptions& options,
                          const std::function<void(const std::string&)>& log);

// A trained model on a set of examples (`memfit evaluate`).
struct EvaluationReport {
  double loss = 0;      // the mean loss of the batches
  double accuracy = 0;  // the fraction of label elements whose class the model predicts
  int64_t examples = 0;        // examples evaluated (whole batches of the set)
  bool loss_in_nats = false;   // a cross-entropy, not a squared error
};

// The checkpoint options.resume_path of options.step's model on the
// examples options names: every example of --data FILE or the windows of
// --tokens FILE (--limit of them), or the test set of Fashion-MNIST or of
// synthetic data; in batches of the model's batch (or the largest divisor
// of it whose plan fits --budget). `log` receives what is evaluated.
Result<EvaluationReport> evaluate(const TrainOptions& options,
                                  const std::function<void(const std::string&)>& log);

// The report as `memfit train --json` prints it: one JSON object with the
// run's model, batch and settings, and the report's fields but `trained`.
std::string train_report_json(const TrainOptions& options, const TrainReport& report);

}  // namespace memfit
