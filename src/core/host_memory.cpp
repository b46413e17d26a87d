#include "core/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <sstream>

#include "memfit/bytes.h"

namespace memfit {

size_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    size_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page);
}

Status check_fits_memory(size_t needed, size_t available, const std::string& what) {
  if (available == 0 || needed <= available) return Status::ok();
  return Status::error(what + " needs " + human_bytes(needed) + " (" + std::to_string(needed) +
                       " bytes), but this machine has " + human_bytes(available) + " (" +
                       std::to_string(available) +
                       " bytes) available; make the step smaller: --budget BYTES with "
                       "--policy auto (or --recompute, --swap), or a smaller --batch");
}

}  // namespace memfit
