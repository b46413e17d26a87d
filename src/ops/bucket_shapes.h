// The shapes of a bucket's tensors (BucketAttrs, include/memfit/attrs.h).
#pragma once

#include <vector>

#include "memfit/ir.h"

namespace memfit {

// Tensor i's shape: dims[sum(ndims[0..i)) .. +ndims[i]). The attributes must
// be those of a verified node (ndims not negative, summing to dims' size).
std::vector<Shape> bucket_shapes(const BucketAttrs& bucket);

}  // namespace memfit
