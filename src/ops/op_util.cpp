#include "ops/op_util.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace memfit::ops {

Status expect_f32(const TensorType& type, int rank, const char* what) {
  if (type.dtype != DType::f32) {
    return type_error(std::string(what) + " must be f32, got " + std::string(dtype_name(type.dtype)));
  }
  if (rank >= 0 && type.shape.size() != static_cast<size_t>(rank)) {
    return type_error(std::string(what) + " must have rank " + std::to_string(rank) + ", got " +
                      shape_string(type.shape));
  }
  int64_t elements = 1;
  for (int64_t d : type.shape) {
    if (d <= 0) return type_error(std::string(what) + " has a non-positive dimension " + shape_string(type.shape));
    if (d > kMaxElements / elements) {
      return type_error(std::string(what) + " " + shape_string(type.shape) + " has more than 2^48 elements");
    }
    elements *= d;
  }
  return Status::ok();
}

Status expect_window(const Pair& stride, const Pair& pad, const Pair& dilation) {
  for (int i = 0; i < 2; ++i) {
    if (stride[i] < 1 || dilation[i] < 1 || pad[i] < 0) {
      return Status::error("stride and dilation must be positive and pad non-negative");
    }
    if (stride[i] > kMaxElements || dilation[i] > kMaxElements || pad[i] > kMaxElements) {
      return Status::error("stride, pad and dilation must be below 2^48");
    }
  }
  return Status::ok();
}

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return type_error("shapes " + shape_string(a) + " and " + shape_string(b) +
                        " do not broadcast");
    }
    out[i] = std::max(da, db);
  }
  return out;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  auto shape = broadcast_shapes(from, to);
  return shape && *shape == to;
}

Result<int64_t> normalize_axis(int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return type_error("axis " + std::to_string(axis) + " is out of range for rank " +
                      std::to_string(r));
  }
  return axis < 0 ? axis + r : axis;
}

int64_t window_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dilation) {
  const int64_t span = in + 2 * pad - dilation * (k - 1) - 1;
  // Division truncates toward zero: a window larger than the padded input by
  // less than the stride would otherwise count as one output.
  return span < 0 ? 0 : span / stride + 1;
}

Result<Types> same_as_input(const Types& in, const Attrs&) {
  MEMFIT_RETURN_IF_ERROR(expect_f32(in[0], -1, "the input"));
  return Types{in[0]};
}

Result<Types> same_as_all_inputs(const Types& in, const Attrs&) {
  for (size_t i = 0; i < in.size(); ++i) {
    MEMFIT_RETURN_IF_ERROR(expect_f32(in[i], -1, "every input"));
    if (in[i].shape != in[0].shape) {
      return type_error("inputs must have the same shape, got " + shape_string(in[0].shape) +
                        " and " + shape_string(in[i].shape));
    }
  }
  return Types{in[0]};
}

OpInfo new_op(OpKind op) {
  OpInfo info;
  info.op = op;
  return info;
}

TensorType f32(Shape shape) { return TensorType{std::move(shape), DType::f32}; }

OpExample example(std::vector<TensorType> inputs, Attrs attrs) {
  OpExample ex;
  ex.inputs = std::move(inputs);
  ex.attrs = std::move(attrs);
  return ex;
}

int64_t checked_table_row(const Node& node, int64_t id, int64_t position, int64_t rows) {
  if (id < 0 || id >= rows) {
    std::fprintf(stderr,
                 "memfit: node '%s' (%s): id %lld at flat position %lld is outside the "
                 "table's %lld rows; ids must lie in [0, %lld)\n",
                 node.name.c_str(), std::string(op_name(node.op)).c_str(),
                 static_cast<long long>(id), static_cast<long long>(position),
                 static_cast<long long>(rows), static_cast<long long>(rows));
    std::abort();
  }
  return id;
}

}  // namespace memfit::ops
