// The reference kernel of every op of the list, ref_<op>, defined by the
// ref_*.cpp file of its family. reference_backend.cpp builds its table from
// the list, so an op without its kernel fails to link.
#pragma once

#include "backends/reference/reference_kernels.h"

namespace memfit {

#define MEMFIT_REF_KERNEL_DECLARATION(id, attrs, min_inputs, max_inputs) \
  void ref_##id(const RefCall& call);
MEMFIT_OPS(MEMFIT_REF_KERNEL_DECLARATION)
#undef MEMFIT_REF_KERNEL_DECLARATION

}  // namespace memfit
