// The parsed ONNX file behind OnnxFile (only src/onnx/ sees its protobuf).
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

#include "onnx/onnx_import.h"

namespace memfit {

struct OnnxFile {
  onnx::ModelProto model;
  std::string what;    // the file, for messages
  int64_t opset = 0;   // of the default domain
};

}  // namespace memfit
