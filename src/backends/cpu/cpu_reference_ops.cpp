// The ops the cpu backend has no kernel of its own for: the reference
// kernels (src/backends/reference/) run their nodes. They are rare in a step
// (broadcast_to, pad, where), or move bytes only (the copies of swapping,
// the buckets of data parallelism).
#include "backends/cpu/cpu_kernels.h"

namespace memfit::cpu {

MEMFIT_CPU_KERNEL(broadcast_to, nullptr)
MEMFIT_CPU_KERNEL(pad, nullptr)
MEMFIT_CPU_KERNEL(pad_grad, nullptr)
MEMFIT_CPU_KERNEL(where, nullptr)
MEMFIT_CPU_KERNEL(to_host, nullptr)
MEMFIT_CPU_KERNEL(to_device, nullptr)
MEMFIT_CPU_KERNEL(swap_wait, nullptr)
MEMFIT_CPU_KERNEL(all_reduce_start, nullptr)
MEMFIT_CPU_KERNEL(all_reduce_wait, nullptr)
MEMFIT_CPU_KERNEL(reduce_scatter_start, nullptr)
MEMFIT_CPU_KERNEL(reduce_scatter_wait, nullptr)
MEMFIT_CPU_KERNEL(shard_pack, nullptr)
MEMFIT_CPU_KERNEL(all_gather_start, nullptr)
MEMFIT_CPU_KERNEL(all_gather_wait, nullptr)

}  // namespace memfit::cpu
