// numpy array files: a single .npy array, or a .npz archive (numpy.savez:
// a zip of named .npy members, stored; numpy.savez_compressed: deflated).
// A .npy file and a stored member are read in place from a read-only
// mapping of the file; a compressed member is decompressed once into memory.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memfit/status.h"
#include "train/mapped_file.h"
#include "train/npy.h"

namespace memfit {

struct NpyArray {
  std::string name = {};  // the member's name less ".npy"; "" for a .npy file
  NpyHeader header;
  std::span<const uint8_t> data;  // the elements: header.data_bytes bytes
  // Whether `data` lies in the file's mapping (a .npy file or a stored
  // member); else in memory, decompressed.
  bool mapped = false;
};

class ArrayFile {
 public:
  // Opens a .npy or .npz file, told apart by their first bytes, not by the
  // name. Every array's header is parsed and its data length checked.
  static Result<ArrayFile> open(const std::string& path);

  const std::string& path() const { return file_.path(); }
  bool is_npz() const { return npz_; }
  uint64_t size() const { return file_.size(); }
  int64_t mtime_ns() const { return file_.mtime_ns(); }
  const std::vector<NpyArray>& arrays() const { return arrays_; }

 private:
  MappedFile file_;
  bool npz_ = false;
  std::vector<std::vector<uint8_t>> inflated_;  // decompressed members' bytes
  std::vector<NpyArray> arrays_;
};

}  // namespace memfit
