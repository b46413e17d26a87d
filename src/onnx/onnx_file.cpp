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

#include "onnx/host_tensor.h"
#include "onnx/onnx_file.h"
#endif

namespace memfit {

#ifdef MEMFIT_HAVE_ONNX

namespace {

constexpr int64_t kMinOpset = 13, kMaxOpset = 17;
constexpr uintmax_t kMaxOnnxBytes = INT32_MAX;  // protobuf's limit (SetTotalBytesLimit below)

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
