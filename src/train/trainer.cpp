// The training loop of `memfit train`: data, epochs, accumulation, evaluation,
// checkpoints and progress lines.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "backends/cuda/nccl_communicator.h"
#include "core/output_path.h"
#include "memfit/train.h"
#include "onnx/model_source.h"
#include "runtime/step_profile.h"
#include "train/checkpoint.h"
#include "train/data_source.h"
#include "train/fashion_mnist.h"
#include "train/ranks.h"
#include "train/training_program.h"

namespace memfit {
namespace {

using Clock = std::chrono::steady_clock;

ImageDataset take_first(ImageDataset data, int64_t limit) {
  if (limit <= 0 || limit >= data.count) return data;
  data.count = limit;
  data.images.resize(static_cast<size_t>(limit * data.image_elements()));
  data.labels.resize(static_cast<size_t>(limit));
  return data;
}

std::string format(const char* fmt, auto... args) {
  char line[256];
  std::snprintf(line, sizeof line, fmt, args...);
  return line;
}

// The factor of the learning rate at optimizer step `step` of `total`.
float schedule_scale(Schedule schedule, int64_t step, int64_t total) {
  if (schedule == Schedule::constant) return 1.0f;
  constexpr double kPi = 3.14159265358979323846;
  return static_cast<float>(0.5 * (1.0 + std::cos(kPi * static_cast<double>(step) / static_cast<double>(total))));
}

// The settings of this run that a checkpoint's position depends on.
// The batch is the examples of one micro-batch over all ranks.
RunSettings run_settings(const TrainOptions& options, const DataSource& data) {
  return RunSettings{options.step.model.batch * options.step.ranks,
                     options.step.accumulate,
                     data.train_count(),
                     options.epochs,
                     static_cast<int64_t>(options.schedule),
                     options.seed,
                     data.identity()};
}

// Every rank takes part (store_state gathers sharded state); rank 0 writes it.
Status save_checkpoint_of(const std::string& path, const std::string& model, int64_t epoch,
                          const StepCounters& counters, const RunSettings& run,
                          const TrainingProgram& program, int rank) {
  StateStore state;
  MEMFIT_RETURN_IF_ERROR(program.store_state(state));
  if (rank != 0) return Status::ok();
  Checkpoint ck;
  ck.model = model;
  ck.epoch = epoch;
  ck.micro_step = counters.micro_step;
  ck.optimizer_step = counters.optimizer_step;
  ck.run = run;
  for (const auto& [name, shape] : program.state_shapes()) ck.tensors.push_back({name, shape, state[name]});
  return save_checkpoint(path, ck);
}

// The model's parameters and model state in `state`, by the model's own
// names (not the optimizer's moments), in the order of state_shapes.
std::vector<TrainedTensor> trained_tensors(const TrainingProgram& program, StateStore& state) {
  const Model& model = program.model();
  std::vector<TrainedTensor> trained;
  for (const auto& [name, shape] : program.state_shapes()) {
    if (!model.init.contains(name)) continue;  // optimizer state
    trained.push_back({name, shape, std::move(state[name]), !program.is_model_state(name)});
  }
  return trained;
}

// The fraction of the test set's label elements (images, tokens or voxels)
// whose class the model predicts. The ranks take turns at the batches and
// sum their counts.
Result<double> evaluate(TrainingProgram& program, const DataSource& data, Communicator& comm) {
  const int64_t batch = program.eval_batch();
  const int64_t batches = data.test_count() / batch;
  Batch inputs = Batch::for_model(program.eval_model());
  std::vector<int64_t> examples(static_cast<size_t>(batch));
  int64_t correct = 0, total = 0;
  for (int64_t b = comm.rank(); b < batches; b += comm.size()) {
    for (int64_t i = 0; i < batch; ++i) examples[static_cast<size_t>(i)] = b * batch + i;
    MEMFIT_RETURN_IF_ERROR(data.fill(true, examples, inputs));
    MEMFIT_ASSIGN_OR_RETURN(auto predicted, program.predict(inputs.feeds()));
    const std::vector<int32_t> labels = inputs.label_classes();
    if (predicted.size() != labels.size()) {
      return Status::error("the model predicts " + std::to_string(predicted.size()) +
                           " classes per batch for " + std::to_string(labels.size()) + " labels");
    }
    for (size_t i = 0; i < labels.size(); ++i) correct += predicted[i] == labels[i];
    total += static_cast<int64_t>(labels.size());
  }
  double counts[2] = {static_cast<double>(correct), static_cast<double>(total)};
  MEMFIT_RETURN_IF_ERROR(comm.all_reduce_sum(counts, 2));
  return counts[0] / counts[1];
}

// The first tensor of `state` by name that holds a NaN or an infinity; empty
// when all are finite.
std::string non_finite_tensor(const StateStore& state) {
  std::string first;
  for (const auto& [name, data] : state.tensors()) {
    if (!first.empty() && name >= first) continue;
    if (!std::all_of(data.begin(), data.end(), [](float v) { return std::isfinite(v); }))
      first = name;
  }
  return first;
}

Status check_options(const TrainOptions& o) {
  MEMFIT_RETURN_IF_ERROR(check_step_spec(o.step));
  if (o.epochs < 1) return Status::error("--epochs must be at least 1");
  if (o.log_every < 1) return Status::error("the progress interval must be at least 1");
  if (o.stop_after < 0) return Status::error("--stop-after must not be negative");
  if (o.stop_after > o.epochs) {
    return Status::error("--stop-after " + std::to_string(o.stop_after) +
                         " is past the run's end (--epochs " + std::to_string(o.epochs) + ")");
  }
  // Examples per optimizer step, which a data set (at most 2^32 - 1 examples) must hold.
  int64_t per_step = 0;
  if (__builtin_mul_overflow(o.step.model.batch, o.step.accumulate, &per_step) ||
      __builtin_mul_overflow(per_step, o.step.ranks, &per_step) || per_step > INT64_C(0xFFFFFFFF)) {
    return Status::error(std::string("--batch times --accumulate") +
                         (o.step.ranks > 1 ? " times the ranks" : "") +
                         " is more than any data set's 2^32 - 1 examples");
  }
  // Where the run will write, checked before it trains.
  if (!o.save_path.empty()) MEMFIT_RETURN_IF_ERROR(check_output_path(o.save_path, "--save"));
  if (!o.trace_path.empty()) MEMFIT_RETURN_IF_ERROR(check_output_path(o.trace_path, "--trace"));
  if (!o.save_onnx_path.empty()) {
    if (o.step.model.onnx.empty()) return Status::error("--save-onnx needs a model from --onnx");
    MEMFIT_RETURN_IF_ERROR(check_output_path(o.save_onnx_path, "--save-onnx"));
  }
  return Status::ok();
}

// Without --synthetic, training reads Fashion-MNIST: the model must take
// (1, 28, 28) images and have 10 classes.
Status check_fits_fashion_mnist(const ModelOptions& options) {
  ModelOptions one = options;
  one.batch = 1;
  MEMFIT_ASSIGN_OR_RETURN(Model model, make_model(one, false));
  const Value& input = model.graph.value(model.inputs.at(0));
  const int64_t classes = model.graph.value(model.logits).type.shape.at(1);
  if (input.name == "images" && input.type.shape == Shape{1, 1, 28, 28} && classes == 10) {
    return Status::ok();
  }
  return Status::error("model " + options.name + " reads " + input.name + " " +
                       shape_string(input.type.shape) + " (batch 1) into " +
                       std::to_string(classes) +
                       " classes, but Fashion-MNIST is 1x28x28 images in 10 classes; add "
                       "--synthetic to train it on synthetic data");
}

// The data set a run reads: Fashion-MNIST, or a synthetic one shaped for the model.
Result<std::unique_ptr<DataSource>> open_data(const TrainOptions& options,
                                              const TrainingProgram& program) {
  if (options.synthetic) {
    const int64_t per_step = options.step.model.batch * options.step.ranks * options.step.accumulate;
    const int64_t train_count = options.limit > 0 ? options.limit : std::max<int64_t>(1024, per_step);
    const int64_t eval_batch = program.eval_batch();
    const int64_t test_count = std::max<int64_t>(1, 256 / eval_batch) * eval_batch;
    MEMFIT_ASSIGN_OR_RETURN(const DataKind kind, model_data_kind(options.step.model, program.model()));
    return synthetic_source(kind, program.model(), train_count, test_count, options.seed);
  }
  const std::string dir = options.data_dir.empty() ? kDefaultFashionMnistDir : options.data_dir;
  MEMFIT_ASSIGN_OR_RETURN(ImageDataset train_set, load_fashion_mnist(dir, true));
  MEMFIT_ASSIGN_OR_RETURN(ImageDataset test_set, load_fashion_mnist(dir, false));
  return fashion_mnist_source(take_first(std::move(train_set), options.limit),
                              take_first(std::move(test_set), options.limit));
}

// The evaluation batch: the training batch on synthetic data; for
// Fashion-MNIST up to 1000 test images at a time (the test set, limited, must
// be a multiple).
Result<int64_t> eval_batch_of(const TrainOptions& options) {
  if (options.synthetic) return options.step.model.batch;
  const int64_t test_count = options.limit > 0 ? std::min<int64_t>(options.limit, 10000) : 10000;
  const int64_t eval_batch = std::min<int64_t>(test_count, 1000);
  if (test_count % eval_batch != 0) {
    return Status::error("--limit must leave a test set that is a multiple of 1000 or at most 1000");
  }
  return eval_batch;
}

// The progress lines that say what a run will do: its data, ranks, step,
// techniques and memory plan.
void log_run_setup(const TrainOptions& options, const TrainingProgram& program,
                   const DataSource& data, const Communicator& comm, int64_t eval_batch,
                   const std::function<void(const std::string&)>& log) {
  const int64_t ranks = comm.size();
  const int64_t batch = options.step.model.batch;
  const Techniques& t = program.techniques();
  log(format("data: %s, %lld training and %lld test examples", data.description().c_str(),
             static_cast<long long>(data.train_count()),
             static_cast<long long>(data.test_count())));
  if (program.eval_batch() != eval_batch) {
    log(
        format("evaluation: batches of %lld test examples, not %lld: the largest whose plan fits "
               "--budget",
               static_cast<long long>(program.eval_batch()), static_cast<long long>(eval_batch)));
  }
  if (ranks > 1) {
    const AllReduceSummary& sums = program.all_reduce_summary();
    log(
        format("data parallel: %lld ranks (%s), %lld examples per micro-batch (%lld per rank); "
               "gradients summed in %zu buckets (%zu bytes, the largest %zu) of --bucket-mb %g%s",
               static_cast<long long>(ranks), comm.kind(), static_cast<long long>(batch * ranks),
               static_cast<long long>(batch), sums.buckets, sums.bytes, sums.largest_bucket,
               options.step.bucket_mb,
               options.step.shard == Shard::optimizer ? "; optimizer state sharded (ZeRO-1)"
               : options.step.shard == Shard::gradients
                   ? "; optimizer state and gradients sharded (ZeRO-2)"
                   : ""));
  }
  if (ranks == 1 && options.check_replicas) {
    log("--check-replicas: one rank, no replicas to compare (start the ranks with mpirun -np N)");
  }
  log(format("model %s: %zu nodes per step; kernels: %s", options.step.model.name.c_str(),
             program.step_graph().num_nodes(), program.backend_summary().c_str()));
  if (program.layout_summary().blocked_values > 0) {
    const LayoutSummary& layouts = program.layout_summary();
    log(
        format("layouts: %zu values in %s (oneDNN's channel-blocked layout), %zu in %s (its "
               "weights layout: convolution weights, their gradients and state), %zu reorder nodes",
               layouts.blocked_values, std::string(layout_name(program.blocked_layout())).c_str(),
               layouts.weight_values, std::string(layout_name(layouts.weights)).c_str(),
               layouts.reorders));
  }
  if (t.automatic) {
    const AutoSummary& a = program.auto_summary();
    const std::string recomputed =
        auto_recomputed_text(a.choice, a.recomputed_values, a.recompute.recomputed_nodes);
    log(
        format("policy auto: plan %s chosen (%s recomputed, %zu swapped), arena %zu bytes, "
               "predicted step %.6f s",
               a.choice.c_str(), recomputed.c_str(), a.swap.swapped_values, a.arena_bytes,
               a.predicted_step_seconds));
  }
  if (t.recompute != Recompute::none || t.mirror) {
    const RecomputeSummary& r = program.recompute_summary();
    log(format("recompute %s%s: %zu of %zu candidate values checkpointed, %zu nodes recomputed",
               std::string(name_of(t.recompute)).c_str(), t.mirror ? " with mirror" : "",
               r.checkpoints, r.candidates, r.recomputed_nodes));
  }
  if (t.swap != Swap::none) {
    const SwapSummary& s = program.swap_summary();
    log(format("swap %s: %zu of %zu candidate values (%zu bytes) swapped to the host pool%s",
               std::string(name_of(t.swap)).c_str(), s.swapped_values, s.candidates,
               s.swapped_bytes, s.waits_in_order ? ", compute waiting for each copy out" : ""));
    if (t.swap == Swap::tflms) {
      log(format("tflms: %zu swap-ins, %zu branch swaps, %zu chain_rule fallbacks", s.swap_ins,
                 s.branch_swaps, s.trigger_fallbacks));
    }
  }
  const MemoryPlan& plan = program.step_executable().plan();
  log(
      format("memory plan: arena %zu bytes (lower bound %zu, without sharing %zu), host pool %zu "
             "bytes%s",
             plan.arena_bytes, plan.lower_bound_bytes, plan.no_sharing_bytes, plan.host_bytes,
             options.poison ? "; poison mode on" : ""));
}

}  // namespace

Result<TrainReport> train(const TrainOptions& given,
                          const std::function<void(const std::string&)>& log_line) {
  TrainOptions options = given;
  std::unique_ptr<Communicator> alone;
  if (options.comm == nullptr) {
    alone = make_local_communicator();
    options.comm = alone.get();
  }
  // The cuda backend's gradient buckets are in GPU memory: its ranks sum
  // them with NCCL, which the run's communicator starts.
  std::unique_ptr<Communicator> nccl;
  if (options.step.backend == "cuda" && options.comm->size() > 1 &&
      !options.comm->sums_gpu_memory()) {
    MEMFIT_ASSIGN_OR_RETURN(nccl, cuda::make_nccl_communicator(*options.comm));
    options.comm = nccl.get();
  }
  Communicator& comm = *options.comm;
  const int rank = comm.rank();
  const int64_t ranks = comm.size();
  if (options.step.ranks == 1) options.step.ranks = ranks;
  if (options.step.ranks != ranks) {
    return Status::error(format("the step is set for %lld ranks, but the run has %lld",
                                static_cast<long long>(options.step.ranks),
                                static_cast<long long>(ranks)));
  }
  const auto log = [&](const std::string& line) {
    if (rank == 0) log_line(line);
  };
  const int64_t batch = options.step.model.batch;  // this rank's rows of a micro-batch
  MEMFIT_RETURN_IF_ERROR(check_options(options));
  if (!options.synthetic) {
    MEMFIT_RETURN_IF_ERROR(check_fits_fashion_mnist(options.step.model));
  }
  MEMFIT_ASSIGN_OR_RETURN(const int64_t eval_batch, eval_batch_of(options));
  MEMFIT_ASSIGN_OR_RETURN(auto program,
                          TrainingProgram::create(options.step, eval_batch, options.poison,
                                                  ranks > 1 ? &comm : nullptr));
  if (options.profile || !options.trace_path.empty()) {
    MEMFIT_RETURN_IF_ERROR(program->time_step_kernels());
  }
  MEMFIT_ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data, open_data(options, *program));
  if (batch * ranks * options.step.accumulate > data->train_count()) {
    return Status::error(std::string("--batch times --accumulate") +
                         (ranks > 1 ? " times the ranks" : "") + " exceeds the " +
                         std::to_string(data->train_count()) + " training examples");
  }
  if (ranks > 1) {
    MEMFIT_RETURN_IF_ERROR(check_same_settings(comm, settings_hash(options, *program, *data)));
  }
  // Evaluation reads whole batches of the test set: none may be left out.
  const int64_t tests = data->test_count();
  if (tests == 0) {
    return Status::error("the test set (" + data->description() +
                         ") holds no examples: memfit evaluates on it after every epoch");
  }
  if (const int64_t batch_of_tests = program->eval_batch(); tests % batch_of_tests != 0) {
    // The limit that evaluation covers: the whole test set as one batch when
    // it is smaller than the batch asked for, else whole batches of it (of
    // which the batch the budget allows is a divisor).
    const int64_t covered = tests < eval_batch ? tests : tests / eval_batch * eval_batch;
    return Status::error(format(
        "the test set (%s) holds %lld examples, but evaluation reads whole batches of %lld and "
        "would leave %lld out; give --limit %lld",
        data->description().c_str(), static_cast<long long>(tests),
        static_cast<long long>(batch_of_tests), static_cast<long long>(tests % batch_of_tests),
        static_cast<long long>(covered)));
  }
  log_run_setup(options, *program, *data, comm, eval_batch, log);
  // What a checkpoint records of this run (its data identity reads the
  // whole training set), only where one is read or written.
  const RunSettings run = options.resume_path.empty() && options.save_path.empty()
                              ? RunSettings{}
                              : run_settings(options, *data);
  StateStore state;
  program->init_state(state, options.seed);
  StepCounters counters;
  int64_t first_epoch = 0;
  // Rank 0 reads the checkpoint; every rank then starts from rank 0's state.
  if (!options.resume_path.empty()) {
    Status resumed = Status::ok();
    if (rank == 0) {
      resumed = [&]() -> Status {
        MEMFIT_ASSIGN_OR_RETURN(Checkpoint ck, load_checkpoint(options.resume_path));
        // The run's settings before the tensors: a changed --accumulate
        // changes the tensors too, and is named as the flag it is.
        if (ck.model == options.step.model.name) {
          if (Status same = check_same_run(ck, run); !same.is_ok()) {
            return Status::error("checkpoint " + options.resume_path + ": " + same.message());
          }
        }
        MEMFIT_RETURN_IF_ERROR(check_matches(ck, options.step.model.name, program->state_shapes()));
        for (NamedTensor& t : ck.tensors) state[t.name] = std::move(t.data);
        counters = StepCounters{ck.micro_step, ck.optimizer_step};
        first_epoch = ck.epoch;
        log(format("resumed from %s after epoch %lld (step %lld)", options.resume_path.c_str(),
                   static_cast<long long>(ck.epoch), static_cast<long long>(ck.optimizer_step)));
        return Status::ok();
      }();
    }
    MEMFIT_ASSIGN_OR_RETURN(const bool failed, any_rank(comm, !resumed.is_ok()));
    if (!resumed.is_ok()) return resumed;
    if (failed) return Status::error("rank 0 could not resume from " + options.resume_path);
  }
  if (ranks > 1) {
    MEMFIT_RETURN_IF_ERROR(share_rank0_state(comm, *program, state, counters, first_epoch));
  }
  // A NaN in the state would train to garbage with a finite loss (a ReLU
  // passes NaN on as 0).
  if (const std::string bad = non_finite_tensor(state); !bad.empty()) {
    return Status::error("tensor '" + bad + "' holds a NaN or an infinity " +
                         (options.resume_path.empty() ? std::string("in the model's initial state")
                                                      : "in checkpoint " + options.resume_path));
  }
  const int64_t last_epoch =
      options.stop_after > 0 ? std::min(options.stop_after, options.epochs) : options.epochs;
  if (first_epoch >= last_epoch) {
    return Status::error(format(
        "checkpoint %s is after epoch %lld, and the run ends %s epoch %lld: nothing is left to "
        "train",
        options.resume_path.c_str(), static_cast<long long>(first_epoch),
        last_epoch < options.epochs ? "(--stop-after) at" : "with", static_cast<long long>(last_epoch)));
  }

  MEMFIT_RETURN_IF_ERROR(program->load_state(state));
  state = StateStore();  // the arena holds it from here on

  MEMFIT_ASSIGN_OR_RETURN(BatchSampler sampler,
                          BatchSampler::create(data->train_count(), batch * ranks, options.seed));
  // Micro-batches left over after the last full optimizer step of an epoch are skipped.
  const int64_t micro_batches = sampler.batches_per_epoch() / options.step.accumulate * options.step.accumulate;
  if (micro_batches > 0 && options.epochs > std::numeric_limits<int64_t>::max() / micro_batches) {
    return Status::error(
        format("--epochs %lld of %lld micro-batches each is more micro-batches "
               "than a run counts (2^63 - 1); give fewer epochs",
               static_cast<long long>(options.epochs), static_cast<long long>(micro_batches)));
  }
  const int64_t total_steps = options.epochs * micro_batches / options.step.accumulate;
  // A checkpoint written by a stop request inside an epoch continues at its next micro-batch.
  const int64_t resume_batch = counters.micro_step - first_epoch * micro_batches;
  if (resume_batch < 0 || resume_batch >= micro_batches || resume_batch % options.step.accumulate != 0) {
    return Status::error(format("checkpoint %s: its step counter (micro-batch %lld) is not a step of "
                                "epoch %lld of this run",
                                options.resume_path.c_str(), static_cast<long long>(counters.micro_step),
                                static_cast<long long>(first_epoch + 1)));
  }
  // Every accumulate-th micro-batch ends an optimizer step (AdamW's bias
  // correction and the schedule read the count).
  if (counters.optimizer_step != counters.micro_step / options.step.accumulate) {
    return Status::error(
        format("checkpoint %s: its optimizer step %lld disagrees with its micro-batch %lld, which "
               "ends optimizer step %lld with --accumulate %lld",
               options.resume_path.c_str(), static_cast<long long>(counters.optimizer_step),
               static_cast<long long>(counters.micro_step),
               static_cast<long long>(counters.micro_step / options.step.accumulate),
               static_cast<long long>(options.step.accumulate)));
  }
  Batch inputs = Batch::for_model(program->model());
  // Each rank draws its own dropout masks (rank 0 those of one process with
  // this seed): with one seed for all, row k of every rank would share a mask.
  const uint64_t dropout_seed =
      rank == 0 ? options.seed : options.seed ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(rank));
  TrainReport report;
  // What a diverged run may try.
  const char* smaller = options.step.optimizer.weight_decay > 0 ? "--lr or --weight-decay" : "--lr";
  double train_seconds = 0;
  int64_t examples = 0;
  bool first_step_done = false;
  for (int64_t epoch = first_epoch; epoch < last_epoch; ++epoch) {
    const auto permutation = sampler.permutation(epoch);
    const auto start = Clock::now();
    auto window_start = start;
    double window_loss = 0;
    int64_t window_batches = 0;
    auto step_start = start;
    double step_loss = 0;  // the sum over this optimizer step's micro-batches
    const int64_t begin = epoch == first_epoch ? resume_batch : 0;
    bool stop = false;
    int64_t b = begin;
    for (; b < micro_batches && !stop; ++b) {
      const auto examples = std::span<const int64_t>(permutation).subspan(
          static_cast<size_t>((b * ranks + rank) * batch), static_cast<size_t>(batch));
      MEMFIT_RETURN_IF_ERROR(data->fill(false, examples, inputs));
      const float lr_scale = schedule_scale(options.schedule, counters.optimizer_step, total_steps);
      MEMFIT_ASSIGN_OR_RETURN(float loss, program->micro_step(inputs.feeds(), dropout_seed,
                                                              lr_scale, counters));
      if (ranks > 1) {  // the mean over the micro-batch's rows on every rank
        double sum = loss;
        MEMFIT_RETURN_IF_ERROR(comm.all_reduce_sum(&sum, 1));
        loss = static_cast<float>(sum / static_cast<double>(ranks));
      }
      if (!std::isfinite(loss)) {
        return Status::error(format(
            "the loss is %s at epoch %lld, micro-batch %lld (optimizer step %lld): training "
            "diverged and stopped%s; try a smaller %s",
            std::isnan(loss) ? "nan" : "infinite", static_cast<long long>(epoch + 1),
            static_cast<long long>(b + 1), static_cast<long long>(counters.optimizer_step),
            options.save_path.empty() ? "" : " (no checkpoint written for this epoch)", smaller));
      }
      report.losses.push_back(loss);
      window_loss += loss;
      step_loss += loss;
      ++window_batches;
      const bool step_done = counters.micro_step % options.step.accumulate == 0;
      if (step_done) {
        const auto now = Clock::now();
        if (options.on_step && rank == 0) {
          const double seconds = std::chrono::duration<double>(now - step_start).count();
          const int64_t step_examples = options.step.accumulate * batch * ranks;
          options.on_step(StepRecord{
              .epoch = epoch + 1,
              .step = counters.optimizer_step,
              .steps = total_steps,
              .loss = step_loss / static_cast<double>(options.step.accumulate),
              .examples_per_second = seconds > 0 ? static_cast<double>(step_examples) / seconds : 0,
          });
        }
        step_start = now;
        step_loss = 0;
      }
      if (step_done && options.check_replicas && ranks > 1) {
        MEMFIT_RETURN_IF_ERROR(check_replicas(*program, comm, counters.optimizer_step));
      }
      // The first step pays for first touches of the arena: the profile leaves it out.
      if (step_done && !first_step_done) {
        program->reset_step_times();
        first_step_done = true;
      }
      if (step_done && (counters.optimizer_step % options.log_every == 0 || b + 1 == micro_batches)) {
        const auto now = Clock::now();
        const double seconds = std::chrono::duration<double>(now - window_start).count();
        log(format("epoch %lld step %lld loss %.4f %.0f examples/s", static_cast<long long>(epoch + 1),
                   static_cast<long long>(counters.optimizer_step), window_loss / window_batches,
                   static_cast<double>(window_batches * batch * ranks) / seconds));
        window_start = now;
        window_loss = 0;
        window_batches = 0;
      }
      if (step_done && b + 1 < micro_batches && options.stop_requested) {
        MEMFIT_ASSIGN_OR_RETURN(stop, any_rank(comm, options.stop_requested()));
      }
    }
    train_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    examples += (b - begin) * batch * ranks;
    // The loss can stay finite while the parameters diverge (a ReLU passes a
    // NaN on as 0): the state is checked once an epoch, before it is saved.
    {
      StateStore trained;
      MEMFIT_RETURN_IF_ERROR(program->store_state(trained));
      const std::string bad = non_finite_tensor(trained);
      MEMFIT_ASSIGN_OR_RETURN(const bool diverged, any_rank(comm, !bad.empty()));
      if (diverged) {
        return Status::error(format(
            "%s holds a NaN or an infinity after epoch %lld (optimizer step %lld) though the "
            "loss stayed finite: training diverged and stopped%s; try a smaller %s",
            bad.empty() ? "another rank's state" : ("tensor '" + bad + "'").c_str(),
            static_cast<long long>(epoch + 1), static_cast<long long>(counters.optimizer_step),
            options.save_path.empty() ? "" : " (no checkpoint written for this epoch)", smaller));
      }
    }
    if (stop) {
      report.stopped = true;
      log(format("stopped at epoch %lld, optimizer step %lld, as asked", static_cast<long long>(epoch + 1),
                 static_cast<long long>(counters.optimizer_step)));
      if (!options.save_path.empty()) {
        MEMFIT_RETURN_IF_ERROR(save_checkpoint_of(options.save_path, options.step.model.name, epoch,
                                                  counters, run, *program, rank));
        log("saved " + options.save_path + " (--resume continues from the next step)");
      }
      break;
    }
    if (ranks > 1) MEMFIT_RETURN_IF_ERROR(share_rank0_model_state(comm, *program));
    MEMFIT_ASSIGN_OR_RETURN(double accuracy, evaluate(*program, *data, comm));
    report.test_accuracy.push_back(accuracy);
    log(format("epoch %lld done: test accuracy %.2f%% (%lld test examples)", static_cast<long long>(epoch + 1),
               100.0 * accuracy, static_cast<long long>(data->test_count())));
    if (!options.save_path.empty()) {
      MEMFIT_RETURN_IF_ERROR(save_checkpoint_of(options.save_path, options.step.model.name,
                                                epoch + 1, counters, run, *program, rank));
      log("saved " + options.save_path);
    }
    bool asked = false;
    if (epoch + 1 < last_epoch && options.stop_requested) {
      MEMFIT_ASSIGN_OR_RETURN(asked, any_rank(comm, options.stop_requested()));
    }
    if (asked) {
      report.stopped = true;
      log(format("stopped after epoch %lld, as asked", static_cast<long long>(epoch + 1)));
      break;
    }
  }
  if (ranks > 1) {
    // Rank 0's measurement of the steps that updated the parameters, the
    // first left out (as the profile).
    const RunTotals& totals = program->step_executable().totals();
    if (totals.runs > 0 && totals.comm_seconds > 0) {
      const double runs = static_cast<double>(totals.runs);
      log(
          format("all-reduce: %.6f s per step on the communication thread, %.6f s of it not "
                 "hidden by the backward pass (%.1f%% hidden); step %.6f s",
                 totals.comm_seconds / runs, totals.comm_wait_seconds / runs,
                 // Two clocks: a wait a little over the collective's time is 0% hidden.
                 100.0 * std::max(0.0, 1.0 - totals.comm_wait_seconds / totals.comm_seconds),
                 totals.seconds / runs));
    }
  }
  if (options.profile) {
    const Executable& step = program->step_executable();
    if (step.totals().runs == 0) {
      log("profile: no step after the first one ran; train for more steps to profile");
    } else {
      log(format_profile(profile_runs(step)));
    }
  }
  if (!options.trace_path.empty() && rank == 0) {
    MEMFIT_RETURN_IF_ERROR(write_chrome_trace(program->step_executable(), options.trace_path));
    log("trace of the last step written to " + options.trace_path);
  }
  if (!options.save_onnx_path.empty() || options.keep_trained) {
    StateStore state;
    MEMFIT_RETURN_IF_ERROR(program->store_state(state));  // every rank: sharded state is gathered
    if (rank == 0 && !options.save_onnx_path.empty()) {
      MEMFIT_RETURN_IF_ERROR(save_trained_onnx(options.step.model, state.tensors(), options.save_onnx_path));
      log("saved the trained model to " + options.save_onnx_path);
    }
    if (rank == 0 && options.keep_trained) report.trained = trained_tensors(*program, state);
  }
  report.examples_per_second = train_seconds > 0 ? static_cast<double>(examples) / train_seconds : 0;
  report.arena_bytes = program->arena_bytes();
  report.ranks = ranks;
  report.high_water_bytes = program->high_water_bytes();
  report.optimizer_steps = counters.optimizer_step;
  return report;
}

}  // namespace memfit
