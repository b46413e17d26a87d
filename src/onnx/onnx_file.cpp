// Reading an ONNX file with its checks, and writing it back with new weights.
#include "onnx/onnx_import.h"

#ifdef MEMFIT_HAVE_ONNX
#include <google/protobuf/io/coded_stream.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "onnx/host_tensor.h"
#include "onnx/onnx_file.h"
#endif

namespace memfit {

#ifdef MEMFIT_HAVE_ONNX

namespace {

constexpr int64_t kMinOpset = 13, kMaxOpset = 17;
constexpr uintmax_t kMaxOnnxBytes = INT32_MAX;  // protobuf's limit (SetTotalBytesLimit below)

// Why `name` cannot name a tensor, a node, an operator or an attribute, or
// "": ONNX's strings are UTF-8, and memfit's reports (SVG, JSON, the text
// IR) carry names as they are.
std::string name_problem(std::string_view name) {
  for (size_t i = 0; i < name.size();) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) return "holds a control character";
    // Continuation bytes after c, and the range of the first of them (which
    // excludes overlong forms, surrogates and code points past U+10FFFF).
    size_t extra = 0;
    unsigned char low = 0x80, high = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
      extra = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
      extra = 2;
      if (c == 0xe0) low = 0xa0;
      if (c == 0xed) high = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      extra = 3;
      if (c == 0xf0) low = 0x90;
      if (c == 0xf4) high = 0x8f;
    } else if (c >= 0x80) {
      return "is not UTF-8";
    }
    if (name.size() - i - 1 < extra) return "is not UTF-8";
    for (size_t k = 1; k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(name[i + k]);
      if (next < (k == 1 ? low : 0x80) || next > (k == 1 ? high : 0xbf)) return "is not UTF-8";
    }
    // U+FFFE and U+FFFF, which XML (the SVG) does not allow.
    if (c == 0xef && static_cast<unsigned char>(name[i + 1]) == 0xbf &&
        static_cast<unsigned char>(name[i + 2]) >= 0xbe) {
      return "holds U+FFFE or U+FFFF";
    }
    i += extra + 1;
  }
  return "";
}

// The first name in the graph that name_problem refuses, as an error.
Status check_names(const onnx::GraphProto& graph, const std::string& what) {
  const auto check = [&](const std::string& name, const char* of) -> Status {
    const std::string problem = name_problem(name);
    if (problem.empty()) return Status::ok();
    return Status::error(what + ": the name " + quoted_name(name) + " of " + of + " " + problem +
                         "; rename it (names must be UTF-8 text)");
  };
  for (const auto& v : graph.input()) MEMFIT_RETURN_IF_ERROR(check(v.name(), "a graph input"));
  for (const auto& v : graph.output()) MEMFIT_RETURN_IF_ERROR(check(v.name(), "a graph output"));
  for (const auto& v : graph.value_info()) MEMFIT_RETURN_IF_ERROR(check(v.name(), "a value"));
  for (const auto& t : graph.initializer()) {
    MEMFIT_RETURN_IF_ERROR(check(t.name(), "an initializer"));
  }
  for (const auto& node : graph.node()) {
    MEMFIT_RETURN_IF_ERROR(check(node.name(), "a node"));
    MEMFIT_RETURN_IF_ERROR(check(node.op_type(), "an operator"));
    MEMFIT_RETURN_IF_ERROR(check(node.domain(), "a domain"));
    for (const auto& a : node.attribute()) MEMFIT_RETURN_IF_ERROR(check(a.name(), "an attribute"));
    for (const auto& in : node.input()) MEMFIT_RETURN_IF_ERROR(check(in, "a node input"));
    for (const auto& out : node.output()) MEMFIT_RETURN_IF_ERROR(check(out, "a node output"));
  }
  return Status::ok();
}

}  // namespace

Result<std::shared_ptr<const OnnxFile>> parse_onnx(const std::string& bytes, const std::string& what) {
  auto file = std::make_shared<OnnxFile>();
  file->what = what;
  if (bytes.empty()) return Status::error(what + " is empty, not an ONNX model");
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(bytes.size()));
  stream.SetTotalBytesLimit(INT32_MAX);
  if (!file->model.ParseFromCodedStream(&stream) || !stream.ConsumedEntireMessage()) {
    return Status::error(what + " is not a valid ONNX model (truncated or corrupt protobuf)");
  }
  const onnx::ModelProto& m = file->model;
  if (!m.has_graph()) return Status::error(what + " has no graph");
  for (const auto& opset : m.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") file->opset = opset.version();
  }
  if (file->opset == 0) {
    return Status::error(what + " imports no opset of the default ONNX domain");
  }
  if (file->opset < kMinOpset || file->opset > kMaxOpset) {
    return Status::error(what + " uses opset " + std::to_string(file->opset) + "; memfit reads " +
                         std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                         " (export with opset_version=17)");
  }
  if (m.graph().input_size() == 0) return Status::error(what + " has a graph without inputs");
  if (m.graph().output_size() == 0) return Status::error(what + " has a graph without outputs");
  MEMFIT_RETURN_IF_ERROR(check_names(m.graph(), what));
  return std::shared_ptr<const OnnxFile>(std::move(file));
}

Result<std::shared_ptr<const OnnxFile>> read_onnx(const std::string& path) {
  // A FIFO would block the open and a device (/dev/zero) never end: only a
  // regular file, of at most the 2 GiB a protobuf message holds.
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!error && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    return Status::error("ONNX file " + path +
                         " is not a regular file (a directory, a FIFO or a device)");
  }
  if (!error && std::filesystem::is_regular_file(status)) {
    const uintmax_t bytes = std::filesystem::file_size(path, error);
    if (!error && bytes > kMaxOnnxBytes) {
      return Status::error("ONNX file " + path + " is " + std::to_string(bytes) +
                           " bytes, over the 2 GiB a protobuf holds (memfit does not read " +
                           "weights in external data)");
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Status::error("cannot open ONNX file " + path + ": " + std::strerror(errno));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return Status::error("cannot read ONNX file " + path);
  return parse_onnx(bytes.str(), "ONNX file " + path);
}

Status save_onnx(const OnnxFile& file,
                 const std::unordered_map<std::string, std::vector<float>>& state,
                 const std::string& path) {
  onnx::ModelProto model = file.model;
  for (onnx::TensorProto& init : *model.mutable_graph()->mutable_initializer()) {
    const auto it = state.find(init.name());
    if (it == state.end()) continue;
    int64_t elements = 1;
    for (const int64_t d : init.dims()) elements *= d;
    if (static_cast<int64_t>(it->second.size()) != elements) {
      return Status::error("initializer '" + init.name() + "' has " + std::to_string(elements) +
                           " elements, the trained tensor " + std::to_string(it->second.size()));
    }
    set_proto_floats(init, it->second);
  }
  // Weights that are Identity copies of an initializer (exporters write
  // deduplicated initializers so) become initializers of their own.
  onnx::GraphProto& graph = *model.mutable_graph();
  std::unordered_map<std::string, const onnx::TensorProto*> initializers;
  for (const onnx::TensorProto& init : graph.initializer()) initializers[init.name()] = &init;
  std::vector<onnx::TensorProto> copies;
  auto& nodes = *graph.mutable_node();
  for (int k = nodes.size() - 1; k >= 0; --k) {
    const onnx::NodeProto& node = nodes.Get(k);
    if (node.op_type() != "Identity" || node.input_size() != 1 || node.output_size() != 1) continue;
    const auto source = initializers.find(node.input(0));
    const auto trained = state.find(node.output(0));
    if (source == initializers.end() || trained == state.end()) continue;
    onnx::TensorProto copy = *source->second;
    copy.set_name(node.output(0));
    int64_t elements = 1;
    for (const int64_t d : copy.dims()) elements *= d;
    if (static_cast<int64_t>(trained->second.size()) != elements) {
      return Status::error("tensor '" + node.output(0) + "' has " + std::to_string(elements) +
                           " elements, the trained tensor " + std::to_string(trained->second.size()));
    }
    set_proto_floats(copy, trained->second);
    copies.push_back(std::move(copy));
    nodes.DeleteSubrange(k, 1);
  }
  for (onnx::TensorProto& copy : copies) *graph.add_initializer() = std::move(copy);
  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    return Status::error("cannot serialize the model for " + path + " (over 2 GB?)");
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Status::error("cannot write " + path + ": " + std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Status::error("cannot write " + path + ": " + std::strerror(errno));
  return Status::ok();
}

#else  // !MEMFIT_HAVE_ONNX

struct OnnxFile {};

namespace {

Status no_onnx() {
  return Status::error(
      "this memfit was built without ONNX; install libonnx-dev and libprotobuf-dev "
      "(scripts/install-deps.sh) and rebuild");
}

}  // namespace

Result<std::shared_ptr<const OnnxFile>> parse_onnx(const std::string&, const std::string&) {
  return no_onnx();
}
Result<std::shared_ptr<const OnnxFile>> read_onnx(const std::string&) { return no_onnx(); }
Result<Model> import_onnx(const OnnxFile&, const OnnxImport&) { return no_onnx(); }
Status save_onnx(const OnnxFile&, const std::unordered_map<std::string, std::vector<float>>&,
                 const std::string&) {
  return no_onnx();
}

#endif  // MEMFIT_HAVE_ONNX

}  // namespace memfit
