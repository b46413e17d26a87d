#include "train/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "core/output_path.h"

namespace memfit {
namespace {

constexpr std::string_view kMagic = "MEMFITCK";
constexpr size_t kHeaderBytes = 24;  // magic 8, version 4, payload bytes 8, crc32 4
constexpr size_t kMaxListedProblems = 10;

std::string file_error(const std::string& path, const std::string& problem) {
  return "checkpoint " + path + ": " + problem;
}

// The number of elements of `shape`, or -1 if a dimension is negative or the
// size in bytes would not fit in an int64_t (it never overflows).
int64_t checked_elements(const Shape& shape) {
  constexpr int64_t kLimit = INT64_MAX / 4;
  int64_t elements = 1;
  for (const int64_t dim : shape) {
    if (dim < 0) return -1;
    if (dim != 0 && elements > kLimit / dim) return -1;
    elements *= dim;
  }
  return elements;
}

uint32_t crc32_of(const uint8_t* bytes, size_t size) {
  return static_cast<uint32_t>(crc32_z(0, bytes, size));
}

class Writer {
 public:
  explicit Writer(size_t capacity) { bytes_.reserve(capacity); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void raw(std::string_view s) { bytes_.insert(bytes_.end(), s.begin(), s.end()); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    raw(s);
  }
  std::vector<uint8_t> take() && { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads the payload; every read checks the bytes left first, so a corrupt
// length can neither read past the end nor allocate more than the file holds.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t remaining() const { return size_ - pos_; }

  Result<uint64_t> u64(const char* what) {
    MEMFIT_RETURN_IF_ERROR(need(8, what));
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(data_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return v;
  }
  Result<uint32_t> u32(const char* what) {
    MEMFIT_RETURN_IF_ERROR(need(4, what));
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(data_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return v;
  }
  Result<int64_t> i64(const char* what) {
    MEMFIT_ASSIGN_OR_RETURN(const uint64_t v, u64(what));
    return static_cast<int64_t>(v);
  }
  Result<std::string> str(const char* what) {
    MEMFIT_ASSIGN_OR_RETURN(const uint32_t length, u32(what));
    MEMFIT_RETURN_IF_ERROR(need(length, what));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return s;
  }
  Status f32s(std::vector<float>& out, int64_t count, const std::string& what) {
    MEMFIT_RETURN_IF_ERROR(need(static_cast<uint64_t>(count) * 4, what.c_str()));
    out.resize(static_cast<size_t>(count));
    for (float& v : out) {
      uint32_t bits = 0;
      for (int i = 0; i < 4; ++i) bits |= static_cast<uint32_t>(data_[pos_ + i]) << (8 * i);
      v = std::bit_cast<float>(bits);
      pos_ += 4;
    }
    return Status::ok();
  }

 private:
  Status need(uint64_t bytes, const char* what) const {
    if (bytes <= remaining()) return Status::ok();
    return Status::error(std::string("the payload ends inside ") + what);
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Errors a caller can make in the struct it asks to save.
Status validate(const Checkpoint& checkpoint) {
  std::unordered_set<std::string_view> names;
  for (const NamedTensor& tensor : checkpoint.tensors) {
    if (!names.insert(tensor.name).second) {
      return Status::error("two tensors are named '" + tensor.name + "'");
    }
    const int64_t elements = checked_elements(tensor.shape);
    if (elements < 0 || static_cast<uint64_t>(elements) != tensor.data.size()) {
      return Status::error(
          "tensor '" + tensor.name + "' has " + std::to_string(tensor.data.size()) +
          " values but shape " + shape_string(tensor.shape) + " needs " +
          (elements < 0 ? std::string("an impossible number") : std::to_string(elements)));
    }
  }
  return Status::ok();
}

std::vector<uint8_t> encode_payload(const Checkpoint& checkpoint) {
  size_t bytes = 4 + checkpoint.model.size() + 3 * 8 + 6 * 8 + 4 + checkpoint.run.data.size() + 4;
  for (const NamedTensor& tensor : checkpoint.tensors) {
    bytes += 4 + tensor.name.size() + 4 + 8 * tensor.shape.size() + 4 * tensor.data.size();
  }
  Writer out(bytes);
  out.str(checkpoint.model);
  out.i64(checkpoint.epoch);
  out.i64(checkpoint.micro_step);
  out.i64(checkpoint.optimizer_step);
  const RunSettings& run = checkpoint.run;
  for (const int64_t v : {run.batch, run.accumulate, run.train_examples, run.epochs, run.schedule}) {
    out.i64(v);
  }
  out.u64(run.seed);
  out.str(run.data);
  out.u32(static_cast<uint32_t>(checkpoint.tensors.size()));
  for (const NamedTensor& tensor : checkpoint.tensors) {
    out.str(tensor.name);
    out.u32(static_cast<uint32_t>(tensor.shape.size()));
    for (const int64_t dim : tensor.shape) out.i64(dim);
    for (const float v : tensor.data) out.u32(std::bit_cast<uint32_t>(v));
  }
  return std::move(out).take();
}

Result<Checkpoint> decode_payload(Reader& in, uint32_t version) {
  Checkpoint checkpoint;
  MEMFIT_ASSIGN_OR_RETURN(checkpoint.model, in.str("the model name"));
  MEMFIT_ASSIGN_OR_RETURN(checkpoint.epoch, in.i64("the epoch"));
  MEMFIT_ASSIGN_OR_RETURN(checkpoint.micro_step, in.i64("the micro-step"));
  MEMFIT_ASSIGN_OR_RETURN(checkpoint.optimizer_step, in.i64("the optimizer step"));
  RunSettings& run = checkpoint.run;
  for (int64_t* v : {&run.batch, &run.accumulate, &run.train_examples, &run.epochs, &run.schedule}) {
    MEMFIT_ASSIGN_OR_RETURN(*v, in.i64("the run settings"));
  }
  MEMFIT_ASSIGN_OR_RETURN(run.seed, in.u64("the run settings"));
  if (version >= 3) {
    MEMFIT_ASSIGN_OR_RETURN(run.data, in.str("the training data"));
  }
  MEMFIT_ASSIGN_OR_RETURN(const uint32_t count, in.u32("the tensor count"));
  // A tensor takes at least 8 bytes (name length and rank).
  if (count > in.remaining() / 8) {
    return Status::error("it declares " + std::to_string(count) + " tensors, more than its " +
                         std::to_string(in.remaining()) + " remaining bytes can hold");
  }
  checkpoint.tensors.resize(count);
  std::unordered_set<std::string> names;
  for (NamedTensor& tensor : checkpoint.tensors) {
    MEMFIT_ASSIGN_OR_RETURN(tensor.name, in.str("a tensor name"));
    if (!names.insert(tensor.name).second) {
      return Status::error("two tensors are named '" + tensor.name + "'");
    }
    MEMFIT_ASSIGN_OR_RETURN(const uint32_t rank, in.u32("a tensor rank"));
    if (rank > in.remaining() / 8) {
      return Status::error("tensor '" + tensor.name + "' declares rank " + std::to_string(rank) +
                           ", more than the remaining bytes can hold");
    }
    tensor.shape.resize(rank);
    for (int64_t& dim : tensor.shape) {
      MEMFIT_ASSIGN_OR_RETURN(dim, in.i64("a tensor shape"));
    }
    const int64_t elements = checked_elements(tensor.shape);
    if (elements < 0) {
      return Status::error("tensor '" + tensor.name + "' has the impossible shape " +
                           shape_string(tensor.shape));
    }
    MEMFIT_RETURN_IF_ERROR(
        in.f32s(tensor.data, elements, "the data of tensor '" + tensor.name + "'"));
  }
  if (in.remaining() != 0) {
    return Status::error(std::to_string(in.remaining()) + " bytes follow the last tensor");
  }
  return checkpoint;
}

// Makes the rename itself durable: without it a power loss could bring back the
// old directory entry even though save_checkpoint returned.
Status sync_directory(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0 || ::fsync(fd) != 0) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    return Status::error(file_error(
        path, "saved, but syncing directory " + dir.string() + " failed: " + std::strerror(error)));
  }
  ::close(fd);
  return Status::ok();
}

}  // namespace

Status save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  if (Status valid = validate(checkpoint); !valid.is_ok()) {
    return Status::error(file_error(path, "cannot save: " + valid.message()));
  }
  // The rename would replace a FIFO or a device with a regular file.
  MEMFIT_RETURN_IF_ERROR(check_writable_kind(path, "checkpoint"));
  const std::vector<uint8_t> payload = encode_payload(checkpoint);
  Writer header_writer(kHeaderBytes);
  header_writer.raw(kMagic);
  header_writer.u32(kCheckpointVersion);
  header_writer.u64(payload.size());
  header_writer.u32(crc32_of(payload.data(), payload.size()));
  const std::vector<uint8_t> header = std::move(header_writer).take();

  const std::string temp = path + ".tmp";
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) {
    return Status::error(file_error(path, "cannot create " + temp + ": " + std::strerror(errno) +
                                              "; check that the directory exists and is "
                                              "writable"));
  }
  // Each stage runs only if the previous ones succeeded; errno is kept from
  // the first failure, before fclose or remove can change it.
  const char* failed = nullptr;
  int error = 0;
  const auto stage = [&](bool ok, const char* what) {
    if (failed == nullptr && !ok) {
      failed = what;
      error = errno;
    }
  };
  stage(std::fwrite(header.data(), 1, header.size(), file) == header.size(), "write");
  if (failed == nullptr) {
    stage(std::fwrite(payload.data(), 1, payload.size(), file) == payload.size(), "write");
  }
  if (failed == nullptr) stage(std::fflush(file) == 0, "write");
  // fsync before rename: otherwise the rename may reach the disk before the
  // data, and a crash would leave an empty or torn file under the final name.
  if (failed == nullptr) stage(::fsync(::fileno(file)) == 0, "sync");
  stage(std::fclose(file) == 0, "close");
  if (failed == nullptr) stage(std::rename(temp.c_str(), path.c_str()) == 0, "rename");
  if (failed != nullptr) {
    std::remove(temp.c_str());
    return Status::error(file_error(path, std::string("cannot save: ") + failed + " of " + temp +
                                              " failed: " + std::strerror(error) +
                                              "; any previous checkpoint is unchanged"));
  }
  return sync_directory(path);
}

namespace {

// Reads exactly `size` bytes of `fd` into `out`; false on a read error or
// an early end.
bool read_exactly(int fd, uint8_t* out, size_t size) {
  while (size > 0) {
    const ssize_t got = ::read(fd, out, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out += got;
    size -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace

Result<Checkpoint> load_checkpoint(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) {
    return Status::error(file_error(path, std::string("cannot open: ") + std::strerror(errno)));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    return Status::error(file_error(path, std::string("cannot stat: ") + std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::error(file_error(path, "not a regular file (a FIFO, a device or a "
                                          "directory): a checkpoint is a file memfit wrote"));
  }
  // The header first; the payload's declared length is checked against the
  // file's real size before anything is allocated for it.
  const auto file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < kHeaderBytes) {
    return Status::error(file_error(path, "truncated: " + std::to_string(file_bytes) +
                                              " bytes, shorter than the " +
                                              std::to_string(kHeaderBytes) + "-byte header"));
  }
  std::vector<uint8_t> bytes(kHeaderBytes);
  if (!read_exactly(fd, bytes.data(), kHeaderBytes)) {
    return Status::error(file_error(path, "cannot read its header"));
  }
  if (std::string_view(reinterpret_cast<const char*>(bytes.data()), kMagic.size()) != kMagic) {
    return Status::error(
        file_error(path, "not a memfit checkpoint (its first bytes are not \"MEMFITCK\")"));
  }
  Reader header(bytes.data() + kMagic.size(), kHeaderBytes - kMagic.size());
  MEMFIT_ASSIGN_OR_RETURN(const uint32_t version, header.u32("the version"));
  MEMFIT_ASSIGN_OR_RETURN(const uint64_t payload_bytes, header.u64("the payload length"));
  MEMFIT_ASSIGN_OR_RETURN(const uint32_t stored_crc, header.u32("the checksum"));
  if (version < kOldestCheckpointVersion || version > kCheckpointVersion) {
    return Status::error(file_error(
        path, "format version " + std::to_string(version) + ", but this memfit reads versions " +
                  std::to_string(kOldestCheckpointVersion) + " to " +
                  std::to_string(kCheckpointVersion) + "; load it with the memfit that wrote it"));
  }
  const uint64_t present = file_bytes - kHeaderBytes;
  if (payload_bytes != present) {
    return Status::error(
        file_error(path, std::string(present < payload_bytes ? "truncated" : "corrupt") +
                             ": the header declares " + std::to_string(payload_bytes) +
                             " payload bytes but " + std::to_string(present) + " follow it"));
  }
  std::vector<uint8_t> payload(present);
  if (!read_exactly(fd, payload.data(), present)) {
    return Status::error(file_error(path, "cannot read its " + std::to_string(present) +
                                              " payload bytes (did it change while read?)"));
  }
  const uint32_t crc = crc32_of(payload.data(), present);
  if (crc != stored_crc) {
    return Status::error(file_error(path, "corrupt: the CRC32 of the payload is " +
                                              std::to_string(crc) + " but the header says " +
                                              std::to_string(stored_crc)));
  }
  Reader in(payload.data(), present);
  Result<Checkpoint> checkpoint = decode_payload(in, version);
  if (!checkpoint.is_ok()) {
    return Status::error(file_error(path, "corrupt: " + checkpoint.message()));
  }
  return checkpoint;
}

Result<Checkpoint> decode_checkpoint_payload(std::span<const uint8_t> payload, uint32_t version) {
  Reader in(payload.data(), payload.size());
  return decode_payload(in, version);
}

Status check_matches(const Checkpoint& checkpoint, const std::string& model,
                     const std::vector<std::pair<std::string, Shape>>& expected) {
  if (checkpoint.model != model) {
    return Status::error("the checkpoint is of model '" + checkpoint.model + "', not '" + model +
                         "': resume with the model it was saved from, or start a new run");
  }
  std::unordered_map<std::string_view, const NamedTensor*> saved;
  for (const NamedTensor& tensor : checkpoint.tensors) saved.emplace(tensor.name, &tensor);
  std::vector<std::string> problems;
  std::unordered_set<std::string_view> wanted;
  // Whether a missing or unexpected tensor is an optimizer's state.
  bool optimizer_state = false;
  const auto of_an_optimizer = [](std::string_view name) {
    return name.ends_with(".momentum") || name.ends_with(".adam_m") || name.ends_with(".adam_v");
  };
  for (const auto& [name, shape] : expected) {
    wanted.insert(name);
    const auto it = saved.find(name);
    if (it == saved.end()) {
      optimizer_state = optimizer_state || of_an_optimizer(name);
      problems.push_back("tensor '" + name + "' " + shape_string(shape) + " is missing");
    } else if (it->second->shape != shape) {
      problems.push_back("tensor '" + name + "' has shape " + shape_string(it->second->shape) +
                         " in the checkpoint but " + shape_string(shape) + " in the model");
    }
  }
  for (const NamedTensor& tensor : checkpoint.tensors) {
    if (!wanted.contains(tensor.name)) {
      optimizer_state = optimizer_state || of_an_optimizer(tensor.name);
      problems.push_back("tensor '" + tensor.name + "' " + shape_string(tensor.shape) +
                         " is not in the model");
    }
  }
  if (problems.empty()) return Status::ok();
  std::string message = "the checkpoint does not match model '" + model + "': ";
  for (size_t i = 0; i < problems.size() && i < kMaxListedProblems; ++i) {
    message += (i == 0 ? "" : "; ") + problems[i];
  }
  if (problems.size() > kMaxListedProblems) {
    message += "; and " + std::to_string(problems.size() - kMaxListedProblems) + " more";
  }
  if (optimizer_state) {
    message +=
        " (the checkpoint holds another optimizer's state: resume with the --optimizer "
        "it was saved with)";
  }
  return Status::error(message);
}

Status check_same_run(const Checkpoint& checkpoint, const RunSettings& now) {
  const RunSettings& then = checkpoint.run;
  std::vector<std::string> differences;
  const auto compare = [&](const char* flag, auto saved, auto current) {
    if (saved != current) {
      differences.push_back(std::string(flag) + " " + std::to_string(saved) +
                            " in the checkpoint, " + std::to_string(current) + " now");
    }
  };
  compare("examples per micro-batch (--batch times the ranks)", then.batch, now.batch);
  compare("--accumulate", then.accumulate, now.accumulate);
  compare("training examples per epoch (--limit, the data set)", then.train_examples,
          now.train_examples);
  compare("--epochs", then.epochs, now.epochs);
  if (then.schedule != now.schedule) {
    const auto name = [](int64_t s) {
      return s == 0   ? std::string("constant")
             : s == 1 ? std::string("cosine")
             : s == 2 ? std::string("linear")
                      : "(unknown " + std::to_string(s) + ")";
    };
    differences.push_back("--schedule " + name(then.schedule) + " in the checkpoint, " +
                          name(now.schedule) + " now");
  }
  compare("--seed", then.seed, now.seed);
  if (!then.data.empty() && then.data != now.data) {
    differences.push_back("the training data: " + then.data + " in the checkpoint, " + now.data +
                          " now");
  }
  if (differences.empty()) return Status::ok();
  std::string message =
      "the checkpoint was made in a run with other settings, which its position and "
      "learning-rate schedule depend on: ";
  for (size_t i = 0; i < differences.size(); ++i) message += (i == 0 ? "" : "; ") + differences[i];
  return Status::error(message + "; resume with the settings it was made with, or start a new run");
}

}  // namespace memfit
