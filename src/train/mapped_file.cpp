#include "train/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

namespace memfit {

Result<MappedFile> MappedFile::open(const std::string& path, const std::string& what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::error("cannot open " + what + " " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  if (!stated || !S_ISREG(st.st_mode)) {
    const std::string problem =
        stated ? "not a regular file (a directory, a FIFO or a device)" : std::strerror(errno);
    ::close(fd);
    return Status::error(what + " " + path + ": " + problem);
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<uint64_t>(st.st_size);
  file.mtime_ns_ = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  if (file.size_ > 0) {
    void* data = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
      const std::string problem = std::strerror(errno);
      ::close(fd);
      return Status::error("cannot map " + what + " " + path + " into memory: " + problem);
    }
    file.data_ = static_cast<const uint8_t*>(data);
  }
  ::close(fd);  // the mapping keeps the file open
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mtime_ns_(other.mtime_ns_) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mtime_ns_ = other.mtime_ns_;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::advise_random() const {
  // Advice only: a kernel that ignores it reads ahead, which changes no data.
  if (data_ != nullptr) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_RANDOM);
}

void MappedFile::release(uint64_t offset, uint64_t bytes) const {
  if (data_ == nullptr || bytes == 0 || offset >= size_) return;
  static const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t first = offset / page * page;
  const uint64_t end = std::min(size_, offset + bytes);
  // Advice only: pages touched again are read back in.
  ::madvise(const_cast<uint8_t*>(data_) + first, end - first, MADV_DONTNEED);
}

}  // namespace memfit
