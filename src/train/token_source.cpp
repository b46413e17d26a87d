// The DataSource of flat token files (token_file_source in data_source.h).
// The files may be far larger than memory: they are mapped read-only with
// MADV_RANDOM, a window is read only when filled, and nothing is copied.
// Ids are checked in the windows filled, not at open (so a token id past the
// vocabulary is an error of fill); opening reads a file whole only for the
// identity's checksum, up to kChecksumLimit, through a small buffer.
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include "core/random.h"
#include "core/text.h"
#include "train/data_source.h"
#include "train/input_ranges.h"
#include "train/mapped_file.h"

namespace memfit {
namespace {

// Streams of the window offsets' draws.
constexpr uint64_t kTrainWindowStream = 0x544F4B454E53ull;  // "TOKENS"
constexpr uint64_t kTestWindowStream = 0x544F4B454E56ull;   // "TOKENV"

// Files up to this size are checksummed for the identity (read once,
// through a small buffer, at about 1 GB/s); larger ones stand for
// themselves by their size and modification time.
constexpr uint64_t kChecksumLimit = uint64_t{1} << 30;

struct TokenSet {
  MappedFile file;
  int64_t tokens = 0;
  int64_t count = 0;  // examples
  std::string checksum = {};
};

// The CRC-32 of a file read in 1 MiB pieces (not through the mapping, whose
// touched pages would count as the process's resident memory).
Result<uint32_t> file_crc(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return Status::error("cannot read token file " + path + ": " + std::strerror(errno));
  std::vector<uint8_t> buffer(size_t{1} << 20);
  uLong crc = crc32_z(0, nullptr, 0);
  size_t got = 0;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), f)) > 0)
    crc = crc32_z(crc, buffer.data(), got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return Status::error("cannot read token file " + path);
  return static_cast<uint32_t>(crc);
}

Result<TokenSet> open_set(const std::string& path, int element_bytes, int64_t window,
                          int64_t limit) {
  TokenSet set;
  MEMFIT_ASSIGN_OR_RETURN(set.file, MappedFile::open(path, "token file"));
  const uint64_t size = set.file.size();
  const char* type = element_bytes == 2 ? "uint16" : "uint32";
  if (size == 0) return Status::error("token file " + path + " is empty");
  if (size % static_cast<uint64_t>(element_bytes) != 0) {
    return Status::error(
        format("token file %s holds %llu bytes, not a whole number of %d-byte (%s) "
               "token ids: was it written with another element size?",
               path.c_str(), static_cast<unsigned long long>(size), element_bytes, type));
  }
  set.tokens = static_cast<int64_t>(size / static_cast<uint64_t>(element_bytes));
  if (set.tokens < window) {
    return Status::error(format(
        "token file %s holds %lld %s tokens, fewer than one window of %lld (the "
        "model's sequence length and the token after it)",
        path.c_str(), static_cast<long long>(set.tokens), type, static_cast<long long>(window)));
  }
  set.count = set.tokens / window;
  if (limit > 0) set.count = std::min(set.count, limit);
  set.file.advise_random();
  if (size <= kChecksumLimit) {
    MEMFIT_ASSIGN_OR_RETURN(const uint32_t crc, file_crc(path));
    set.checksum = format("CRC-32 %08x", crc);
  } else {
    set.checksum = format("%llu bytes, modified at %lld ns", static_cast<unsigned long long>(size),
                          static_cast<long long>(set.file.mtime_ns()));
  }
  return set;
}

class TokenSource final : public DataSource {
 public:
  TokenSource(int64_t seq_len, int element_bytes, IntegerInput tokens, IntegerInput labels,
              uint64_t seed, TokenSet train, std::optional<TokenSet> test)
      : seq_len_(seq_len),
        element_bytes_(element_bytes),
        tokens_(std::move(tokens)),
        labels_(std::move(labels)),
        seed_(seed),
        train_(std::move(train)),
        test_(std::move(test)) {}

  std::string description() const override {
    const char* type = element_bytes_ == 2 ? "uint16" : "uint32";
    return format("%s tokens of %s (%lld windows of %lld)", type, train_.file.path().c_str(),
                  static_cast<long long>(train_.count), static_cast<long long>(seq_len_ + 1)) +
           (test_ ? format(", validation %s (%lld)", test_->file.path().c_str(),
                           static_cast<long long>(test_->count))
                  : std::string(", no validation set"));
  }
  // The windows are a function of the seed, which the checkpoint records
  // apart, and of the files' contents: their CRC-32, or for files past
  // kChecksumLimit their size and modification time.
  std::string identity() const override {
    return description() + " (training " + train_.checksum +
           (test_ ? "; validation " + test_->checksum : std::string()) + ")";
  }
  int64_t train_count() const override { return train_.count; }
  int64_t test_count() const override { return test_ ? test_->count : 0; }

  Status fill(bool test, std::span<const int64_t> examples, Batch& batch) const override {
    if (test && !test_)
      return Status::error(description() + ": there is no validation set to read");
    const TokenSet& set = test ? *test_ : train_;
    Batch::Input* tokens = batch.find("tokens");
    Batch::Input* labels = batch.find("labels");
    if (tokens == nullptr || labels == nullptr || tokens->dtype != DType::i32 ||
        labels->dtype != DType::i32 || tokens->per_example != seq_len_ ||
        labels->per_example != seq_len_ || batch.inputs.size() != 2) {
      return Status::error("the batch does not hold tokens and labels of " +
                           std::to_string(seq_len_) + " positions each, which " + description() +
                           " fills");
    }
    const int64_t positions = set.tokens - seq_len_;
    for (size_t k = 0; k < examples.size(); ++k) {
      const int64_t e = examples[k];
      if (e < 0 || e >= set.count) {
        return Status::error(format("example %lld is not among the %lld of %s",
                                    static_cast<long long>(e), static_cast<long long>(set.count),
                                    set.file.path().c_str()));
      }
      const int64_t offset = token_window_offset(seed_, test, e, positions);
      const int64_t slot = static_cast<int64_t>(k) * seq_len_;
      for (int64_t p = 0; p <= seq_len_; ++p) {
        const uint64_t id = token_at(set, offset + p);
        // Position p is an input for p < seq_len and a label for p > 0.
        for (const IntegerInput* range :
             {p < seq_len_ ? &tokens_ : nullptr, p > 0 ? &labels_ : nullptr}) {
          if (range != nullptr && id >= static_cast<uint64_t>(range->below)) {
            return Status::error(format(
                "token file %s: token id %llu at position %lld (element index in the file) is not "
                "below %lld, %s; write ids below it, or read the file with the "
                "element size it was written with (uint16 or uint32)",
                set.file.path().c_str(), static_cast<unsigned long long>(id),
                static_cast<long long>(offset + p), static_cast<long long>(range->below),
                range->bound.c_str()));
          }
        }
        if (p < seq_len_) tokens->i32[static_cast<size_t>(slot + p)] = static_cast<int32_t>(id);
        if (p > 0) labels->i32[static_cast<size_t>(slot + p - 1)] = static_cast<int32_t>(id);
      }
      // Read once per epoch at most: out of the resident set again.
      set.file.release(static_cast<uint64_t>(offset * element_bytes_),
                       static_cast<uint64_t>((seq_len_ + 1) * element_bytes_));
    }
    return Status::ok();
  }

 private:
  uint64_t token_at(const TokenSet& set, int64_t index) const {
    const uint8_t* p = set.file.bytes().data() + index * element_bytes_;
    if (element_bytes_ == 2) {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }

  int64_t seq_len_;
  int element_bytes_;
  IntegerInput tokens_, labels_;
  uint64_t seed_;
  TokenSet train_;
  std::optional<TokenSet> test_;
};

}  // namespace

int64_t token_window_offset(uint64_t seed, bool test, int64_t example, int64_t positions) {
  const std::array<uint32_t, 4> block = random_block(
      seed, static_cast<uint64_t>(example), test ? kTestWindowStream : kTrainWindowStream, 0);
  const uint64_t draw = static_cast<uint64_t>(block[0]) | static_cast<uint64_t>(block[1]) << 32;
  // The high word of draw * positions: uniform up to a bias below
  // positions / 2^64, which no file reaches in practice.
  return static_cast<int64_t>(
      (static_cast<unsigned __int128>(draw) * static_cast<uint64_t>(positions)) >> 64);
}

Result<std::unique_ptr<DataSource>> token_file_source(const Model& model,
                                                      const std::string& train_path,
                                                      const std::string& test_path,
                                                      int element_bytes, int64_t limit,
                                                      uint64_t seed) {
  if (element_bytes != 2 && element_bytes != 4) {
    return Status::error("token files hold uint16 or uint32 ids (2 or 4 bytes each), not " +
                         std::to_string(element_bytes) + "-byte ones");
  }
  // The form the windows fill: tokens (N, T) and labels (N, T), both i32.
  const Value* tokens = nullptr;
  const Value* labels = nullptr;
  std::string reads;
  for (const ValueId id : model.inputs) {
    const Value& v = model.graph.value(id);
    reads += (reads.empty() ? "" : ", ") + v.name + " " + shape_string(v.type.shape) + " " +
             std::string(dtype_name(v.type.dtype));
    if (v.name == "tokens") tokens = &v;
    if (id == model.labels) labels = &v;
  }
  const auto sequence = [](const Value* v) {
    return v != nullptr && v->type.dtype == DType::i32 && v->type.shape.size() == 2;
  };
  if (model.inputs.size() != 2 || !sequence(tokens) || !sequence(labels) ||
      tokens->type.shape != labels->type.shape || labels->name != "labels") {
    return Status::error(
        "token files feed models whose data inputs are tokens and labels, both "
        "(batch, seq_len) i32 (such as gpt and lstm-lm); model " +
        model.name + " reads " + reads);
  }
  const int64_t seq_len = tokens->type.shape[1];
  IntegerInput token_range, label_range;
  for (IntegerInput& in : integer_inputs(model)) {
    if (in.name == "tokens") token_range = std::move(in);
    if (in.name == "labels") label_range = std::move(in);
  }
  MEMFIT_ASSIGN_OR_RETURN(TokenSet train, open_set(train_path, element_bytes, seq_len + 1, limit));
  std::optional<TokenSet> test;
  if (!test_path.empty()) {
    MEMFIT_ASSIGN_OR_RETURN(TokenSet validation,
                            open_set(test_path, element_bytes, seq_len + 1, limit));
    test = std::move(validation);
  }
  return std::unique_ptr<DataSource>(std::make_unique<TokenSource>(
      seq_len, element_bytes, std::move(token_range), std::move(label_range), seed,
      std::move(train), std::move(test)));
}

}  // namespace memfit
