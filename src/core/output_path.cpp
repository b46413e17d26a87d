#include "core/output_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace memfit {
namespace {

std::string kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

Status check_writable_kind(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return Status::ok();  // nothing there yet
  if (S_ISREG(st.st_mode)) return Status::ok();
  return Status::error(what + " " + path + ": it is " + kind_of(st.st_mode) +
                       "; memfit writes only regular files (or a new path)");
}

Status check_output_path(const std::string& path, const std::string& what) {
  if (path.empty()) return Status::error(what + ": the path is empty");
  MEMFIT_RETURN_IF_ERROR(check_writable_kind(path, what));
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    return Status::error(what + " " + path + ": directory " + dir.string() + ": " +
                         std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::error(what + " " + path + ": " + dir.string() + " is not a directory");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Status::error(what + " " + path + ": cannot write into directory " + dir.string() +
                         ": " + std::strerror(errno));
  }
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), W_OK) != 0) {
    return Status::error(what + " " + path + ": " + std::strerror(errno));
  }
  // A directory may pass access() and still take no new file (/proc, /sys):
  // one is made and removed, as the writers make theirs beside the path.
  std::string probe = (dir / ".memfit-probe-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    return Status::error(what + " " + path + ": cannot create a file in directory " + dir.string() +
                         ": " + std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::ok();
}

}  // namespace memfit
