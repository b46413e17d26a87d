// libFuzzer target: the numpy array reader (src/train/array_file.h): a .npy
// array or a .npz archive (its zip records, read by memfit and by libzip,
// and every member's .npy header). The input is written to an anonymous
// file (memfd) and opened by its /proc path; any input gives arrays or an
// error, never a crash, and every array's data is as long as its header
// declares and lies inside the file or the decompressed memory.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "train/array_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("array", 0);
  if (fd < 0) return 0;
  if (size > 0 && write(fd, data, size) != static_cast<ssize_t>(size)) {
    close(fd);
    return 0;
  }
  auto file = memfit::ArrayFile::open("/proc/self/fd/" + std::to_string(fd));
  if (file.is_ok()) {
    for (const memfit::NpyArray& array : file->arrays()) {
      if (array.data.size() != array.header.data_bytes) std::abort();
      const uint8_t* begin = array.data.data();
      volatile uint8_t sum = 0;
      for (size_t i = 0; i < array.data.size(); i += 4096) sum = sum + begin[i];  // readable
      if (!array.data.empty()) sum = sum + begin[array.data.size() - 1];
      (void)sum;
    }
  }
  close(fd);
  return 0;
}
