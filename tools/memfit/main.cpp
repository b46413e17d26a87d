// The memfit command line. Thin: it parses flags and calls include/memfit.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "memfit/builder.h"
#include "memfit/train.h"

namespace {

constexpr int kUsageError = 2;

int run_train(const memfit::TrainOptions& options) {
  auto report = memfit::train(options, [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  });
  if (!report) {
    std::fprintf(stderr, "memfit train: %s\n", report.message().c_str());
    return 1;
  }
  if (!report->test_accuracy.empty()) {
    std::printf("final test accuracy: %.2f%%\n", 100.0 * report->test_accuracy.back());
  }
  std::printf("training speed: %.0f examples/s; peak step memory: %zu bytes\n",
              report->examples_per_second, report->peak_bytes);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"memfit: train deep networks inside a fixed memory budget"};
  app.require_subcommand(1);

  memfit::TrainOptions train;
  std::string optimizer = "sgd";
  float lr = 0;
  auto* cmd = app.add_subcommand("train", "train a model on Fashion-MNIST");
  cmd->add_option("--model", train.model, "model to train")
      ->check(CLI::IsMember(memfit::model_names()))
      ->capture_default_str();
  cmd->add_option("--epochs", train.epochs, "passes over the training set")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--stop-after", train.stop_after,
                  "stop after this epoch, as if interrupted (to --resume later)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch", train.batch, "examples per micro-batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--accumulate", train.accumulate, "micro-batches per optimizer step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--optimizer", optimizer, "sgd (momentum 0.9) or adamw")
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->capture_default_str();
  cmd->add_option("--lr", lr, "learning rate (default: 0.05 for sgd, 0.001 for adamw)")
      ->check(CLI::PositiveNumber);
  std::string schedule = "cosine";
  cmd->add_option("--schedule", schedule, "learning rate: constant, or cosine decay to 0 over the run")
      ->check(CLI::IsMember({"constant", "cosine"}))
      ->capture_default_str();
  cmd->add_option("--weight-decay", train.optimizer.weight_decay, "weight decay")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", train.seed, "seed of initialization, shuffling and dropout")
      ->capture_default_str();
  cmd->add_option("--data", train.data_dir,
                  "directory of the Fashion-MNIST .gz files (default: "
                  "/usr/share/datasets/fashion-mnist)");
  cmd->add_option("--save", train.save_path, "write a checkpoint here after every epoch");
  cmd->add_option("--resume", train.resume_path, "continue from this checkpoint");
  cmd->add_option("--backend", train.backend, "cpu (oneDNN) or reference (plain loops)")
      ->check(CLI::IsMember({"cpu", "reference"}))
      ->capture_default_str();
  cmd->add_option("--threads", train.threads, "threads of the cpu backend (default: one per core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--limit", train.limit, "use only the first N training and test examples")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--log-every", train.log_every, "optimizer steps between progress lines")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "memfit: " << e.what() << "\n\n" << app.help();
    return kUsageError;
  }

  if (cmd->parsed()) {
    train.schedule = schedule == "constant" ? memfit::Schedule::constant : memfit::Schedule::cosine;
    if (optimizer == "adamw") {
      train.optimizer.kind = memfit::OptimizerConfig::Kind::adamw;
      train.optimizer.lr = lr > 0 ? lr : 1e-3f;
    } else {
      train.optimizer.lr = lr > 0 ? lr : 0.05f;
    }
    return run_train(train);
  }
  return 0;
}
