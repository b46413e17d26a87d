// The memory this machine can give a run, and the refusal of a run that
// needs more, made before anything is allocated.
#pragma once

#include <cstddef>
#include <string>

#include "memfit/status.h"

namespace memfit {

// The bytes the system can still give a process: Linux's MemAvailable
// (/proc/meminfo), else the physical memory; 0 when neither is known.
size_t available_memory_bytes();

// OK when `needed` bytes fit in `available` (0: unknown, always OK); else an
// error naming `what`, both sizes and the flags that make a step smaller.
Status check_fits_memory(size_t needed, size_t available, const std::string& what);

}  // namespace memfit
