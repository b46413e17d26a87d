// The one-rank communicator, and what the environment says about MPI.
#include <cstdlib>
#include <optional>
#include <string>

#include "memfit/dist.h"

namespace memfit {
namespace {

// Alone, the sum, the largest value, the broadcast, the reduce-scatter and
// the all-gather (of one block) of a rank's data are that data, and there is
// nobody to wait for.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* kind() const override { return "local"; }
  Status all_reduce_sum(float*, size_t) override { return Status::ok(); }
  Status all_reduce_sum(double*, size_t) override { return Status::ok(); }
  Status all_reduce_max(double*, size_t) override { return Status::ok(); }
  Status broadcast(void*, size_t, int root) override {
    if (root != 0)
      return Status::error("broadcast from rank " + std::to_string(root) + " of a group of 1");
    return Status::ok();
  }
  Status reduce_scatter_sum(float*, size_t) override { return Status::ok(); }
  Status all_gather(float*, size_t) override { return Status::ok(); }
  Status barrier() override { return Status::ok(); }
  void abort(int) override {}
};

// The value of an environment variable read as a whole number from 0 to
// 2^30; none if it is unset or not one.
std::optional<int> env_number(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) return std::nullopt;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > (1L << 30)) return std::nullopt;
  return static_cast<int>(value);
}

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() {
  return std::make_unique<LocalCommunicator>();
}

bool mpi_available() {
#ifdef MEMFIT_HAVE_MPI
  return true;
#else
  return false;
#endif
}

// Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; MPICH's Hydra and other PMI
// launchers (srun among them) set PMI_SIZE or PMIX_SIZE. A launch with one
// rank is no different from running alone.
bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const int size = env_number(name).value_or(0);
    if (size > 0) return size > 1;
  }
  return false;
}

// Open MPI sets OMPI_COMM_WORLD_LOCAL_RANK, MPICH's Hydra MPI_LOCALRANKID,
// srun SLURM_LOCALID; PMIx launchers PMIX_LOCAL_RANK.
int local_rank() {
  for (const char* name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMIX_LOCAL_RANK", "SLURM_LOCALID"}) {
    if (const std::optional<int> rank = env_number(name)) return *rank;
  }
  return 0;
}

}  // namespace memfit
