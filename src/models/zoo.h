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
// windows of kLstmWindow steps (Zaremba et al.'s 35): each window's input
// projections, decoder and loss are single nodes over its N x K tokens.
inline constexpr int64_t kLstmWindow = 35;
Result<Model> build_lstm_lm(const ModelOptions& options, bool training);
Result<Model> build_seq2seq(const ModelOptions& options, bool training);
// Transformers (transformer.cpp).
Result<Model> build_gpt(const ModelOptions& options, bool training);
Result<Model> build_transformer(const ModelOptions& options, bool training);
// The 3D U-Net (unet3d.cpp).
Result<Model> build_unet3d(const ModelOptions& options, bool training);

}  // namespace memfit
