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
#include <limits>
#include <string>
#include <utility>

namespace memfit {
namespace {

// MPI counts are ints: larger buffers go in pieces of at most INT_MAX
// elements (bytes for a broadcast). An all-gather cannot go in pieces (a
// call with a smaller count puts rank r's piece at r times that count, not
// in block r), so a block above INT_MAX floats goes as one element of a
// derived datatype, made of pieces of kTypePiece floats: 1 GiB, so that each
// piece's size in bytes is an int as well. A reduce-scatter can do neither
// (MPI_SUM is defined on predefined datatypes only), so such blocks are
// refused.
constexpr size_t kMaxChunk = INT_MAX;
constexpr size_t kTypePiece = size_t{1} << 28;

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

// A derived datatype, freed when it goes out of scope.
class OwnedType {
 public:
  OwnedType() = default;
  ~OwnedType() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  OwnedType(const OwnedType&) = delete;
  OwnedType& operator=(const OwnedType&) = delete;

  MPI_Datatype get() const { return type_; }
  // Where an MPI_Type_* call writes the new type; it must be empty.
  MPI_Datatype* out() { return &type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// `count` floats as one element of a committed derived datatype: count /
// piece contiguous pieces of `piece` floats, then the rest, with lower bound
// 0 and extent count floats, so element r of a buffer of them is block r.
Status make_float_block_type(size_t count, size_t piece, OwnedType& block, const char* where) {
  const size_t pieces = count / piece;
  const size_t rest = count % piece;
  if (piece > kMaxChunk || pieces > kMaxChunk ||
      count > static_cast<size_t>(std::numeric_limits<MPI_Aint>::max()) / sizeof(float)) {
    return Status::error(std::string(where) + " of blocks of " + std::to_string(count) +
                         " floats: too large for an MPI datatype");
  }
  OwnedType piece_type;
  OwnedType whole_pieces;
  OwnedType unsized;
  MEMFIT_RETURN_IF_ERROR(
      mpi_status(MPI_Type_contiguous(static_cast<int>(piece), MPI_FLOAT, piece_type.out()),
                 "MPI_Type_contiguous", where));
  MEMFIT_RETURN_IF_ERROR(mpi_status(
      MPI_Type_contiguous(static_cast<int>(pieces), piece_type.get(), whole_pieces.out()),
      "MPI_Type_contiguous", where));
  int lengths[2] = {1, static_cast<int>(rest)};
  MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(pieces * piece * sizeof(float))};
  MPI_Datatype types[2] = {whole_pieces.get(), MPI_FLOAT};
  MEMFIT_RETURN_IF_ERROR(mpi_status(
      MPI_Type_create_struct(rest == 0 ? 1 : 2, lengths, displacements, types, unsized.out()),
      "MPI_Type_create_struct", where));
  // A struct's extent may be rounded up to its entries' alignment; the
  // blocks lie exactly count floats apart.
  MEMFIT_RETURN_IF_ERROR(
      mpi_status(MPI_Type_create_resized(unsized.get(), 0,
                                         static_cast<MPI_Aint>(count * sizeof(float)), block.out()),
                 "MPI_Type_create_resized", where));
  return mpi_status(MPI_Type_commit(block.out()), "MPI_Type_commit", where);
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

  // With MPI_IN_PLACE the input is taken from the receive buffer, all
  // size() blocks of it, and the result is the receive buffer's `count`
  // elements, at its start (the standard's MPI_REDUCE_SCATTER_BLOCK; Open
  // MPI's algorithms read the send buffer from the receive buffer and write
  // the block at its start, and the tests check it). Every rank refuses a
  // block above INT_MAX alike (the counts agree), so none is left waiting.
  Status reduce_scatter_sum(float* data, size_t count) override {
    if (count > kMaxChunk) {
      return Status::error(
          "reduce_scatter_sum of blocks of " + std::to_string(count) +
          " floats: MPI_Reduce_scatter_block takes at most INT_MAX (" + std::to_string(INT_MAX) +
          ") floats a block, and MPI_SUM works on predefined datatypes only, so a larger block "
          "cannot go as a derived datatype; split the buffer into calls whose blocks hold at most "
          "INT_MAX floats");
    }
    return mpi_status(MPI_Reduce_scatter_block(MPI_IN_PLACE, data, static_cast<int>(count),
                                               MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                      "MPI_Reduce_scatter_block", "reduce_scatter_sum");
  }

  // With MPI_IN_PLACE each rank's contribution is its block of the receive
  // buffer, and the send count and type are ignored.
  Status all_gather(float* data, size_t count) override {
    const char* where = "all_gather";
    if (count <= kMaxChunk) {
      return mpi_status(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data,
                                      static_cast<int>(count), MPI_FLOAT, MPI_COMM_WORLD),
                        "MPI_Allgather", where);
    }
    OwnedType block;
    MEMFIT_RETURN_IF_ERROR(make_float_block_type(count, kTypePiece, block, where));
    return mpi_status(
        MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, 1, block.get(), MPI_COMM_WORLD),
        "MPI_Allgather", where);
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
