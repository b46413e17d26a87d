// A caller's arrays against a model's inputs (src/train/user_batch.h): the
// shapes, element types and ranges check_arrays refuses, each message naming
// the input; and write_arrays converting any integer or float type into the
// step's i32 and f32 buffers.
#include "train/user_batch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "memfit/builder.h"

namespace memfit {
namespace {

Model gpt_small(int64_t batch) {
  auto model = build_model(
      {.name = "gpt", .batch = batch, .depth = 1, .width = 16, .seq_len = 4, .vocab = 12}, true);
  EXPECT_TRUE(model.is_ok()) << model.message();
  return std::move(*model);
}

TEST(UserBatch, TokenModelsTakeIdsBelowTheVocabulary) {
  const Model model = gpt_small(2);
  const std::vector<InputSpec> specs = input_specs(model);
  ASSERT_EQ(specs.size(), 2u);
  EXPECT_EQ(specs[0].dtype, DType::i32);
  EXPECT_EQ(specs[0].example, Shape({4}));
  EXPECT_EQ(specs[0].below, 12);
  EXPECT_TRUE(specs[1].label);

  std::vector<int64_t> tokens = {0, 1, 2, 11, 3, 4, 5, 6, 7, 8, 9, 10};  // 3 rows
  std::vector<uint8_t> labels(12, 3);
  std::vector<HostArray> arrays = {
      {specs[0].name, ElementKind::i64, "int64", {3, 4}, tokens.data()},
      {specs[1].name, ElementKind::u8, "uint8", {3, 4}, labels.data()}};
  auto rows = check_arrays(specs, arrays, false);
  ASSERT_TRUE(rows.is_ok()) << rows.message();
  EXPECT_EQ(*rows, 3);

  Batch batch = Batch::for_model(gpt_small(3));
  ASSERT_TRUE(write_arrays(arrays, batch).is_ok());
  EXPECT_EQ(batch.find(specs[0].name)->i32[3], 11);
  EXPECT_EQ(batch.find(specs[1].name)->i32[11], 3);

  tokens[5] = 12;
  rows = check_arrays(specs, arrays, false);
  ASSERT_FALSE(rows.is_ok());
  EXPECT_NE(rows.message().find("input '" + specs[0].name + "': element 5 is 12, outside [0, 12)"),
            std::string::npos)
      << rows.message();
}

TEST(UserBatch, RefusalsNameTheInput) {
  const std::vector<InputSpec> specs = input_specs(gpt_small(2));
  std::vector<int32_t> tokens(8, 1);
  std::vector<float> floats(8, 1.0f);
  const std::string name = specs[0].name, labels = specs[1].name;
  const auto refused = [&](std::vector<HostArray> arrays, const std::string& expected,
                           bool labels_optional = false) {
    auto rows = check_arrays(specs, arrays, labels_optional);
    ASSERT_FALSE(rows.is_ok());
    EXPECT_NE(rows.message().find(expected), std::string::npos) << rows.message();
  };
  refused({{name, ElementKind::i32, "int32", {2, 4}, tokens.data()}},
          "'" + labels + "' is missing");
  refused({{name, ElementKind::f32, "float32", {2, 4}, floats.data()},
           {labels, ElementKind::i32, "int32", {2, 4}, tokens.data()}},
          "'" + name + "' holds float32");
  refused({{name, ElementKind::i32, "int32", {4, 2}, tokens.data()},
           {labels, ElementKind::i32, "int32", {2, 4}, tokens.data()}},
          "'" + name + "' has shape (4, 2); the model takes (N, 4)");
  refused({{name, ElementKind::i32, "int32", {2, 4}, tokens.data()},
           {labels, ElementKind::i32, "int32", {1, 4}, tokens.data()}},
          "'" + labels + "' has 1 rows");
  refused({{name, ElementKind::i32, "int32", {2, 4}, tokens.data()},
           {"other", ElementKind::i32, "int32", {2, 4}, tokens.data()}},
          "'other' is not an input of the model");
  refused({{name, ElementKind::other, "bool", {2, 4}, tokens.data()}}, "holds bool", true);
  auto rows = check_arrays(specs, {{name, ElementKind::i32, "int32", {2, 4}, tokens.data()}}, true);
  EXPECT_TRUE(rows.is_ok()) << rows.message();
}

}  // namespace
}  // namespace memfit
