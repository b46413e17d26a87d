#include "onnx/model_source.h"

#include <sys/stat.h>

#include <mutex>

#include "onnx/onnx_import.h"

namespace memfit {
namespace {

// The ONNX file at `path`, parsed once and kept while it is unchanged.
Result<std::shared_ptr<const OnnxFile>> cached_onnx(const std::string& path) {
  struct Entry {
    std::string path;
    int64_t size = -1, mtime = -1;
    std::shared_ptr<const OnnxFile> file;
  };
  static std::mutex mutex;
  static Entry last;
  struct stat st {};
  const bool stated = ::stat(path.c_str(), &st) == 0;
  const int64_t size = stated ? static_cast<int64_t>(st.st_size) : -1;
  const int64_t mtime = stated ? static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec : -1;
  std::lock_guard<std::mutex> lock(mutex);
  if (stated && last.file && last.path == path && last.size == size && last.mtime == mtime) {
    return last.file;
  }
  MEMFIT_ASSIGN_OR_RETURN(std::shared_ptr<const OnnxFile> file, read_onnx(path));
  last = Entry{path, size, mtime, file};
  return file;
}

// Errors for zoo size options given with an ONNX model.
Status check_onnx_options(const ModelOptions& o) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"--image-size", o.image_size}, {"--classes", o.classes}, {"--depth", o.depth},
      {"--width", o.width},           {"--seq-len", o.seq_len}, {"--volume", o.volume},
      {"--vocab", o.vocab}};
  for (const auto& [flag, value] : sizes) {
    if (value != 0) {
      return Status::error(std::string(flag) +
                           " sizes a zoo model; an ONNX model's sizes are those of its file");
    }
  }
  return Status::ok();
}

}  // namespace

Result<Model> make_model(const ModelOptions& options, bool training) {
  if (options.onnx.empty()) {
    if (!options.loss.empty()) {
      return Status::error("--loss applies to ONNX models; a zoo model has its own loss");
    }
    return build_model(options, training);
  }
  MEMFIT_RETURN_IF_ERROR(check_onnx_options(options));
  MEMFIT_ASSIGN_OR_RETURN(std::shared_ptr<const OnnxFile> file, cached_onnx(options.onnx));
  OnnxImport import;
  import.batch = options.batch;
  import.training = training;
  import.dropout = options.dropout;
  import.loss = options.loss.empty() ? "cross-entropy" : options.loss;
  import.name = options.name;
  return import_onnx(*file, import);
}

Result<DataKind> model_data_kind(const ModelOptions& options, const Model& model) {
  if (options.onnx.empty()) {
    MEMFIT_ASSIGN_OR_RETURN(const ModelInfo info, model_info(options.name));
    return info.data;
  }
  for (const ValueId id : model.inputs) {
    const Value& v = model.graph.value(id);
    if (v.name == "images") return DataKind::images;
    if (v.name == "tokens") return DataKind::tokens;
  }
  return Status::error("model " + options.name +
                       " reads neither (N, C, S, S) f32 images nor (N, T) integer tokens, the "
                       "data memfit's data sets provide");
}

Status save_trained_onnx(const ModelOptions& options,
                         const std::unordered_map<std::string, std::vector<float>>& state,
                         const std::string& path) {
  if (options.onnx.empty()) return Status::error("--save-onnx needs a model from --onnx");
  MEMFIT_ASSIGN_OR_RETURN(std::shared_ptr<const OnnxFile> file, cached_onnx(options.onnx));
  return save_onnx(*file, state, path);
}

Result<int64_t> model_parameter_count(const ModelOptions& options) {
  if (options.onnx.empty()) return parameter_count(options);
  ModelOptions one = options;
  one.batch = 1;
  MEMFIT_ASSIGN_OR_RETURN(const Model model, make_model(one, false));
  int64_t count = 0;
  for (const ValueId p : model.params) count += model.graph.value(p).elements();
  return count;
}

}  // namespace memfit
