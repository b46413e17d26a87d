// The builders of the zoo's model families, for the registry in zoo.cpp. Each
// receives options whose sizes are resolved (never 0 for an option the model
// has) and checked to be positive.
#pragma once

#include "memfit/builder.h"

namespace memfit {

// torchvision's resnet18/34/50/101/152 (options.name says which).
Result<Model> build_resnet(const ModelOptions& options, bool training);
// The pre-activation bottleneck ResNet for CIFAR of He et al. 2016.
Result<Model> build_resnet_cifar(const ModelOptions& options, bool training);
// torchvision's vgg16, without batch norm.
Result<Model> build_vgg16(const ModelOptions& options, bool training);
// LSTM models, unrolled over time (lstm.cpp). lstm-lm runs its sequence in
// windows of kLstmWindow steps: each window's input projections, decoder and
// loss are single nodes over its N x K tokens. 7 steps make matrix products
// of 140 rows at batch 20, as fast as 35 steps' 700 on this CPU (0.46 s a
// step either way, against 0.50 s with 5 and 0.88 s with 1), and keep a
// window small enough for recomputation (sqrt at 1000 steps plans 333 MiB
// with 7, 491 MiB with 35).
inline constexpr int64_t kLstmWindow = 7;
Result<Model> build_lstm_lm(const ModelOptions& options, bool training);
Result<Model> build_seq2seq(const ModelOptions& options, bool training);
// Transformers (transformer.cpp).
Result<Model> build_gpt(const ModelOptions& options, bool training);
Result<Model> build_transformer(const ModelOptions& options, bool training);
// The 3D U-Net (unet3d.cpp).
Result<Model> build_unet3d(const ModelOptions& options, bool training);

}  // namespace memfit
