// A file mapped read-only into memory (mmap): its pages are read from disk
// when touched and can be dropped again by the kernel, so a mapped file of
// any size costs address space, not resident memory.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "memfit/status.h"

namespace memfit {

class MappedFile {
 public:
  // Maps the regular file at `path`. `what` names the file in messages
  // ("array file", "token file"). An empty file maps to no bytes.
  static Result<MappedFile> open(const std::string& path, const std::string& what);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::string& path() const { return path_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }
  int64_t mtime_ns() const { return mtime_ns_; }
  // Tells the kernel that pages will be touched in no order (MADV_RANDOM):
  // it then reads no pages ahead of the ones touched.
  void advise_random() const;
  // Drops the pages holding bytes [offset, offset + bytes) from this
  // process's resident set (MADV_DONTNEED; the data stays in the file and
  // the page cache): a reader that releases what it has read keeps a
  // resident set that does not grow with the file.
  void release(uint64_t offset, uint64_t bytes) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  int64_t mtime_ns_ = 0;
};

}  // namespace memfit
