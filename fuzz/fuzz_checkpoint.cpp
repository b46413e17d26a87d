// libFuzzer target: the checkpoint reader (src/train/checkpoint.h). The
// input is a whole file for load_checkpoint (through an in-memory file, so
// its size checks and the checksum run) and, past the checksum, a payload
// for decode_checkpoint_payload, read as each format version it reads. Either gives a checkpoint or
// an error, never a crash, and never an allocation larger than the input allows.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <span>
#include <string>

#include "train/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  for (uint32_t version = memfit::kOldestCheckpointVersion; version <= memfit::kCheckpointVersion;
       ++version) {
    (void)memfit::decode_checkpoint_payload(std::span<const uint8_t>(data, size), version);
  }
  const int fd = memfd_create("checkpoint", 0);
  if (fd < 0) return 0;
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  if (written == size) (void)memfit::load_checkpoint("/proc/self/fd/" + std::to_string(fd));
  close(fd);
  return 0;
}
