// The cuda backend's kernels of the data-parallel ops (src/ops/ops_comm.cpp):
// a bucket packs its tensors at their offsets (zeros after the last), and
// unpacks into them once its collective is done. Each is a few copies and a
// fill on the compute stream, as the reference kernels' memcpy and memset.
#include "backends/cuda/cuda_kernels.h"

#ifdef MEMFIT_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_kernel_util.h"

namespace memfit::cuda {
namespace {

size_t floats(int64_t n) { return static_cast<size_t>(n) * sizeof(float); }

void copy(float* to, const float* from, int64_t count, void* stream) {
  cudaMemcpyAsync(to, from, floats(count), cudaMemcpyDeviceToDevice,
                  static_cast<cudaStream_t>(stream));
}

void zero(float* to, int64_t count, void* stream) {
  cudaMemsetAsync(to, 0, floats(count), static_cast<cudaStream_t>(stream));
}

// The floats [from, from + count) of the tensors packed at `offsets`
// (inputs 0..k-1) into `to`, zeros where no tensor lies.
void pack_range(const std::vector<int64_t>& offsets, const KernelArgs& a, int64_t from,
                int64_t count, float* to, void* stream) {
  zero(to, count, stream);
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    const int64_t lo = std::max(offsets[i], from);
    const int64_t hi = std::min(offsets[i + 1], from + count);
    if (lo < hi) copy(to + (lo - from), in(a, i) + (lo - offsets[i]), hi - lo, stream);
  }
}

// The bucket `from` into the tensors at `offsets`, outputs 0..k-1.
void unpack(const std::vector<int64_t>& offsets, const KernelArgs& a, const float* from,
            void* stream) {
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    copy(out(a, i), from + offsets[i], offsets[i + 1] - offsets[i], stream);
  }
}

bool bucket_has_kernel(const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::all_reduce_start:
    case OpKind::reduce_scatter_start:
    case OpKind::all_reduce_wait:
    case OpKind::all_gather_wait:
    case OpKind::reduce_scatter_wait:
    case OpKind::shard_pack:
    case OpKind::all_gather_start:
      return has_op_dtypes(graph, node);
    default:
      return false;
  }
}

Result<std::unique_ptr<Kernel>> make_bucket_kernel(const Graph& graph, const Node& node,
                                                   std::shared_ptr<const Context> context) {
  if (!bucket_has_kernel(graph, node)) {
    return no_kernel_for(node.op);
  }
  const BucketAttrs& bucket = std::get<BucketAttrs>(node.attrs);
  const std::vector<int64_t> offsets = bucket.offsets;
  const int64_t size = bucket.size, block = bucket.block(), rank = bucket.rank;
  LaunchKernel::Launch launch;
  switch (node.op) {
    case OpKind::all_reduce_start:
    case OpKind::reduce_scatter_start:
      launch = [offsets, size](const KernelArgs& a, void* stream) {
        pack_range(offsets, a, 0, size, out(a, 0), stream);
      };
      break;
    case OpKind::all_reduce_wait:
    case OpKind::all_gather_wait:
      launch = [offsets](const KernelArgs& a, void* stream) {
        unpack(offsets, a, in(a, 0), stream);
      };
      break;
    case OpKind::reduce_scatter_wait:  // this rank's block of the sum is at the bucket's start
      launch = [block](const KernelArgs& a, void* stream) {
        copy(out(a, 0), in(a, 0), block, stream);
      };
      break;
    case OpKind::shard_pack:
      launch = [offsets, rank, block](const KernelArgs& a, void* stream) {
        pack_range(offsets, a, rank * block, block, out(a, 0), stream);
      };
      break;
    default:  // all_gather_start: this rank's block; the others are the collective's
      launch = [size, rank, block](const KernelArgs& a, void* stream) {
        zero(out(a, 0), size, stream);
        copy(out(a, 0) + rank * block, in(a, 0), block, stream);
      };
      break;
  }
  return launch_kernel(std::move(context), std::move(launch));
}

}  // namespace

MEMFIT_CUDA_KERNEL(all_reduce_start, bucket_has_kernel, make_bucket_kernel)
MEMFIT_CUDA_KERNEL(all_reduce_wait, bucket_has_kernel, make_bucket_kernel)
MEMFIT_CUDA_KERNEL(reduce_scatter_start, bucket_has_kernel, make_bucket_kernel)
MEMFIT_CUDA_KERNEL(reduce_scatter_wait, bucket_has_kernel, make_bucket_kernel)
MEMFIT_CUDA_KERNEL(shard_pack, bucket_has_kernel, make_bucket_kernel)
MEMFIT_CUDA_KERNEL(all_gather_start, bucket_has_kernel, make_bucket_kernel)
MEMFIT_CUDA_KERNEL(all_gather_wait, bucket_has_kernel, make_bucket_kernel)

}  // namespace memfit::cuda

#endif  // MEMFIT_HAVE_CUDA
