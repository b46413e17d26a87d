// check_output_path (src/core/output_path.h): what memfit may write to,
// checked before a run starts.
#include "core/output_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"

namespace memfit {
namespace {

void expect_refused(const std::string& path, const std::string& reason) {
  const Status status = check_output_path(path, "--save");
  ASSERT_FALSE(status.is_ok()) << path;
  EXPECT_NE(status.message().find("--save " + path), std::string::npos) << status.message();
  EXPECT_NE(status.message().find(reason), std::string::npos) << status.message();
}

TEST(OutputPath, AcceptsANewPathOrARegularFile) {
  testing::ScratchDir dir;
  EXPECT_TRUE(check_output_path(dir.file("new.ckpt"), "--save").is_ok());
  std::ofstream(dir.file("old.ckpt")) << "x";
  EXPECT_TRUE(check_output_path(dir.file("old.ckpt"), "--save").is_ok());
}

TEST(OutputPath, RefusesMissingDirectoriesAndWhatIsNotARegularFile) {
  testing::ScratchDir dir;
  expect_refused(dir.file("nodir/ck.bin"), "No such file or directory");
  std::ofstream(dir.file("plain")) << "x";
  expect_refused(dir.file("plain/ck.bin"), "is not a directory");
  expect_refused(dir.file(""), "it is a directory");
  ASSERT_EQ(::mkfifo(dir.file("fifo").c_str(), 0600), 0);
  expect_refused(dir.file("fifo"), "it is a FIFO");
  expect_refused("/dev/null", "it is a character device");
  EXPECT_FALSE(check_output_path("", "--save").is_ok());
}

// /proc passes access(W_OK) for root but takes no new file: the check makes
// one, and leaves nothing behind where it can.
TEST(OutputPath, RefusesADirectoryThatTakesNoNewFile) {
  expect_refused("/proc/ck.bin", "cannot create a file in directory /proc");
  testing::ScratchDir dir;
  ASSERT_TRUE(check_output_path(dir.file("ck.bin"), "--save").is_ok());
  EXPECT_TRUE(std::filesystem::is_empty(dir.file("")));
}

}  // namespace
}  // namespace memfit
