// Reading and writing ONNX tensor protos.
#ifdef MEMFIT_HAVE_ONNX
#include "onnx/host_tensor.h"

#include <onnx/onnx_pb.h>

#include <cstring>

namespace memfit {

std::vector<int64_t> HostTensor::integers() const {
  std::vector<int64_t> out(static_cast<size_t>(elements()));
  for (size_t k = 0; k < out.size(); ++k) out[k] = integer(k);
  return out;
}

HostTensor HostTensor::floats(Shape shape, std::vector<float> values) {
  HostTensor t;
  t.type = Type::f32;
  t.shape = std::move(shape);
  t.f = std::move(values);
  return t;
}

HostTensor HostTensor::ints(Shape shape, std::vector<int64_t> values, Type type) {
  HostTensor t;
  t.type = type;
  t.shape = std::move(shape);
  t.i = std::move(values);
  return t;
}

namespace {

// Little-endian elements of `bytes` bytes each from raw_data, converted to T.
template <class Stored, class T>
std::vector<T> from_raw(const std::string& raw, size_t count) {
  std::vector<T> out(count);
  for (size_t k = 0; k < count; ++k) {
    Stored v;
    std::memcpy(&v, raw.data() + k * sizeof(Stored), sizeof(Stored));
    out[k] = static_cast<T>(v);
  }
  return out;
}

}  // namespace

Result<HostTensor> tensor_from_proto(const onnx::TensorProto& proto) {
  const std::string what = "tensor '" + proto.name() + "'";
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    return Status::error(what + " keeps its data in an external file; save the model with all "
                                "its tensors in the .onnx file");
  }
  HostTensor t;
  int64_t count = 1;
  for (const int64_t d : proto.dims()) {
    if (d < 0 || d > (int64_t{1} << 40)) {
      return Status::error(what + " has a dimension of " + std::to_string(d));
    }
    t.shape.push_back(d);
    if (d != 0 && count > (int64_t{1} << 34) / d) return Status::error(what + " has too many elements");
    count *= d;
  }
  const auto n = static_cast<size_t>(count);
  const std::string& raw = proto.raw_data();
  const bool has_raw = proto.has_raw_data();
  auto check_count = [&](size_t got) -> Status {
    if (got == n) return Status::ok();
    return Status::error(what + " holds " + std::to_string(got) + " elements, but its dims " +
                         shape_string(t.shape) + " say " + std::to_string(n));
  };
  auto check_raw = [&](size_t element_bytes) -> Status {
    return check_count(raw.size() % element_bytes == 0 ? raw.size() / element_bytes : n + 1);
  };
  switch (proto.data_type()) {
    case onnx::TensorProto::FLOAT:
      t.type = HostTensor::Type::f32;
      if (has_raw) {
        MEMFIT_RETURN_IF_ERROR(check_raw(4));
        t.f = from_raw<float, float>(raw, n);
      } else {
        MEMFIT_RETURN_IF_ERROR(check_count(static_cast<size_t>(proto.float_data_size())));
        t.f.assign(proto.float_data().begin(), proto.float_data().end());
      }
      return t;
    case onnx::TensorProto::DOUBLE:
      t.type = HostTensor::Type::f32;
      if (has_raw) {
        MEMFIT_RETURN_IF_ERROR(check_raw(8));
        t.f = from_raw<double, float>(raw, n);
      } else {
        MEMFIT_RETURN_IF_ERROR(check_count(static_cast<size_t>(proto.double_data_size())));
        for (const double v : proto.double_data()) t.f.push_back(static_cast<float>(v));
      }
      return t;
    case onnx::TensorProto::INT64:
      t.type = HostTensor::Type::i64;
      if (has_raw) {
        MEMFIT_RETURN_IF_ERROR(check_raw(8));
        t.i = from_raw<int64_t, int64_t>(raw, n);
      } else {
        MEMFIT_RETURN_IF_ERROR(check_count(static_cast<size_t>(proto.int64_data_size())));
        t.i.assign(proto.int64_data().begin(), proto.int64_data().end());
      }
      return t;
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL: {
      const bool boolean = proto.data_type() == onnx::TensorProto::BOOL;
      t.type = boolean ? HostTensor::Type::boolean : HostTensor::Type::i64;
      if (has_raw) {
        switch (proto.data_type()) {
          case onnx::TensorProto::INT32:
            MEMFIT_RETURN_IF_ERROR(check_raw(4));
            t.i = from_raw<int32_t, int64_t>(raw, n);
            break;
          case onnx::TensorProto::INT16:
            MEMFIT_RETURN_IF_ERROR(check_raw(2));
            t.i = from_raw<int16_t, int64_t>(raw, n);
            break;
          case onnx::TensorProto::INT8:
            MEMFIT_RETURN_IF_ERROR(check_raw(1));
            t.i = from_raw<int8_t, int64_t>(raw, n);
            break;
          default:
            MEMFIT_RETURN_IF_ERROR(check_raw(1));
            t.i = from_raw<uint8_t, int64_t>(raw, n);
            break;
        }
      } else {
        MEMFIT_RETURN_IF_ERROR(check_count(static_cast<size_t>(proto.int32_data_size())));
        t.i.assign(proto.int32_data().begin(), proto.int32_data().end());
      }
      if (boolean) {
        for (int64_t& v : t.i) v = v != 0;
      }
      return t;
    }
    default:
      return Status::error(what + " has element type " + std::to_string(proto.data_type()) + " (" +
                           onnx::TensorProto::DataType_Name(proto.data_type()) +
                           "); memfit reads FLOAT, DOUBLE, integer and BOOL tensors");
  }
}

void set_proto_floats(onnx::TensorProto& proto, const std::vector<float>& values) {
  proto.clear_float_data();
  proto.clear_double_data();
  proto.set_data_type(onnx::TensorProto::FLOAT);
  std::string raw(values.size() * sizeof(float), '\0');
  std::memcpy(raw.data(), values.data(), raw.size());
  proto.set_raw_data(std::move(raw));
}

}  // namespace memfit
#endif  // MEMFIT_HAVE_ONNX
