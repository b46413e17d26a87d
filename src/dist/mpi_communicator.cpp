// The MPI world as a communicator: one rank per process, started by mpirun.
// Without MPI in the build, asking for it says what to install.
#include "memfit/dist.h"

#ifdef MEMFIT_HAVE_MPI

// The C interface only: otherwise Open MPI's and MPICH's headers pull in
// their deprecated C++ bindings, which do not compile cleanly under -Wextra.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <string>

namespace memfit {
namespace {

// MPI counts are ints: larger buffers go in pieces of at most INT_MAX
// elements (bytes for a broadcast).
constexpr size_t kMaxChunk = INT_MAX;

// The Status of an MPI call's return code. MPI_COMM_WORLD returns errors
// instead of aborting (MPI_ERRORS_RETURN), so they arrive here.
Status mpi_status(int code, const char* call, const char* where) {
  if (code == MPI_SUCCESS) return Status::ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  return Status::error(std::string(call) + " in " + where +
                       " failed: " + std::string(text, static_cast<size_t>(length)));
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(bool owns_mpi) : owns_mpi_(owns_mpi) {}
  ~MpiCommunicator() override {
    if (owns_mpi_) MPI_Finalize();
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  // Checks the thread level MPI provided and learns this rank's place; MPI
  // errors on the world are returned from here on.
  Status start(int provided) {
    const char* where = "make_mpi_communicator";
    if (provided < MPI_THREAD_SERIALIZED) {
      return Status::error("this MPI provides thread level " + std::to_string(provided) +
                           ", below MPI_THREAD_SERIALIZED, which memfit needs to run collectives "
                           "on a communication thread; use an MPI built with thread support");
    }
    MEMFIT_RETURN_IF_ERROR(mpi_status(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
                                      "MPI_Comm_set_errhandler", where));
    MEMFIT_RETURN_IF_ERROR(
        mpi_status(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank", where));
    return mpi_status(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size", where);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* kind() const override { return "mpi"; }
  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

  Status all_reduce_sum(float* data, size_t count) override {
    return all_reduce(data, count, MPI_FLOAT, MPI_SUM, "all_reduce_sum(float)");
  }
  Status all_reduce_sum(double* data, size_t count) override {
    return all_reduce(data, count, MPI_DOUBLE, MPI_SUM, "all_reduce_sum(double)");
  }
  Status all_reduce_max(double* data, size_t count) override {
    return all_reduce(data, count, MPI_DOUBLE, MPI_MAX, "all_reduce_max");
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size_) {
      return Status::error("broadcast from rank " + std::to_string(root) + " of a group of " +
                           std::to_string(size_));
    }
    auto* bytes_at = static_cast<char*>(data);
    for (size_t done = 0; done < bytes; done += kMaxChunk) {
      int chunk = static_cast<int>(std::min(kMaxChunk, bytes - done));
      MEMFIT_RETURN_IF_ERROR(
          mpi_status(MPI_Bcast(bytes_at + done, chunk, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast",
                     "broadcast"));
    }
    return Status::ok();
  }

  Status barrier() override {
    return mpi_status(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", "barrier");
  }

 private:
  // Every rank receives the same bits: the MPI standard asks this of
  // MPI_Allreduce, and Open MPI's algorithms reduce each element once and
  // share it, or combine pairs whose sum is the same either way round. With
  // the same ranks, counts and MCA settings it picks the same algorithm, so
  // runs repeat.
  template <class T>
  Status all_reduce(T* data, size_t count, MPI_Datatype type, MPI_Op op, const char* collective) {
    for (size_t done = 0; done < count; done += kMaxChunk) {
      int chunk = static_cast<int>(std::min(kMaxChunk, count - done));
      MEMFIT_RETURN_IF_ERROR(
          mpi_status(MPI_Allreduce(MPI_IN_PLACE, data + done, chunk, type, op, MPI_COMM_WORLD),
                     "MPI_Allreduce", collective));
    }
    return Status::ok();
  }

  int rank_ = 0;
  int size_ = 1;
  bool owns_mpi_;  // this object initialized MPI, so it finalizes it
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  const char* where = "make_mpi_communicator";
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    return Status::error(
        "MPI was already finalized in this process; make one MPI communicator per process and keep "
        "it");
  }
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MEMFIT_RETURN_IF_ERROR(mpi_status(MPI_Query_thread(&provided), "MPI_Query_thread", where));
  } else {
    MEMFIT_RETURN_IF_ERROR(
        mpi_status(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
                   "MPI_Init_thread", where));
  }
  // The communicator owns MPI from here on, so an error below finalizes it.
  auto world = std::make_unique<MpiCommunicator>(!initialized);
  MEMFIT_RETURN_IF_ERROR(world->start(provided));
  return std::unique_ptr<Communicator>(std::move(world));
}

}  // namespace memfit

#else

namespace memfit {

Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  return Status::error(
      "this memfit was built without MPI; install libopenmpi-dev (scripts/install-deps.sh) and "
      "rebuild");
}

}  // namespace memfit

#endif
