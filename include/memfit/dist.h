// Communicators: how the ranks of a data-parallel run exchange gradients,
// losses and counts (docs/design.md, Distributed). One process is one rank; the
// ranks of a run form one group, numbered 0 .. size-1. Implementations:
// local (one rank: every collective is the identity), threads (N ranks as N
// threads of one process, for tests) and MPI (one rank per process, started
// by mpirun, on one machine or many).
//
// Collectives are called by every rank of the group in the same order, with
// the same counts; each blocks until its result is complete on this rank.
// Sums are bit-identical on every rank (a sum computed once per element and
// shared, or computed in the same order everywhere), so replicas that apply
// the same update stay bit-identical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "memfit/status.h"

namespace memfit {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "local", "threads" or "mpi".
  virtual const char* kind() const = 0;

  // data[i] = the sum over ranks of data[i], in place.
  virtual Status all_reduce_sum(float* data, size_t count) = 0;
  virtual Status all_reduce_sum(double* data, size_t count) = 0;
  // data[i] = the largest over ranks of data[i], in place.
  virtual Status all_reduce_max(double* data, size_t count) = 0;
  // The `bytes` bytes at data on rank `root` copied to data on every rank.
  virtual Status broadcast(void* data, size_t bytes, int root) = 0;

  // ZeRO's collectives, over a buffer of size() blocks of `count` floats each:
  // block r is data[r * count .. (r + 1) * count), the part of the buffer rank
  // r owns. Every rank's buffer holds size() * count floats, and no two
  // ranks' buffers overlap.
  //
  // reduce_scatter_sum: data[0 .. count) = the sum over ranks q of q's block
  // rank(), in place; the rest of data is left unspecified afterwards (the
  // collective may use it as scratch). Each block's sum is computed once and
  // lands on its one rank: the threads communicator sums in rank order, MPI
  // in its algorithm's order, the same from run to run with the same ranks,
  // counts and settings, so a run repeats with the same bits. MPI:
  // MPI_Reduce_scatter_block, whose blocks are int counts of MPI_FLOAT; a
  // `count` above INT_MAX is refused with an error (MPI_SUM is defined on
  // predefined datatypes only, so a block cannot be one element of a derived
  // datatype): split the buffer into several calls. An MPI may allocate
  // scratch of up to twice the whole buffer (Open MPI's algorithms do).
  virtual Status reduce_scatter_sum(float* data, size_t count) = 0;
  // all_gather: block r of data = rank r's block r, on every rank, in place:
  // each rank brings its own block at its own position, and every other
  // block is overwritten. Every rank ends with the same bits (a copy, not a sum). MPI:
  // MPI_Allgather with MPI_IN_PLACE; a `count` above INT_MAX goes as one
  // element of a derived datatype that spans the block.
  virtual Status all_gather(float* data, size_t count) = 0;

  // Whether the float collectives (all_reduce_sum of floats,
  // reduce_scatter_sum, all_gather) take buffers in GPU memory: the cuda
  // backend's gradient buckets live in its arena on the GPU, and only such a
  // communicator (NCCL) may sum them. The others take host memory only.
  virtual bool sums_gpu_memory() const { return false; }

  // Returns when every rank has called it.
  virtual Status barrier() = 0;
  // Ends every process of the group with exit status `code`, at once: for a
  // rank that failed while the others may wait for it in a collective. Only
  // the MPI communicator ends anything; the others return (their ranks share
  // one process, whose caller ends it).
  virtual void abort(int code) = 0;
};

// One rank alone.
std::unique_ptr<Communicator> make_local_communicator();

// `size` ranks as threads of this process: element r of the result is rank
// r's communicator, to be used by one thread each. Sums are computed in rank
// order, once per element (reduce_scatter_sum's as well). Ranks that disagree
// on a collective (another call, count or root) all get an error, and no
// buffer changes.
std::vector<std::unique_ptr<Communicator>> make_thread_communicators(int size);

// Whether this build has MPI, and whether this process was started by an MPI
// launcher (mpirun, mpiexec) as one of several ranks.
bool mpi_available();
bool launched_by_mpi();
// This process's rank among the ranks on its machine, as its launcher tells
// it (Open MPI, MPICH, PMIx, Slurm); 0 when none does. The cuda backend
// takes GPU local_rank() (one GPU per rank), or the only GPU the rank sees.
int local_rank();

// The MPI world (MPI_Init_thread with MPI_THREAD_SERIALIZED: collectives may
// run on a communication thread, one at a time). One per process; MPI is
// finalized when it is destroyed. Errors: a build without MPI, an MPI that
// cannot start.
Result<std::unique_ptr<Communicator>> make_mpi_communicator();

}  // namespace memfit
