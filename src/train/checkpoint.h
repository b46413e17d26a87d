// Checkpoints: the trained tensors and the position in training, in one binary
// file that is replaced atomically and checked on load.
//
// Format (every integer little-endian, whatever the host):
//   header  (24 bytes)
//     magic           8 bytes "MEMFITCK"
//     version         u32, kCheckpointVersion
//     payload bytes   u64, the exact length of the rest of the file
//     payload crc32   u32, zlib's crc32 of the payload
//   payload
//     model           string
//     epoch, micro_step, optimizer_step: i64 each
//     run settings    batch, accumulate, train_examples, epochs, schedule: i64
//                     each; seed: u64 (what the counters depend on); data:
//                     string (version 3 on)
//     tensor count    u32
//     per tensor      name: string; rank: u32; dims: i64 x rank; data: f32 x elements
//   where a string is a u32 byte length followed by the bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memfit/ir.h"
#include "memfit/status.h"

namespace memfit {

// 2: the run settings after the counters; 3: the training data among them.
// Version 2 files still load, with the data unrecorded.
inline constexpr uint32_t kCheckpointVersion = 3;
inline constexpr uint32_t kOldestCheckpointVersion = 2;

// The settings of the run a checkpoint was made in that its position (epoch,
// micro-step, optimizer step) and its learning-rate schedule depend on: a
// resume with other values would sample other batches or run the schedule
// past its end, so it is refused (check_same_run).
struct RunSettings {
  int64_t batch = 0;           // --batch, the micro-batch
  int64_t accumulate = 0;      // --accumulate
  int64_t train_examples = 0;  // training examples per epoch (--limit, the data set)
  int64_t epochs = 0;          // --epochs: the schedule's length
  int64_t schedule = 0;        // --schedule (Schedule as an integer)
  uint64_t seed = 0;           // --seed: the sampling order
  // The training examples (DataSource::identity): a resume on other examples
  // is refused. Empty in a version 2 checkpoint, which did not record them.
  std::string data;
  friend bool operator==(const RunSettings&, const RunSettings&) = default;
};

struct NamedTensor {
  std::string name;
  Shape shape;
  std::vector<float> data;  // num_elements(shape) values, row-major
};

struct Checkpoint {
  std::string model;  // e.g. "lenet": a checkpoint of another model is rejected
  int64_t epoch = 0;
  int64_t micro_step = 0;
  int64_t optimizer_step = 0;
  RunSettings run;
  std::vector<NamedTensor> tensors;  // parameters, optimizer and model state
};

// Writes `path` + ".tmp" in the same directory, flushes it to disk and renames
// it over `path`, so a crash at any moment leaves either the old or the new
// checkpoint, never a torn one. On failure the temporary file is removed and an
// existing checkpoint at `path` is untouched. Errors if a tensor's data does not
// match its shape or two tensors share a name.
Status save_checkpoint(const std::string& path, const Checkpoint& checkpoint);

// Reads a checkpoint written by save_checkpoint. A missing, truncated, corrupt
// (CRC mismatch), foreign (wrong magic) or newer (wrong version) file is an
// error naming the file and the problem. Every length is checked against the
// bytes present before anything is allocated.
Result<Checkpoint> load_checkpoint(const std::string& path);
// The payload of a checkpoint (the bytes after its header) of format
// `version` decoded as load_checkpoint decodes it, without the checksum: the
// fuzzer's way past it.
Result<Checkpoint> decode_checkpoint_payload(std::span<const uint8_t> payload,
                                             uint32_t version = kCheckpointVersion);

// Errors unless `checkpoint` was saved for `model` and holds exactly the
// tensors of `expected` (name, shape), in any order; the message lists every
// missing, extra or differently shaped tensor.
Status check_matches(const Checkpoint& checkpoint, const std::string& model,
                     const std::vector<std::pair<std::string, Shape>>& expected);

// Errors unless the checkpoint's run settings are `now`; the message names
// every setting that differs, with both values. The data is compared where
// the checkpoint recorded it.
Status check_same_run(const Checkpoint& checkpoint, const RunSettings& now);

}  // namespace memfit
