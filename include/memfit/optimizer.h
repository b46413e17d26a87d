// The optimizer of a training step and its learning-rate schedule: what the
// update nodes appended by autodiff compute (src/autodiff/optimizer_nodes.cpp).
#pragma once

namespace memfit {

struct OptimizerConfig {
  enum class Kind { sgd, adamw } kind = Kind::sgd;
  float lr = 0;               // 0: the kind's default (default_learning_rate)
  float momentum = 0.9f;      // sgd
  float weight_decay = 0.0f;  // sgd: added to the gradient; adamw: decoupled
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adamw
};

// The learning rate of `kind` when none is given: 0.05 for sgd (with momentum
// 0.9), 0.001 for adamw.
float default_learning_rate(OptimizerConfig::Kind kind);

// How the learning rate changes over the run after its warmup
// (src/train/lr_schedule.h): constant; cosine decay from lr to the floor over
// the run's optimizer steps (Loshchilov and Hutter 2017); or linear decay to
// the floor. The integers are checkpoints' (RunSettings::schedule).
enum class Schedule { constant = 0, cosine = 1, linear = 2 };

}  // namespace memfit
