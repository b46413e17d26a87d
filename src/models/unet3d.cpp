#include "models/zoo.h"
namespace memfit {
Result<Model> build_unet3d(const ModelOptions&, bool) { return Status::error("unet3d: pending"); }
}  // namespace memfit
