// The builders of the zoo's model families, for the registry in zoo.cpp. Each
// receives options whose image_size, classes and width are resolved (never 0)
// and checked to be positive; depth is resolved for models that have one.
#pragma once

#include "memfit/builder.h"

namespace memfit {

// torchvision's resnet18/34/50/101/152 (options.name says which).
Result<Model> build_resnet(const ModelOptions& options, bool training);
// The pre-activation bottleneck ResNet for CIFAR of He et al. 2016.
Result<Model> build_resnet_cifar(const ModelOptions& options, bool training);
// torchvision's vgg16, without batch norm.
Result<Model> build_vgg16(const ModelOptions& options, bool training);

}  // namespace memfit
