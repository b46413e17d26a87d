// NCCL as a Communicator (nccl_communicator.h).
#include "backends/cuda/nccl_communicator.h"

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_device.h"

#if defined(MEMFIT_HAVE_CUDA) && defined(MEMFIT_HAVE_NCCL)

#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <thread>

#include "backends/cuda/cuda_call.h"
#include "backends/cuda/shared_library.h"

namespace memfit::cuda {
namespace {

// Only the calls memfit makes, found in libnccl.so.2 once.
struct NcclLibrary {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) init_rank = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclCommAbort) abort = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  decltype(&ncclCommGetAsyncError) async_error = nullptr;
};

Result<NcclLibrary> open_nccl() {
  MEMFIT_ASSIGN_OR_RETURN(void* library,
                          open_library("libnccl.so." + std::to_string(NCCL_MAJOR),
                                       "NCCL, which sums the cuda backend's gradients over ranks"));
  NcclLibrary calls;
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclGetUniqueId", calls.get_unique_id));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclCommInitRank", calls.init_rank));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclCommDestroy", calls.destroy));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclCommAbort", calls.abort));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclAllReduce", calls.all_reduce));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclReduceScatter", calls.reduce_scatter));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclAllGather", calls.all_gather));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclBroadcast", calls.broadcast));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclGetErrorString", calls.error_string));
  MEMFIT_RETURN_IF_ERROR(find_call(library, "NCCL", "ncclCommGetAsyncError", calls.async_error));
  return calls;  // the library stays open for the rest of the process
}

Result<const NcclLibrary*> nccl_library() {
  static const Result<NcclLibrary> opened = open_nccl();
  if (!opened) return opened.status();
  return &opened.value();
}

// Whether `data` is in GPU memory (cudaMalloc'd: the arena). Host memory,
// pinned or not (the runtime reports memory it does not know as
// unregistered host memory), is not. An error where the runtime cannot say,
// as after an earlier failure: neither library should then take the buffer.
Result<bool> in_gpu_memory(const void* data, int gpu) {
  MEMFIT_CUDA_CALL(cudaSetDevice(gpu));
  cudaPointerAttributes attributes{};
  MEMFIT_CUDA_CALL(cudaPointerGetAttributes(&attributes, data));
  return attributes.type == cudaMemoryTypeDevice;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& host, const NcclLibrary& nccl, int gpu)
      : host_(host), nccl_(nccl), gpu_(gpu) {}
  ~NcclCommunicator() override {
    if (cudaSetDevice(gpu_) != cudaSuccess) return;
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (comm_ != nullptr) (void)nccl_.destroy(comm_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Rank 0's NCCL id to every rank over the host communicator, then NCCL's
  // own start, which returns once every rank has joined.
  Status start() {
    MEMFIT_CUDA_CALL(cudaSetDevice(gpu_));
    MEMFIT_CUDA_CALL(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    struct {
      int32_t failed = 0;  // rank 0 could not make the id: every rank stops
      ncclUniqueId id{};
    } hello{};
    Status made = Status::ok();
    if (host_.rank() == 0) {
      made = check(nccl_.get_unique_id(&hello.id), "ncclGetUniqueId");
      hello.failed = made.is_ok() ? 0 : 1;
    }
    MEMFIT_RETURN_IF_ERROR(host_.broadcast(&hello, sizeof hello, 0));
    MEMFIT_RETURN_IF_ERROR(made);
    if (hello.failed) return Status::error("NCCL did not start on rank 0 (ncclGetUniqueId failed)");
    ncclComm_t comm = nullptr;  // unset on failure: the destructor has nothing to destroy
    MEMFIT_RETURN_IF_ERROR(
        check(nccl_.init_rank(&comm, host_.size(), hello.id, host_.rank()), "ncclCommInitRank"));
    comm_ = comm;
    return Status::ok();
  }

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
  const char* kind() const override { return "nccl"; }
  bool sums_gpu_memory() const override { return true; }

  Status all_reduce_sum(float* data, size_t count) override {
    MEMFIT_ASSIGN_OR_RETURN(const bool on_gpu, in_gpu_memory(data, gpu_));
    if (!on_gpu) return host_.all_reduce_sum(data, count);
    return run("ncclAllReduce (float sum)", [&] {
      return nccl_.all_reduce(data, data, count, ncclFloat, ncclSum, comm_, stream_);
    });
  }
  Status all_reduce_sum(double* data, size_t count) override {
    MEMFIT_ASSIGN_OR_RETURN(const bool on_gpu, in_gpu_memory(data, gpu_));
    if (!on_gpu) return host_.all_reduce_sum(data, count);
    return run("ncclAllReduce (double sum)", [&] {
      return nccl_.all_reduce(data, data, count, ncclDouble, ncclSum, comm_, stream_);
    });
  }
  Status all_reduce_max(double* data, size_t count) override {
    MEMFIT_ASSIGN_OR_RETURN(const bool on_gpu, in_gpu_memory(data, gpu_));
    if (!on_gpu) return host_.all_reduce_max(data, count);
    return run("ncclAllReduce (double max)", [&] {
      return nccl_.all_reduce(data, data, count, ncclDouble, ncclMax, comm_, stream_);
    });
  }
  Status broadcast(void* data, size_t bytes, int root) override {
    MEMFIT_ASSIGN_OR_RETURN(const bool on_gpu, in_gpu_memory(data, gpu_));
    if (!on_gpu) return host_.broadcast(data, bytes, root);
    if (root < 0 || root >= size()) {
      return Status::error("broadcast from rank " + std::to_string(root) + " of a group of " +
                           std::to_string(size()));
    }
    return run("ncclBroadcast",
               [&] { return nccl_.broadcast(data, data, bytes, ncclUint8, root, comm_, stream_); });
  }

  // NCCL's in-place reduce-scatter leaves this rank's block where it is
  // (recvbuff = sendbuff + rank * count); the interface wants it at the start.
  Status reduce_scatter_sum(float* data, size_t count) override {
    MEMFIT_ASSIGN_OR_RETURN(const bool on_gpu, in_gpu_memory(data, gpu_));
    if (!on_gpu) return host_.reduce_scatter_sum(data, count);
    float* mine = data + static_cast<size_t>(rank()) * count;
    return run("ncclReduceScatter", [&] {
      const ncclResult_t result =
          nccl_.reduce_scatter(data, mine, count, ncclFloat, ncclSum, comm_, stream_);
      if (result != ncclSuccess || mine == data) return result;
      return cudaMemcpyAsync(data, mine, count * sizeof(float), cudaMemcpyDeviceToDevice,
                             stream_) == cudaSuccess
                 ? ncclSuccess
                 : ncclUnhandledCudaError;
    });
  }

  // In place: this rank's block is NCCL's send buffer (sendbuff = recvbuff +
  // rank * count).
  Status all_gather(float* data, size_t count) override {
    MEMFIT_ASSIGN_OR_RETURN(const bool on_gpu, in_gpu_memory(data, gpu_));
    if (!on_gpu) return host_.all_gather(data, count);
    float* mine = data + static_cast<size_t>(rank()) * count;
    return run("ncclAllGather",
               [&] { return nccl_.all_gather(mine, data, count, ncclFloat, comm_, stream_); });
  }

  Status barrier() override { return host_.barrier(); }
  void abort(int code) override {
    if (comm_ != nullptr) (void)nccl_.abort(comm_);
    comm_ = nullptr;
    host_.abort(code);
  }

 private:
  Status check(ncclResult_t result, const char* call) const {
    if (result == ncclSuccess) return Status::ok();
    return Status::error(std::string(call) + " on rank " + std::to_string(host_.rank()) + " (GPU " +
                         std::to_string(gpu_) + "): " + nccl_.error_string(result));
  }

  // A collective issued on this rank's GPU by `issue`, waited for (the
  // calls may come from any thread: the executor's communication thread).
  // While it runs, NCCL's asynchronous error is watched: an error NCCL
  // reports (a broken network link, for one) would leave the collective
  // waiting for ever, so the communicator is aborted and the error
  // returned instead. (A peer that dies is seen by MPI, which ends the job.)
  template <class Issue>
  Status run(const char* call, Issue issue) {
    if (comm_ == nullptr) return Status::error(std::string(call) + ": NCCL was aborted");
    MEMFIT_CUDA_CALL(cudaSetDevice(gpu_));
    MEMFIT_RETURN_IF_ERROR(check(issue(), call));
    const Status done = wait(call);
    if (!done.is_ok()) {  // the collective may still run: nothing may wait for it
      (void)nccl_.abort(comm_);
      comm_ = nullptr;
    }
    return done;
  }
  Status wait(const char* call) {
    for (;;) {
      const cudaError_t done = cudaStreamQuery(stream_);
      if (done == cudaSuccess) return Status::ok();
      if (done != cudaErrorNotReady) return failed("cudaStreamQuery", done);
      ncclResult_t async = ncclSuccess;
      MEMFIT_RETURN_IF_ERROR(check(nccl_.async_error(comm_, &async), "ncclCommGetAsyncError"));
      if (async != ncclSuccess && async != ncclInProgress) return check(async, call);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  Communicator& host_;
  const NcclLibrary& nccl_;
  int gpu_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

bool built_with_nccl() { return true; }

Result<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& host) {
  const int gpu = rank_gpu();
  if (auto info = device_info(gpu); !info) {
    return Status::error(
        "NCCL: this rank takes GPU " + std::to_string(gpu) +
        " (one GPU per rank: its rank among the ranks on this machine, or the only GPU it "
        "sees): " +
        info.message());
  }
  MEMFIT_ASSIGN_OR_RETURN(const NcclLibrary* nccl, nccl_library());
  auto comm = std::make_unique<NcclCommunicator>(host, *nccl, gpu);
  MEMFIT_RETURN_IF_ERROR(comm->start());
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace memfit::cuda

#else

namespace memfit::cuda {

bool built_with_nccl() { return false; }

Result<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator&) {
  if (!built_with_cuda()) return device_info(0).status();  // says what to install
  return Status::error(
      "this memfit was built without NCCL: CMake found the CUDA toolkit but not nccl.h; install "
      "NCCL (its header beside the toolkit's) and rebuild");
}

}  // namespace memfit::cuda

#endif
