#include "onnx/shape_rules.h"

#include <string>

namespace memfit {

namespace {

// Dimensions beyond this are refused before their products can overflow.
constexpr int64_t kLargestDimension = int64_t{1} << 40;

}  // namespace

Result<int64_t> onnx_axis(int64_t axis, size_t rank) {
  const auto r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) {
    return Status::error("axis " + std::to_string(axis) + " is out of range for rank " +
                         std::to_string(r));
  }
  return axis < 0 ? axis + r : axis;
}

Result<Shape> reshape_target(const Shape& in, const std::vector<int64_t>& spec, bool allowzero) {
  Shape shape = spec;
  int64_t known = 1, infer = -1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 && !allowzero) {
      if (d >= in.size()) return Status::error("a 0 in the shape has no input dimension to copy");
      shape[d] = in[d];
    }
    if (shape[d] == -1 && infer < 0) {
      infer = static_cast<int64_t>(d);
    } else if (shape[d] < 0) {
      return Status::error("the shape " + shape_string(spec) + " has a negative dimension or two -1");
    } else if (shape[d] > kLargestDimension || known > kLargestDimension) {
      return Status::error("the shape " + shape_string(spec) + " is too large");
    } else {
      known *= shape[d];
    }
  }
  const int64_t elements = num_elements(in);
  if (infer >= 0) {
    if (known == 0 || elements % known != 0) {
      return Status::error("cannot infer the -1 of " + shape_string(spec) + " for " + shape_string(in));
    }
    shape[static_cast<size_t>(infer)] = elements / known;
  }
  if (num_elements(shape) != elements) {
    return Status::error("shape " + shape_string(spec) + " does not hold the " +
                         std::to_string(elements) + " elements of " + shape_string(in) +
                         " (a batch fixed in the exported graph? export with a dynamic batch axis)");
  }
  return shape;
}

Result<Shape> flatten_target(const Shape& in, int64_t axis) {
  const auto rank = static_cast<int64_t>(in.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return Status::error("axis out of range");
  const int64_t rows = num_elements(Shape(in.begin(), in.begin() + axis));
  return Shape{rows, rows == 0 ? 0 : num_elements(in) / rows};
}

Result<Shape> squeeze_target(const Shape& in, const std::vector<int64_t>& axes, bool unsqueeze) {
  const size_t rank = in.size() + (unsqueeze ? axes.size() : 0);
  std::vector<bool> marked(rank, false);
  for (const int64_t a : axes) {
    MEMFIT_ASSIGN_OR_RETURN(const int64_t n, onnx_axis(a, rank));
    if (marked[static_cast<size_t>(n)]) return Status::error("axis " + std::to_string(a) + " is repeated");
    marked[static_cast<size_t>(n)] = true;
  }
  Shape shape;
  size_t src = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (unsqueeze) {
      shape.push_back(marked[d] ? 1 : in[src++]);
    } else if (axes.empty() ? in[d] != 1 : !marked[d]) {
      shape.push_back(in[d]);
    } else if (in[d] != 1) {
      return Status::error("squeezes dimension " + std::to_string(d) + " of " + shape_string(in) +
                           ", which is not 1");
    }
  }
  return shape;
}

}  // namespace memfit
