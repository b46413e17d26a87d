// The user's data files as DataSources: numpy arrays (.npy, .npz stored and
// deflated) and flat token files. The files are written here, the .npy bytes
// by hand and the archives with libzip.
#include <gtest/gtest.h>
#include <zip.h>

#include <cstring>
#include <fstream>
#include <set>

#include "memfit/builder.h"
#include "test_util.h"
#include "train/array_file.h"
#include "train/data_source.h"

namespace memfit {
namespace {

using memfit::testing::ScratchDir;

// A .npy file (format version `major`.0) of `descr` and `shape`, followed
// by `data`; its header padded as numpy pads it, to a multiple of 64.
std::string npy(const std::string& descr, const Shape& shape, const std::string& data,
                bool fortran = false, int major = 1) {
  std::string dims;
  for (const int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3,) keeps its comma
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': (" + dims + "), }";
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(major);
  bytes += '\0';
  const auto length = static_cast<uint32_t>(dict.size());
  bytes += static_cast<char>(length & 0xFF);
  bytes += static_cast<char>(length >> 8);
  if (major > 1) bytes += std::string(2, '\0');
  return bytes + dict + data;
}

template <class T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A .npz archive of `members` (name without ".npy", .npy bytes), stored or deflated.
void write_npz(const std::string& path,
               const std::vector<std::pair<std::string, std::string>>& members, bool deflate) {
  int error = 0;
  zip_t* zip = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
  ASSERT_NE(zip, nullptr);
  for (const auto& [name, bytes] : members) {
    zip_source_t* source = zip_source_buffer(zip, bytes.data(), bytes.size(), 0);
    ASSERT_NE(source, nullptr);
    const zip_int64_t index = zip_file_add(zip, (name + ".npy").c_str(), source, ZIP_FL_OVERWRITE);
    ASSERT_GE(index, 0);
    ASSERT_EQ(zip_set_file_compression(zip, static_cast<zip_uint64_t>(index),
                                       deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0),
              0);
  }
  ASSERT_EQ(zip_close(zip), 0);  // reads the members' buffers, still alive here
}

Model model_of(const ModelOptions& options) {
  Result<Model> model = build_model(options, true);
  EXPECT_TRUE(model.is_ok()) << model.message();
  return std::move(model).value();
}

const ModelOptions kLenet = {.name = "lenet", .batch = 4};
const ModelOptions kGpt = {
    .name = "gpt", .batch = 2, .depth = 1, .width = 16, .seq_len = 8, .vocab = 50};

constexpr int64_t kPixels = 28 * 28;

// Lenet's examples: image e holds e + p / 1024 at pixel p (as float64),
// label e is (3 * e) % 10 (as int64).
std::vector<double> images_f8(int64_t count) {
  std::vector<double> v(static_cast<size_t>(count * kPixels));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>(i / kPixels) + (i % kPixels) / 1024.0;
  return v;
}
std::vector<int64_t> labels_i8(int64_t count) {
  std::vector<int64_t> v(static_cast<size_t>(count));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(3 * i % 10);
  return v;
}
std::string images_npy(int64_t count) {
  return npy("<f8", {count, 1, 28, 28}, raw(images_f8(count)));
}
std::string labels_npy(int64_t count) { return npy("<i8", {count}, raw(labels_i8(count))); }

// Fills a batch of `model` with `examples` and checks lenet's values.
void expect_lenet_examples(const DataSource& data, const Model& model, bool test,
                           const std::vector<int64_t>& examples) {
  Batch batch = Batch::for_model(model);
  ASSERT_EQ(batch.batch, static_cast<int64_t>(examples.size()));
  const Status filled = data.fill(test, examples, batch);
  ASSERT_TRUE(filled.is_ok()) << filled.message();
  const Batch::Input* images = batch.find("images");
  const Batch::Input* labels = batch.find("labels");
  for (size_t k = 0; k < examples.size(); ++k) {
    const auto e = static_cast<size_t>(examples[k]);
    for (int64_t p = 0; p < kPixels; p += 97) {
      EXPECT_EQ(
          images->f32[k * kPixels + static_cast<size_t>(p)],
          static_cast<float>(images_f8(examples[k] + 1)[e * kPixels + static_cast<size_t>(p)]));
    }
    EXPECT_EQ(labels->i32[k], static_cast<int32_t>(3 * e % 10));
  }
}

TEST(ArrayFiles, FillConvertsFloat64AndInt64) {
  ScratchDir dir;
  const Model model = model_of(kLenet);
  write_npz(dir.file("train.npz"), {{"images", images_npy(6)}, {"labels", labels_npy(6)}}, false);
  write_npz(dir.file("val.npz"), {{"labels", labels_npy(3)}, {"images", images_npy(3)}}, true);
  auto data = array_file_source(model, dir.file("train.npz"), dir.file("val.npz"));
  ASSERT_TRUE(data.is_ok()) << data.message();
  EXPECT_EQ((*data)->train_count(), 6);
  EXPECT_EQ((*data)->test_count(), 3);
  expect_lenet_examples(**data, model, false, {5, 0, 3, 3});
  expect_lenet_examples(**data, model, true, {2, 1, 0, 2});
  EXPECT_NE((*data)->identity().find("CRC-32"), std::string::npos) << (*data)->identity();

  auto no_validation = array_file_source(model, dir.file("train.npz"), "");
  ASSERT_TRUE(no_validation.is_ok()) << no_validation.message();
  EXPECT_EQ((*no_validation)->test_count(), 0);
  // Other data, another identity.
  write_npz(dir.file("other.npz"), {{"images", images_npy(7)}, {"labels", labels_npy(7)}}, false);
  auto other = array_file_source(model, dir.file("other.npz"), "");
  ASSERT_TRUE(other.is_ok()) << other.message();
  EXPECT_NE((*other)->identity().substr((*other)->identity().find("CRC")),
            (*no_validation)->identity().substr((*no_validation)->identity().find("CRC")));
}

TEST(ArrayFiles, SmallIntegersAndFloat32AndVersion2Headers) {
  ScratchDir dir;
  const Model model = model_of(kLenet);
  std::vector<float> pixels(static_cast<size_t>(4 * kPixels));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) * 0.25f;
  const std::vector<uint8_t> labels = {9, 0, 7, 1};
  write_npz(dir.file("d.npz"),
            {{"images", npy("<f4", {4, 1, 28, 28}, raw(pixels), false, 2)},
             {"labels", npy("|u1", {4}, raw(labels), false, 3)}},
            false);
  auto data = array_file_source(model, dir.file("d.npz"), "");
  ASSERT_TRUE(data.is_ok()) << data.message();
  Batch batch = Batch::for_model(model);
  const std::vector<int64_t> examples = {3, 2, 1, 0};
  ASSERT_TRUE((*data)->fill(false, examples, batch).is_ok());
  EXPECT_EQ(batch.find("labels")->i32, (std::vector<int32_t>{1, 7, 0, 9}));
  EXPECT_EQ(batch.find("images")->f32[kPixels + 5], pixels[2 * kPixels + 5]);
}

TEST(ArrayFiles, StoredMembersAndNpyFilesAreMappedDeflatedOnesDecompressed) {
  ScratchDir dir;
  write_npz(dir.file("stored.npz"), {{"images", images_npy(2)}, {"labels", labels_npy(2)}}, false);
  write_npz(dir.file("deflated.npz"), {{"images", images_npy(2)}, {"labels", labels_npy(2)}}, true);
  write(dir.file("labels.npy"), labels_npy(5));
  for (const auto& [file, mapped] :
       {std::pair{"stored.npz", true}, std::pair{"deflated.npz", false},
        std::pair{"labels.npy", true}}) {
    auto arrays = ArrayFile::open(dir.file(file));
    ASSERT_TRUE(arrays.is_ok()) << arrays.message();
    ASSERT_FALSE(arrays->arrays().empty());
    for (const NpyArray& array : arrays->arrays()) {
      EXPECT_EQ(array.mapped, mapped) << file << " " << array.name;
      if (array.name == "labels" || array.name.empty()) {
        const auto expected = raw(labels_i8(array.header.shape[0]));
        ASSERT_EQ(array.data.size(), expected.size());
        EXPECT_EQ(std::memcmp(array.data.data(), expected.data(), expected.size()), 0);
      }
    }
  }
}

// numpy's own archives: numpy.savez writes zip64 extra fields into its
// local headers, which the offset of a stored member must skip.
TEST(ArrayFiles, ReadsWhatNumpyWrites) {
  ScratchDir dir;
  const std::string script =
      "import numpy as np; np.savez('" + dir.file("np.npz") +
      "', images=np.arange(3*784, dtype='<f8').reshape(3, 1, 28, 28) / 7, "
      "labels=np.array([4, 9, 0], dtype='<i4')); np.savez_compressed('" +
      dir.file("npc.npz") +
      "', images=np.ones((3, 1, 28, 28), '<f4'), labels=np.array([1, 2, 3], '<u2'))";
  // Debian's python3 (python3-numpy), or another one on the PATH.
  if (std::system(("/usr/bin/python3 -c \"" + script + "\" 2>/dev/null").c_str()) != 0 &&
      std::system(("python3 -c \"" + script + "\" 2>/dev/null").c_str()) != 0) {
    GTEST_SKIP() << "no python3 with numpy";
  }
  const Model model = model_of(kLenet);
  auto data = array_file_source(model, dir.file("np.npz"), dir.file("npc.npz"));
  ASSERT_TRUE(data.is_ok()) << data.message();
  auto arrays = ArrayFile::open(dir.file("np.npz"));
  ASSERT_TRUE(arrays.is_ok());
  for (const NpyArray& array : arrays->arrays()) EXPECT_TRUE(array.mapped);
  Batch batch = Batch::for_model(model);
  const std::vector<int64_t> examples = {2, 1, 0, 2};
  ASSERT_TRUE((*data)->fill(false, examples, batch).is_ok());
  EXPECT_EQ(batch.find("labels")->i32, (std::vector<int32_t>{0, 9, 4, 0}));
  EXPECT_EQ(batch.find("images")->f32[5], static_cast<float>((2 * 784 + 5) / 7.0));
  ASSERT_TRUE((*data)->fill(true, examples, batch).is_ok());
  EXPECT_EQ(batch.find("labels")->i32, (std::vector<int32_t>{3, 2, 1, 3}));
}

// The message of opening `train` for `options`' model; empty if it opened.
std::string open_error(const ModelOptions& options, const std::string& train) {
  auto data = array_file_source(model_of(options), train, "");
  return data.is_ok() ? std::string() : data.message();
}

void expect_contains(const std::string& message, const std::vector<std::string>& parts) {
  EXPECT_FALSE(message.empty());
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
  }
}

TEST(ArrayFiles, BadArchivesSayWhatIsWrong) {
  ScratchDir dir;
  const std::string f = dir.file("bad.npz");
  const auto with = [&](std::vector<std::pair<std::string, std::string>> members) {
    write_npz(f, members, false);
    return open_error(kLenet, f);
  };
  expect_contains(with({{"images", images_npy(6)}}),
                  {f, "no array 'labels'", "images (N, 1, 28, 28) f32, labels (N) i32"});
  expect_contains(
      with({{"images", images_npy(6)}, {"labels", labels_npy(6)}, {"extra", labels_npy(6)}}),
      {f, "array 'extra' (6,) int64", "does not read"});
  expect_contains(with({{"images", images_npy(6)}, {"labels", labels_npy(5)}}),
                  {f, "'images' (6, 1, 28, 28) float64 and 'labels' (5,) int64",
                   "different numbers of examples"});
  expect_contains(
      with({{"images", npy("<f8", {6, 1, 28, 27}, raw(std::vector<double>(6 * 28 * 27)))},
            {"labels", labels_npy(6)}}),
      {f, "array 'images' is (6, 1, 28, 27) float64", "(N, 1, 28, 28) f32",
       "one example must be (1, 28, 28), not (1, 28, 27)"});
  expect_contains(
      with({{"images", images_npy(6)}, {"labels", npy("<f4", {6}, raw(std::vector<float>(6)))}}),
      {f, "array 'labels' is (6,) float32", "(N) i32", "save integers"});
  expect_contains(with({{"images", npy("|u1", {6, 1, 28, 28}, std::string(6 * kPixels, '\1'))},
                        {"labels", labels_npy(6)}}),
                  {f, "array 'images' is (6, 1, 28, 28) uint8", "save floats"});
  std::vector<int64_t> labels = labels_i8(6);
  labels[4] = 10;
  expect_contains(
      with({{"images", images_npy(6)}, {"labels", npy("<i8", {6}, raw(labels))}}),
      {f, "array 'labels'", "value 10 at flat position 4", "outside [0, 10)", "10 classes"});
  labels[4] = -1;
  expect_contains(with({{"images", images_npy(6)}, {"labels", npy("<i8", {6}, raw(labels))}}),
                  {"value -1 at flat position 4"});
  expect_contains(with({{"images", images_npy(0)}, {"labels", labels_npy(0)}}),
                  {f, "array 'images' (0, 1, 28, 28) float64 holds no examples"});
  std::string cut = labels_npy(6);
  cut.resize(cut.size() - 3);
  expect_contains(
      with({{"images", images_npy(6)}, {"labels", cut}}),
      {f, "array 'labels'", "(6,) int64 (48 bytes of data) but 45 bytes follow it (truncated)"});
  expect_contains(
      with({{"images", images_npy(6)}, {"labels", npy("<i8", {6}, raw(labels_i8(6)), true)}}),
      {f, "array 'labels'", "Fortran"});
  expect_contains(with({{"images", images_npy(6)}, {"labels", npy(">i8", {6}, raw(labels_i8(6)))}}),
                  {f, "array 'labels'", "big-endian int64"});
  expect_contains(
      with({{"images", images_npy(6)}, {"labels", npy("|O", {6}, std::string(48, '\0'))}}),
      {f, "array 'labels'", "object array"});
  expect_contains(
      with({{"images", images_npy(6)}, {"labels", npy("|b1", {6}, std::string(6, '\0'))}}),
      {f, "array 'labels'", "boolean"});
  expect_contains(with({{"images", images_npy(6)}, {"labels", "not an array"}}),
                  {f, "array 'labels'", "not a .npy array"});

  // Token ids past the vocabulary (gpt: 50 rows of its embedding table).
  const Model gpt = model_of(kGpt);
  std::vector<int32_t> tokens(3 * 8, 7);
  tokens[13] = 50;
  write_npz(f,
            {{"tokens", npy("<i4", {3, 8}, raw(tokens))},
             {"labels", npy("<i4", {3, 8}, raw(std::vector<int32_t>(24, 1)))}},
            false);
  expect_contains(open_error(kGpt, f),
                  {f, "array 'tokens'", "value 50 at flat position 13 (example 1)",
                   "outside [0, 50)", "embedding table"});
}

TEST(ArrayFiles, BadFilesSayWhatIsWrong) {
  ScratchDir dir;
  write(dir.file("text.npz"), "images,labels\n1,2\n");
  expect_contains(open_error(kLenet, dir.file("text.npz")),
                  {dir.file("text.npz"), "neither a .npy array"});
  write(dir.file("empty.npz"), "");
  expect_contains(open_error(kLenet, dir.file("empty.npz")), {"neither", "it is empty"});
  expect_contains(open_error(kLenet, dir.file("missing.npz")),
                  {"cannot open", dir.file("missing.npz")});
  write(dir.file("broken.npz"), std::string("PK\x03\x04", 4) + std::string(100, 'x'));
  expect_contains(open_error(kLenet, dir.file("broken.npz")), {dir.file("broken.npz"), "damaged"});
  // A stored archive cut short.
  write_npz(dir.file("whole.npz"), {{"images", images_npy(6)}, {"labels", labels_npy(6)}}, false);
  std::ifstream in(dir.file("whole.npz"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  write(dir.file("cut.npz"), bytes.substr(0, bytes.size() / 2));
  expect_contains(open_error(kLenet, dir.file("cut.npz")), {dir.file("cut.npz"), "damaged"});
  // A .npy file cut short, and one alone for a model of two inputs.
  std::string labels = labels_npy(6);
  write(dir.file("cut.npy"), labels.substr(0, labels.size() - 8));
  expect_contains(
      open_error(kLenet, dir.file("cut.npy")),
      {dir.file("cut.npy"), "(6,) int64 (48 bytes of data) but 40 bytes follow it (truncated)"});
  write(dir.file("labels.npy"), labels);
  expect_contains(open_error(kLenet, dir.file("labels.npy")),
                  {dir.file("labels.npy"), "single .npy array", "2 data inputs", ".npz",
                   "numpy.savez('data.npz', images=..., labels=...)"});
}

// Token files: gpt at seq_len 8 reads windows of 9 tokens.
constexpr int64_t kSeq = 8;

std::vector<uint16_t> token_ids(size_t count) {
  std::vector<uint16_t> ids(count);
  for (size_t i = 0; i < count; ++i) ids[i] = static_cast<uint16_t>((i * 7 + i / 50) % 50);
  return ids;
}

TEST(TokenFiles, WindowsAreTheFilesSlicesAtSeededOffsets) {
  ScratchDir dir;
  const Model model = model_of(kGpt);
  const std::vector<uint16_t> ids = token_ids(1000);
  write(dir.file("train.u16"), raw(ids));
  std::vector<uint32_t> wide(ids.begin(), ids.begin() + 400);
  write(dir.file("val.u32"), raw(wide));
  auto data = token_file_source(model, dir.file("train.u16"), "", 2, 0, 11);
  ASSERT_TRUE(data.is_ok()) << data.message();
  EXPECT_EQ((*data)->train_count(), 1000 / 9);
  EXPECT_EQ((*data)->test_count(), 0);
  auto limited = token_file_source(model, dir.file("train.u16"), "", 2, 20, 11);
  ASSERT_TRUE(limited.is_ok()) << limited.message();
  EXPECT_EQ((*limited)->train_count(), 20);

  Batch batch = Batch::for_model(model);
  const std::vector<int64_t> examples = {100, 3};
  ASSERT_TRUE((*data)->fill(false, examples, batch).is_ok());
  for (size_t k = 0; k < examples.size(); ++k) {
    const int64_t offset = token_window_offset(11, false, examples[k], 1000 - kSeq);
    EXPECT_GE(offset, 0);
    EXPECT_LE(offset, 1000 - kSeq - 1);
    for (int64_t p = 0; p < kSeq; ++p) {
      EXPECT_EQ(batch.find("tokens")->i32[k * kSeq + p], ids[static_cast<size_t>(offset + p)]);
      EXPECT_EQ(batch.find("labels")->i32[k * kSeq + p], ids[static_cast<size_t>(offset + p + 1)]);
    }
  }

  // uint32 validation windows, from their own stream.
  auto wide_data = token_file_source(model, dir.file("val.u32"), dir.file("val.u32"), 4, 0, 11);
  ASSERT_TRUE(wide_data.is_ok()) << wide_data.message();
  EXPECT_EQ((*wide_data)->test_count(), 400 / 9);
  const std::vector<int64_t> first = {0, 1};
  ASSERT_TRUE((*wide_data)->fill(true, first, batch).is_ok());
  const int64_t offset = token_window_offset(11, true, 1, 400 - kSeq);
  EXPECT_EQ(batch.find("tokens")->i32[kSeq], wide[static_cast<size_t>(offset)]);
  EXPECT_EQ(batch.find("labels")->i32[2 * kSeq - 1], wide[static_cast<size_t>(offset + kSeq)]);
}

TEST(TokenFiles, OffsetsArePureFunctionsOfSeedAndExample) {
  std::set<int64_t> seen;
  int differ_by_seed = 0, differ_by_set = 0;
  for (int64_t e = 0; e < 200; ++e) {
    const int64_t a = token_window_offset(5, false, e, 1000000);
    EXPECT_EQ(a, token_window_offset(5, false, e, 1000000));
    differ_by_seed += a != token_window_offset(6, false, e, 1000000);
    differ_by_set += a != token_window_offset(5, true, e, 1000000);
    seen.insert(a);
  }
  EXPECT_GT(differ_by_seed, 190);
  EXPECT_GT(differ_by_set, 190);
  EXPECT_GT(seen.size(), 190u);
  // The same seed, the same windows; another seed, other ones.
  ScratchDir dir;
  write(dir.file("t.u16"), raw(token_ids(5000)));
  const Model model = model_of(kGpt);
  const auto tokens_of = [&](uint64_t seed) {
    auto data = token_file_source(model, dir.file("t.u16"), "", 2, 0, seed);
    EXPECT_TRUE(data.is_ok()) << data.message();
    Batch batch = Batch::for_model(model);
    const std::vector<int64_t> examples = {7, 300};
    EXPECT_TRUE((*data)->fill(false, examples, batch).is_ok());
    return batch.find("tokens")->i32;
  };
  EXPECT_EQ(tokens_of(1), tokens_of(1));
  EXPECT_NE(tokens_of(1), tokens_of(2));
}

TEST(TokenFiles, BadFilesAndModelsSayWhatIsWrong) {
  ScratchDir dir;
  const Model gpt = model_of(kGpt);
  const auto error = [&](const std::string& file, int bytes) {
    auto data = token_file_source(gpt, dir.file(file), "", bytes, 0, 1);
    return data.is_ok() ? std::string() : data.message();
  };
  // One window exactly: its offset is 0. Id 60 at element 5 is a token.
  std::vector<uint16_t> window = {1, 2, 3, 4, 5, 60, 7, 8, 9};
  write(dir.file("one.u16"), raw(window));
  auto data = token_file_source(gpt, dir.file("one.u16"), "", 2, 0, 1);
  ASSERT_TRUE(data.is_ok()) << data.message();
  EXPECT_EQ((*data)->train_count(), 1);
  Batch batch = Batch::for_model(gpt);
  const std::vector<int64_t> zero = {0, 0};
  const Status filled = (*data)->fill(false, zero, batch);
  expect_contains(filled.message(), {dir.file("one.u16"), "token id 60 at position 5",
                                     "not below 50", "embedding table"});
  // The last token is only a label: below the 50 classes of the logits.
  window = {1, 2, 3, 4, 5, 6, 7, 8, 50};
  write(dir.file("one.u16"), raw(window));
  data = token_file_source(gpt, dir.file("one.u16"), "", 2, 0, 1);
  ASSERT_TRUE(data.is_ok()) << data.message();
  expect_contains((*data)->fill(false, zero, batch).message(),
                  {"token id 50 at position 8", "the 50 classes of model gpt's logits"});

  write(dir.file("odd.u16"), std::string(19, '\1'));
  expect_contains(error("odd.u16", 2),
                  {dir.file("odd.u16"), "19 bytes", "not a whole number of 2-byte (uint16)"});
  write(dir.file("empty.u16"), "");
  expect_contains(error("empty.u16", 2), {dir.file("empty.u16"), "is empty"});
  write(dir.file("short.u32"), raw(std::vector<uint32_t>(8, 1)));
  expect_contains(error("short.u32", 4),
                  {dir.file("short.u32"), "8 uint32 tokens", "fewer than one window of 9"});
  expect_contains(error("missing.u16", 2), {"cannot open", dir.file("missing.u16")});
  expect_contains(error("short.u32", 3), {"uint16 or uint32"});
  auto lenet = token_file_source(model_of(kLenet), dir.file("short.u32"), "", 4, 0, 1);
  ASSERT_FALSE(lenet.is_ok());
  expect_contains(lenet.message(), {"tokens and labels", "model lenet reads images"});
}

}  // namespace
}  // namespace memfit
