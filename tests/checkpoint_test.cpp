#include "train/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <bit>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "test_util.h"

namespace memfit {
namespace {

namespace fs = std::filesystem;

std::vector<char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

Checkpoint make_checkpoint(int64_t values_in_weight = 18) {
  Checkpoint checkpoint;
  checkpoint.model = "lenet";
  checkpoint.epoch = 3;
  checkpoint.micro_step = 1234567890123;
  checkpoint.optimizer_step = -5;
  checkpoint.run = {
      64, 2, 60000, 3, 1, 0xFEDCBA9876543210ull, "Fashion-MNIST (training set CRC-32 0123abcd)"};
  NamedTensor weight{"conv1.weight", {values_in_weight / 9, 1, 3, 3}, {}};
  for (int64_t i = 0; i < values_in_weight; ++i) {
    weight.data.push_back(static_cast<float>(i) * 0.37f - 2.0f);
  }
  // Values whose bits a sloppy format would change.
  weight.data[0] = -0.0f;
  weight.data[1] = std::numeric_limits<float>::infinity();
  weight.data[2] = std::numeric_limits<float>::quiet_NaN();
  weight.data[3] = std::numeric_limits<float>::denorm_min();
  checkpoint.tensors.push_back(weight);
  checkpoint.tensors.push_back({"fc.bias", {4}, {1.5f, -2.25f, 3.0f, 1e-30f}});
  checkpoint.tensors.push_back({"adamw.step_scale", {}, {0.125f}});
  checkpoint.tensors.push_back({"empty", {0, 5}, {}});
  return checkpoint;
}

void expect_identical(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.micro_step, b.micro_step);
  EXPECT_EQ(a.optimizer_step, b.optimizer_step);
  EXPECT_TRUE(a.run == b.run);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t t = 0; t < a.tensors.size(); ++t) {
    EXPECT_EQ(a.tensors[t].name, b.tensors[t].name);
    EXPECT_EQ(a.tensors[t].shape, b.tensors[t].shape);
    ASSERT_EQ(a.tensors[t].data.size(), b.tensors[t].data.size());
    for (size_t i = 0; i < a.tensors[t].data.size(); ++i) {
      EXPECT_EQ(std::bit_cast<uint32_t>(a.tensors[t].data[i]),
                std::bit_cast<uint32_t>(b.tensors[t].data[i]))
          << a.tensors[t].name << "[" << i << "]";
    }
  }
}

// A file with a valid header and CRC around `payload`, as a hostile or buggy
// writer could produce.
std::vector<char> file_with_payload(const std::vector<uint8_t>& payload,
                                    uint32_t version = kCheckpointVersion) {
  std::vector<char> bytes = {'M', 'E', 'M', 'F', 'I', 'T', 'C', 'K'};
  const auto append = [&](uint64_t v, int size) {
    for (int i = 0; i < size; ++i) bytes.push_back(static_cast<char>(v >> (8 * i)));
  };
  append(version, 4);
  append(payload.size(), 8);
  append(crc32_z(0, payload.data(), payload.size()), 4);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return bytes;
}

void expect_error(const Result<Checkpoint>& result, const std::string& path,
                  const std::string& problem) {
  ASSERT_FALSE(result.is_ok());
  EXPECT_NE(result.message().find(path), std::string::npos) << result.message();
  EXPECT_NE(result.message().find(problem), std::string::npos) << result.message();
}

TEST(Checkpoint, RoundTripsExactly) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  const Checkpoint saved = make_checkpoint();
  ASSERT_TRUE(save_checkpoint(path, saved).is_ok());
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  Result<Checkpoint> loaded = load_checkpoint(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  expect_identical(*loaded, saved);
  // Saving again replaces the file.
  Checkpoint next = saved;
  next.epoch = 4;
  next.tensors[1].data[0] = 9.0f;
  ASSERT_TRUE(save_checkpoint(path, next).is_ok());
  loaded = load_checkpoint(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  expect_identical(*loaded, next);
}

TEST(Checkpoint, MissingFileIsAnError) {
  testing::ScratchDir dir;
  expect_error(load_checkpoint(dir.file("absent.ckpt")), dir.file("absent.ckpt"), "cannot open");
}

TEST(Checkpoint, EveryTruncationIsAnError) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  ASSERT_TRUE(save_checkpoint(path, make_checkpoint()).is_ok());
  const std::vector<char> bytes = read_bytes(path);
  for (size_t length = 0; length < bytes.size(); ++length) {
    write_bytes(path, std::vector<char>(bytes.begin(), bytes.begin() + length));
    expect_error(load_checkpoint(path), path, "truncated");
  }
}

TEST(Checkpoint, FlippedPayloadByteIsACrcError) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  ASSERT_TRUE(save_checkpoint(path, make_checkpoint()).is_ok());
  std::vector<char> bytes = read_bytes(path);
  bytes[bytes.size() - 3] ^= 0x10;
  write_bytes(path, bytes);
  expect_error(load_checkpoint(path), path, "CRC32");
}

TEST(Checkpoint, NoFlippedByteLoads) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  ASSERT_TRUE(save_checkpoint(path, make_checkpoint()).is_ok());
  const std::vector<char> bytes = read_bytes(path);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<char> flipped = bytes;
    flipped[i] ^= 0x01;
    write_bytes(path, flipped);
    EXPECT_FALSE(load_checkpoint(path).is_ok()) << "byte " << i;
  }
}

TEST(Checkpoint, WrongMagicIsAnError) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  ASSERT_TRUE(save_checkpoint(path, make_checkpoint()).is_ok());
  std::vector<char> bytes = read_bytes(path);
  std::memcpy(bytes.data(), "PK\3\4", 4);
  write_bytes(path, bytes);
  expect_error(load_checkpoint(path), path, "not a memfit checkpoint");
}

TEST(Checkpoint, WrongVersionIsAnError) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  ASSERT_TRUE(save_checkpoint(path, make_checkpoint()).is_ok());
  std::vector<char> bytes = read_bytes(path);
  for (const char version : {4, 1}) {
    bytes[8] = version;  // the version follows the 8 magic bytes
    write_bytes(path, bytes);
    expect_error(
        load_checkpoint(path), path,
        "format version " + std::to_string(version) + ", but this memfit reads versions 2 to 3");
  }
}

// Builds payloads by hand, little-endian like the writer.
class Payload {
 public:
  // The model name, the three counters and the six numeric run settings,
  // the data (from version 3 on), then the tensor count.
  explicit Payload(uint32_t tensors, uint32_t version = kCheckpointVersion) {
    text("lenet");
    for (int i = 0; i < 3 + 6; ++i) i64(0);
    if (version >= 3) text("synthetic images (10 classes)");
    u32(tensors);
  }
  Payload& u32(uint32_t v) { return little_endian(v, 4); }
  Payload& i64(int64_t v) { return little_endian(static_cast<uint64_t>(v), 8); }
  Payload& text(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  Payload& little_endian(uint64_t v, int size) {
    uint8_t buffer[8];
    for (int i = 0; i < size; ++i) buffer[i] = static_cast<uint8_t>(v >> (8 * i));
    bytes_.insert(bytes_.end(), buffer, buffer + size);
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

TEST(Checkpoint, AbsurdLengthsBehindAValidCrcAreErrors) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  const std::pair<Payload, const char*> cases[] = {
      {Payload(0xFFFFFFFFu), "declares 4294967295 tensors"},
      {Payload(1).u32(0xFFFFFFF0u).u32(0), "ends inside a tensor name"},
      {Payload(1).text("w").u32(0xFFFFFFFFu), "declares rank 4294967295"},
      {Payload(1).text("w").u32(2).i64(int64_t{1} << 40).i64(int64_t{1} << 40), "impossible shape"},
      {Payload(1).text("w").u32(1).i64(-4), "impossible shape"},
      // 4 TiB of data that is not there: rejected before anything is allocated.
      {Payload(1).text("w").u32(1).i64(int64_t{1} << 40), "ends inside the data of tensor 'w'"},
      {Payload(1).text("w").u32(1).i64(2).u32(0), "ends inside the data of tensor 'w'"},
      {Payload(1).text("w").u32(0).u32(0).u32(7), "4 bytes follow the last tensor"},
  };
  for (const auto& [payload, problem] : cases) {
    write_bytes(path, file_with_payload(payload.bytes()));
    expect_error(load_checkpoint(path), path, problem);
  }
  write_bytes(path, file_with_payload(Payload(1).text("w").u32(0).u32(0x3F800000u).bytes()));
  Result<Checkpoint> scalar = load_checkpoint(path);
  ASSERT_TRUE(scalar.is_ok()) << scalar.message();
  EXPECT_EQ(scalar->model, "lenet");
  ASSERT_EQ(scalar->tensors.size(), 1u);
  EXPECT_EQ(scalar->tensors[0].data, std::vector<float>{1.0f});
}

// A version 2 file (before the data was recorded) still loads, with the data
// empty, which check_same_run does not compare; read as version 3 the same
// bytes are an error, not a checkpoint.
TEST(Checkpoint, VersionTwoLoadsWithoutTheData) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  const Payload old = Payload(1, 2).text("w").u32(0).u32(0x3F800000u);
  write_bytes(path, file_with_payload(old.bytes(), 2));
  Result<Checkpoint> loaded = load_checkpoint(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  EXPECT_EQ(loaded->run.data, "");
  ASSERT_EQ(loaded->tensors.size(), 1u);
  EXPECT_EQ(loaded->tensors[0].data, std::vector<float>{1.0f});
  RunSettings now = loaded->run;
  now.data = "Fashion-MNIST (training set CRC-32 0123abcd)";
  EXPECT_TRUE(check_same_run(*loaded, now).is_ok());
  write_bytes(path, file_with_payload(old.bytes(), 3));
  EXPECT_FALSE(load_checkpoint(path).is_ok());
  write_bytes(path, file_with_payload(Payload(1).text("w").u32(0).u32(0x3F800000u).bytes()));
  Result<Checkpoint> current = load_checkpoint(path);
  ASSERT_TRUE(current.is_ok()) << current.message();
  EXPECT_EQ(current->run.data, "synthetic images (10 classes)");
}

TEST(Checkpoint, SaveIntoAMissingDirectoryFailsCleanly) {
  testing::ScratchDir dir;
  const std::string path = dir.file("no_such_dir/model.ckpt");
  const Status status = save_checkpoint(path, make_checkpoint());
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find(path), std::string::npos) << status.message();
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_FALSE(fs::exists(path));
}

// Only a regular file or a new path is written: a directory or a FIFO where
// the checkpoint should go is refused before anything is written, and stays.
TEST(Checkpoint, SaveOntoWhatIsNotARegularFileIsRefused) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  fs::create_directory(path);
  Status status = save_checkpoint(path, make_checkpoint());
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("it is a directory"), std::string::npos) << status.message();
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_TRUE(fs::is_directory(path));
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  status = save_checkpoint(fifo, make_checkpoint());
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("it is a FIFO"), std::string::npos) << status.message();
  EXPECT_TRUE(fs::is_fifo(fifo));
}

// Loading checks the kind of file and the declared length against the
// file's size before it reads: a device or a FIFO is refused at once (never
// read until memory runs out, never waited on).
TEST(Checkpoint, LoadRefusesWhatIsNotARegularFile) {
  testing::ScratchDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {std::string("/dev/zero"), fifo, dir.file("")}) {
    expect_error(load_checkpoint(path), path, "not a regular file");
  }
}

TEST(Checkpoint, FailedWriteLeavesTheOldCheckpoint) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  const Checkpoint old = make_checkpoint();
  ASSERT_TRUE(save_checkpoint(path, old).is_ok());
  const std::vector<char> old_bytes = read_bytes(path);
  // A file size limit below the new checkpoint's size makes its write fail
  // half way (EFBIG instead of SIGXFSZ while the signal is ignored).
  rlimit saved_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  const auto saved_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved_limit;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const Status status = save_checkpoint(path, make_checkpoint(9 * 100000));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  std::signal(SIGXFSZ, saved_handler);
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("unchanged"), std::string::npos) << status.message();
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(read_bytes(path), old_bytes);
  Result<Checkpoint> loaded = load_checkpoint(path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.message();
  expect_identical(*loaded, old);
}

TEST(Checkpoint, InvalidCheckpointIsNotSaved) {
  testing::ScratchDir dir;
  const std::string path = dir.file("model.ckpt");
  Checkpoint wrong_size = make_checkpoint();
  wrong_size.tensors[1].data.pop_back();
  Status status = save_checkpoint(path, wrong_size);
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("'fc.bias' has 3 values"), std::string::npos) << status.message();
  Checkpoint duplicate = make_checkpoint();
  duplicate.tensors.push_back(duplicate.tensors[0]);
  status = save_checkpoint(path, duplicate);
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("two tensors are named 'conv1.weight'"), std::string::npos)
      << status.message();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

std::vector<std::pair<std::string, Shape>> expected_tensors() {
  // The checkpoint's tensors in another order: order does not matter.
  return {{"fc.bias", {4}},
          {"empty", {0, 5}},
          {"conv1.weight", {2, 1, 3, 3}},
          {"adamw.step_scale", {}}};
}

TEST(CheckMatches, AcceptsTheSameTensorsInAnyOrder) {
  const Status status = check_matches(make_checkpoint(), "lenet", expected_tensors());
  EXPECT_TRUE(status.is_ok()) << status.message();
}

// A resume with settings the checkpoint's position depends on changed is
// refused, naming each one with both values.
TEST(CheckSameRun, NamesEverySettingThatDiffers) {
  const Checkpoint checkpoint = make_checkpoint();
  EXPECT_TRUE(check_same_run(checkpoint, checkpoint.run).is_ok());
  RunSettings now = checkpoint.run;
  now.batch = 32;
  now.train_examples = 1000;
  now.schedule = 0;
  const Status status = check_same_run(checkpoint, now);
  ASSERT_FALSE(status.is_ok());
  for (const char* part : {"examples per micro-batch (--batch times the ranks) 64 in the "
                           "checkpoint, 32 now",
                           "(--limit, the data set) 60000 in the checkpoint, 1000 now",
                           "--schedule cosine in the checkpoint, constant now"}) {
    EXPECT_NE(status.message().find(part), std::string::npos) << status.message();
  }
  EXPECT_EQ(status.message().find("--accumulate"), std::string::npos) << status.message();
  EXPECT_EQ(status.message().find("--seed"), std::string::npos) << status.message();
  now = checkpoint.run;
  now.epochs = 30;
  now.seed = 1;
  const Status other = check_same_run(checkpoint, now);
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.message().find("--epochs 3 in the checkpoint, 30 now"), std::string::npos);
  EXPECT_NE(other.message().find("--seed"), std::string::npos);
  now = checkpoint.run;
  now.data = "synthetic images (10 classes)";
  const Status data = check_same_run(checkpoint, now);
  ASSERT_FALSE(data.is_ok());
  EXPECT_NE(data.message().find("the training data: Fashion-MNIST (training set CRC-32 0123abcd) "
                                "in the checkpoint, synthetic images (10 classes) now"),
            std::string::npos)
      << data.message();
}

TEST(CheckMatches, RejectsAnotherModel) {
  const Status status = check_matches(make_checkpoint(), "resnet18", expected_tensors());
  ASSERT_FALSE(status.is_ok());
  EXPECT_NE(status.message().find("'lenet', not 'resnet18'"), std::string::npos)
      << status.message();
}

TEST(CheckMatches, NamesMissingExtraAndMisshapenTensors) {
  std::vector<std::pair<std::string, Shape>> expected = expected_tensors();
  expected[0].second = {5};                      // fc.bias: shape differs
  expected[1] = {"conv2.weight", {4, 2, 3, 3}};  // missing; "empty" becomes extra
  const Status status = check_matches(make_checkpoint(), "lenet", expected);
  ASSERT_FALSE(status.is_ok());
  const std::string& message = status.message();
  EXPECT_NE(message.find("'fc.bias' has shape " + shape_string({4}) + " in the checkpoint but " +
                         shape_string({5}) + " in the model"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("'conv2.weight' " + shape_string({4, 2, 3, 3}) + " is missing"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("'empty' " + shape_string({0, 5}) + " is not in the model"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace memfit
