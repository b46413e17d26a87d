#include "step/graph_dumps.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string_view>
#include <system_error>

#include "core/output_path.h"

namespace memfit {

namespace {

// Whether `name` is a dump's: <graph>-<NN>-<pass>.ir.
bool is_dump_name(std::string_view name) {
  for (std::string_view graph : {"step-", "accumulate-"}) {
    if (!name.starts_with(graph)) continue;
    std::string_view rest = name.substr(graph.size());
    if (rest.size() < 7 || !std::isdigit(static_cast<unsigned char>(rest[0])) ||
        !std::isdigit(static_cast<unsigned char>(rest[1])) || rest[2] != '-' ||
        !rest.ends_with(".ir")) {
      return false;
    }
    const std::string_view pass = rest.substr(3, rest.size() - 6);
    return !pass.empty() && std::all_of(pass.begin(), pass.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || c == '_';
    });
  }
  return false;
}

}  // namespace

Status prepare_dump_dir(const std::string& dir) {
  if (dir.empty()) return Status::error("--dump-graphs needs a directory");
  std::error_code error;
  const auto status = std::filesystem::status(dir, error);
  if (!std::filesystem::exists(status)) {
    std::filesystem::create_directories(dir, error);
    if (error) return Status::error("--dump-graphs " + dir + ": " + error.message());
    return Status::ok();
  }
  if (!std::filesystem::is_directory(status)) {
    return Status::error("--dump-graphs " + dir + ": not a directory");
  }
  // Dumps of an earlier plan would read as passes of this one.
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (!entry.is_regular_file() || !is_dump_name(entry.path().filename().string())) continue;
    std::filesystem::remove(entry.path(), error);
    if (error) return Status::error("--dump-graphs: cannot remove " + entry.path().string() + ": " + error.message());
  }
  if (error) return Status::error("--dump-graphs " + dir + ": " + error.message());
  return Status::ok();
}

AfterPass graph_dumper(std::string dir, std::string graph) {
  auto count = std::make_shared<int>(0);
  return [dir = std::move(dir), graph = std::move(graph), count](std::string_view pass,
                                                                 const Graph& g) -> Status {
    char number[16];
    std::snprintf(number, sizeof number, "%02d", (*count)++);
    const std::string path = dir + "/" + graph + "-" + number + "-" + std::string(pass) + ".ir";
    MEMFIT_RETURN_IF_ERROR(check_writable_kind(path, "--dump-graphs"));
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << print_graph(g);
    out.close();
    if (!out) return Status::error("--dump-graphs: cannot write " + path + ": " + std::strerror(errno));
    return Status::ok();
  };
}

}  // namespace memfit
