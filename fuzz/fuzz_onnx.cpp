// libFuzzer target: the ONNX reader and importer (src/onnx/). The input is
// the bytes of a .onnx file for parse_onnx; a file that parses is imported
// at batch 2 for training and for evaluation. Either gives a model or an
// error, never a crash.
#include <cstdint>
#include <string>

#include "onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto file = memfit::parse_onnx(bytes, "fuzz.onnx");
  if (!file) return 0;
  for (const bool training : {true, false}) {
    memfit::OnnxImport options;
    options.batch = 2;
    options.training = training;
    (void)memfit::import_onnx(**file, options);
  }
  return 0;
}
