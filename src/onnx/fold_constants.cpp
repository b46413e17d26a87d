// Constant folding at import: the shape arithmetic exporters write for
// dynamic shapes (Shape, Gather, Concat, Unsqueeze, Range, ...) computed now,
// since every shape is static once the batch is set. A node folds when every
// input it reads is known and none is a weight (a weight's transpose, say,
// must stay in the graph, which trains the weight).
#ifdef MEMFIT_HAVE_ONNX
#include <cmath>
#include <numeric>

#include "onnx/import_context.h"
#include "onnx/shape_rules.h"
#include "ops/op_util.h"

namespace memfit {
namespace {

using T = HostTensor;

// Tensors above this many elements are not folded (a guard against files
// whose constants would take the machine's memory).
constexpr int64_t kMaxFoldElements = int64_t{1} << 24;

Result<int64_t> axis_in(ImportContext& ctx, int64_t axis, size_t rank) {
  auto a = onnx_axis(axis, rank);
  if (!a) return ctx.error(a.message());
  return *a;
}

std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// The element of `t` that position `index` of a broadcast to `out` reads.
size_t broadcast_source(const T& t, const Shape& out, int64_t index) {
  const std::vector<int64_t> out_strides = strides_of(out);
  const std::vector<int64_t> in_strides = strides_of(t.shape);
  const size_t offset = out.size() - t.shape.size();
  int64_t src = 0;
  for (size_t d = 0; d < out.size(); ++d) {
    const int64_t coord = index / out_strides[d] % out[d];
    if (d >= offset && t.shape[d - offset] != 1) src += coord * in_strides[d - offset];
  }
  return static_cast<size_t>(src);
}

// A copy of element `k` of `from` into element `j` of `to` (same type).
void copy_element(const T& from, size_t k, T& to, size_t j) {
  if (from.is_float()) {
    to.f[j] = from.f[k];
  } else {
    to.i[j] = from.i[k];
  }
}

T empty_like(const T& t, Shape shape) {
  T out;
  out.type = t.type;
  const auto n = static_cast<size_t>(num_elements(shape));
  out.shape = std::move(shape);
  if (out.is_float()) {
    out.f.assign(n, 0.0f);
  } else {
    out.i.assign(n, 0);
  }
  return out;
}

Result<T> check_size(ImportContext& ctx, const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) return ctx.error("a folded tensor would have a negative dimension");
  }
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > kMaxFoldElements / d) return ctx.error("a folded tensor would be too large");
    n *= d;
  }
  return T{};
}

enum class Arith { add, sub, mul, div, pow, equal, less, greater };

Result<T> binary(ImportContext& ctx, const T& a, const T& b, Arith op) {
  auto out_shape = ops::broadcast_shapes(a.shape, b.shape);
  if (!out_shape) return ctx.error(out_shape.message());
  MEMFIT_RETURN_IF_ERROR(check_size(ctx, *out_shape).status());
  const bool compare = op == Arith::equal || op == Arith::less || op == Arith::greater;
  const bool floats = a.is_float() || b.is_float();
  T out;
  out.shape = *out_shape;
  out.type = compare ? T::Type::boolean : floats ? T::Type::f32 : T::Type::i64;
  const int64_t n = num_elements(out.shape);
  for (int64_t k = 0; k < n; ++k) {
    const size_t ka = broadcast_source(a, out.shape, k), kb = broadcast_source(b, out.shape, k);
    if (floats || compare) {
      const double x = a.number(ka), y = b.number(kb);
      double r = 0;
      switch (op) {
        case Arith::add: r = x + y; break;
        case Arith::sub: r = x - y; break;
        case Arith::mul: r = x * y; break;
        case Arith::div: r = x / y; break;
        case Arith::pow: r = std::pow(x, y); break;
        case Arith::equal: r = x == y; break;
        case Arith::less: r = x < y; break;
        case Arith::greater: r = x > y; break;
      }
      if (compare) {
        out.i.push_back(r != 0);
      } else {
        out.f.push_back(static_cast<float>(r));
      }
    } else {
      const int64_t x = a.i[ka], y = b.i[kb];
      int64_t r = 0;
      switch (op) {
        case Arith::add: r = static_cast<int64_t>(static_cast<uint64_t>(x) + static_cast<uint64_t>(y)); break;
        case Arith::sub: r = static_cast<int64_t>(static_cast<uint64_t>(x) - static_cast<uint64_t>(y)); break;
        case Arith::mul: r = static_cast<int64_t>(static_cast<uint64_t>(x) * static_cast<uint64_t>(y)); break;
        case Arith::div:
          if (y == 0 || (x == INT64_MIN && y == -1)) return ctx.error("integer division by zero");
          r = x / y;
          if ((x % y != 0) && ((x < 0) != (y < 0))) --r;  // floor, as numpy
          break;
        case Arith::pow: {
          const double p = std::pow(static_cast<double>(x), static_cast<double>(y));
          if (!(std::abs(p) < 9.2e18)) return ctx.error("an integer power overflows");
          r = static_cast<int64_t>(p);
          break;
        }
        default: break;
      }
      out.i.push_back(r);
    }
  }
  return out;
}

// `t` with the shape Reshape's rule gives for `spec`.
Result<T> reshaped(ImportContext& ctx, T t, const std::vector<int64_t>& spec, bool allowzero) {
  auto shape = reshape_target(t.shape, spec, allowzero);
  if (!shape) return ctx.error(shape.message());
  t.shape = *shape;
  return t;
}

// Gather along `axis` with integer indices.
Result<T> gather(ImportContext& ctx, const T& data, const T& indices, int64_t axis_attr) {
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, axis_in(ctx, axis_attr, data.shape.size()));
  if (indices.is_float()) return ctx.error("Gather indices must be integers");
  Shape shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  MEMFIT_RETURN_IF_ERROR(check_size(ctx, shape).status());
  T out = empty_like(data, shape);
  const int64_t outer = num_elements(Shape(data.shape.begin(), data.shape.begin() + axis));
  const int64_t inner = num_elements(Shape(data.shape.begin() + axis + 1, data.shape.end()));
  const int64_t dim = data.shape[static_cast<size_t>(axis)];
  const int64_t count = indices.elements();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < count; ++k) {
      int64_t index = indices.i[static_cast<size_t>(k)];
      if (index < 0) index += dim;
      if (index < 0 || index >= dim) return ctx.error("Gather index out of range");
      for (int64_t in = 0; in < inner; ++in) {
        copy_element(data, static_cast<size_t>((o * dim + index) * inner + in), out,
                     static_cast<size_t>((o * count + k) * inner + in));
      }
    }
  }
  return out;
}

// Slice with steps: starts, ends, axes, steps as ONNX defines them (clamped).
Result<T> slice(ImportContext& ctx, const T& data, std::vector<int64_t> starts,
                std::vector<int64_t> ends, std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const size_t rank = data.shape.size();
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return ctx.error("starts, ends, axes and steps differ in length");
  }
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  Shape shape = data.shape;
  for (size_t k = 0; k < starts.size(); ++k) {
    MEMFIT_ASSIGN_OR_RETURN(const int64_t a, axis_in(ctx, axes[k], rank));
    const int64_t dim = data.shape[static_cast<size_t>(a)];
    if (steps[k] == 0) return ctx.error("a slice step is 0");
    // A step longer than the dimension takes one element, as any such step does.
    steps[k] = std::clamp<int64_t>(steps[k], -(dim + 1), dim + 1);
    auto clamp = [&](int64_t v, bool forward) {
      if (v < 0) v += dim;
      return forward ? std::clamp<int64_t>(v, 0, dim) : std::clamp<int64_t>(v, -1, dim - 1);
    };
    const bool forward = steps[k] > 0;
    const int64_t s = clamp(starts[k], forward), e = clamp(ends[k], forward);
    const int64_t n = forward ? std::max<int64_t>(0, (e - s + steps[k] - 1) / steps[k])
                              : std::max<int64_t>(0, (s - e - steps[k] - 1) / -steps[k]);
    begin[static_cast<size_t>(a)] = s;
    step[static_cast<size_t>(a)] = steps[k];
    shape[static_cast<size_t>(a)] = n;
  }
  T out = empty_like(data, shape);
  const std::vector<int64_t> out_strides = strides_of(shape), in_strides = strides_of(data.shape);
  for (int64_t k = 0; k < out.elements(); ++k) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t coord = k / out_strides[d] % shape[d];
      src += (begin[d] + coord * step[d]) * in_strides[d];
    }
    copy_element(data, static_cast<size_t>(src), out, static_cast<size_t>(k));
  }
  return out;
}

Result<T> concat(ImportContext& ctx, const std::vector<T>& parts, int64_t axis_attr) {
  const T& first = parts.at(0);
  MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, axis_in(ctx, axis_attr, first.shape.size()));
  Shape shape = first.shape;
  shape[static_cast<size_t>(axis)] = 0;
  for (const T& p : parts) {
    if (p.shape.size() != first.shape.size() || p.is_float() != first.is_float()) {
      return ctx.error("Concat inputs differ in rank or type");
    }
    for (size_t d = 0; d < shape.size(); ++d) {
      if (static_cast<int64_t>(d) != axis && p.shape[d] != first.shape[d]) {
        return ctx.error("Concat inputs differ outside the axis");
      }
    }
    shape[static_cast<size_t>(axis)] += p.shape[static_cast<size_t>(axis)];
  }
  T out = empty_like(first, shape);
  const int64_t outer = num_elements(Shape(shape.begin(), shape.begin() + axis));
  size_t j = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const T& p : parts) {
      const int64_t chunk = p.elements() / std::max<int64_t>(outer, 1);
      for (int64_t k = 0; k < chunk; ++k) copy_element(p, static_cast<size_t>(o * chunk + k), out, j++);
    }
  }
  return out;
}

Result<T> transpose(ImportContext& ctx, const T& t, std::vector<int64_t> perm) {
  const size_t rank = t.shape.size();
  if (perm.empty()) {
    for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  }
  if (perm.size() != rank) return ctx.error("perm has the wrong length");
  Shape shape(rank);
  std::vector<bool> seen(rank, false);
  for (size_t d = 0; d < rank; ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(perm[d])]) {
      return ctx.error("perm is not a permutation");
    }
    seen[static_cast<size_t>(perm[d])] = true;
    shape[d] = t.shape[static_cast<size_t>(perm[d])];
  }
  T out = empty_like(t, shape);
  const std::vector<int64_t> out_strides = strides_of(shape), in_strides = strides_of(t.shape);
  for (int64_t k = 0; k < out.elements(); ++k) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) {
      src += (k / out_strides[d] % shape[d]) * in_strides[static_cast<size_t>(perm[d])];
    }
    copy_element(t, static_cast<size_t>(src), out, static_cast<size_t>(k));
  }
  return out;
}

// The element type ONNX `to` names, as a HostTensor holds it.
Result<T> cast(ImportContext& ctx, const T& t, int64_t to) {
  T out;
  out.shape = t.shape;
  switch (to) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::DOUBLE:
      out.type = T::Type::f32;
      for (size_t k = 0; k < static_cast<size_t>(t.elements()); ++k) {
        out.f.push_back(static_cast<float>(t.number(k)));
      }
      return out;
    case onnx::TensorProto::INT64:
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::BOOL:
      out.type = to == onnx::TensorProto::BOOL ? T::Type::boolean : T::Type::i64;
      for (size_t k = 0; k < static_cast<size_t>(t.elements()); ++k) {
        const double v = t.number(k);
        if (!(std::abs(v) < 9.2e18)) return ctx.error("a cast to an integer overflows");
        out.i.push_back(to == onnx::TensorProto::BOOL ? v != 0 : static_cast<int64_t>(v));
      }
      return out;
    default:
      return ctx.error("Cast to element type " + std::to_string(to) + " is not supported");
  }
}

Result<std::vector<T>> known_inputs(ImportContext& ctx) {
  std::vector<T> in;
  for (int i = 0; i < ctx.inputs(); ++i) {
    if (!ctx.has_input(i)) {
      in.emplace_back();
      in.back().shape = {0};
      continue;
    }
    MEMFIT_ASSIGN_OR_RETURN(T t, ctx.constant(i));
    in.push_back(std::move(t));
  }
  return in;
}

Result<T> unary_float(ImportContext& ctx, const T& t, double (*fn)(double)) {
  if (!t.is_float()) return ctx.error("a float operator on an integer tensor");
  T out = t;
  for (float& v : out.f) v = static_cast<float>(fn(v));
  return out;
}

}  // namespace

Result<bool> fold_constants(ImportContext& ctx) {
  const onnx::NodeProto& node = ctx.node();
  const std::string& op = node.op_type();
  if (op == "Shape") {
    if (!ctx.has_input(0)) return ctx.error("Shape has no input");
    MEMFIT_ASSIGN_OR_RETURN(const Shape shape, ctx.shape(0));
    const auto rank = static_cast<int64_t>(shape.size());
    MEMFIT_ASSIGN_OR_RETURN(int64_t start, ctx.attr_int("start", 0));
    MEMFIT_ASSIGN_OR_RETURN(int64_t end, ctx.attr_int("end", rank));
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, start, rank);
    ctx.set_output(0, T::ints({end - start}, Shape(shape.begin() + start, shape.begin() + end)));
    return true;
  }
  if (op == "Constant") {
    const onnx::AttributeProto* value = ctx.attr("value");
    if (value != nullptr && value->has_t()) {
      auto t = tensor_from_proto(value->t());
      if (!t) return ctx.error(t.message());
      ctx.set_output(0, std::move(*t));
      return true;
    }
    if (const onnx::AttributeProto* f = ctx.attr("value_float")) {
      ctx.set_output(0, T::floats({}, {f->f()}));
      return true;
    }
    if (const onnx::AttributeProto* i = ctx.attr("value_int")) {
      ctx.set_output(0, T::ints({}, {i->i()}));
      return true;
    }
    if (const onnx::AttributeProto* fs = ctx.attr("value_floats")) {
      ctx.set_output(0, T::floats({fs->floats_size()}, {fs->floats().begin(), fs->floats().end()}));
      return true;
    }
    if (const onnx::AttributeProto* is = ctx.attr("value_ints")) {
      ctx.set_output(0, T::ints({is->ints_size()}, {is->ints().begin(), is->ints().end()}));
      return true;
    }
    return ctx.error("a Constant without a tensor, float or int value is not supported");
  }
  static const std::unordered_set<std::string> folded = {
      "Identity", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast", "Add", "Sub",
      "Mul", "Div", "Pow", "Sqrt", "Neg", "Equal", "Less", "Greater", "Not", "Where", "Range",
      "ConstantOfShape", "Reshape", "Expand", "Flatten", "Transpose", "Erf", "Floor", "Ceil",
      "Trilu"};
  if (!folded.count(op)) return false;
  for (int i = 0; i < ctx.inputs(); ++i) {
    if (ctx.has_input(i) && !ctx.is_constant(i)) return false;
  }
  // A weight is computed with in the graph, so that it trains.
  for (int i = 0; i < ctx.inputs(); ++i) {
    if (ctx.is_weight(i)) return false;
  }
  MEMFIT_ASSIGN_OR_RETURN(std::vector<T> in, known_inputs(ctx));
  static const std::unordered_map<std::string, size_t> fewest = {
      {"Add", 2}, {"Sub", 2}, {"Mul", 2}, {"Div", 2}, {"Pow", 2}, {"Equal", 2}, {"Less", 2},
      {"Greater", 2}, {"Where", 3}, {"Range", 3}, {"Reshape", 2}, {"Gather", 2}, {"Slice", 3},
      {"Expand", 2}};
  const auto needed = fewest.count(op) ? fewest.at(op) : size_t{1};
  if (in.size() < needed) {
    return ctx.error("has " + std::to_string(in.size()) + " inputs, needs " + std::to_string(needed));
  }
  auto out = [&](Result<T> r) -> Result<bool> {
    if (!r) return r.status();
    MEMFIT_RETURN_IF_ERROR(check_size(ctx, r->shape).status());
    ctx.set_output(0, std::move(*r));
    return true;
  };
  if (op == "Identity") return out(in.at(0));
  if (op == "Add") return out(binary(ctx, in.at(0), in.at(1), Arith::add));
  if (op == "Sub") return out(binary(ctx, in.at(0), in.at(1), Arith::sub));
  if (op == "Mul") return out(binary(ctx, in.at(0), in.at(1), Arith::mul));
  if (op == "Div") return out(binary(ctx, in.at(0), in.at(1), Arith::div));
  if (op == "Pow") return out(binary(ctx, in.at(0), in.at(1), Arith::pow));
  if (op == "Equal") return out(binary(ctx, in.at(0), in.at(1), Arith::equal));
  if (op == "Less") return out(binary(ctx, in.at(0), in.at(1), Arith::less));
  if (op == "Greater") return out(binary(ctx, in.at(0), in.at(1), Arith::greater));
  if (op == "Sqrt") return out(unary_float(ctx, in.at(0), [](double v) { return std::sqrt(v); }));
  if (op == "Erf") return out(unary_float(ctx, in.at(0), [](double v) { return std::erf(v); }));
  if (op == "Floor") return out(unary_float(ctx, in.at(0), [](double v) { return std::floor(v); }));
  if (op == "Ceil") return out(unary_float(ctx, in.at(0), [](double v) { return std::ceil(v); }));
  if (op == "Neg") return out(binary(ctx, in.at(0), T::ints({}, {-1}), Arith::mul));
  if (op == "Not") {
    T t = in.at(0);
    for (int64_t& v : t.i) v = v == 0;
    return out(t);
  }
  if (op == "Cast") {
    MEMFIT_ASSIGN_OR_RETURN(const int64_t to, ctx.attr_int("to", 0));
    return out(cast(ctx, in.at(0), to));
  }
  if (op == "Where") {
    const T& cond = in.at(0);
    const T& x = in.at(1);
    const T& y = in.at(2);
    auto shape = ops::broadcast_shapes(cond.shape, x.shape);
    if (shape) shape = ops::broadcast_shapes(*shape, y.shape);
    if (!shape) return ctx.error(shape.message());
    if (x.is_float() != y.is_float()) return ctx.error("Where's branches differ in type");
    MEMFIT_RETURN_IF_ERROR(check_size(ctx, *shape).status());
    T r = empty_like(x, *shape);
    for (int64_t k = 0; k < r.elements(); ++k) {
      const bool c = cond.integer(broadcast_source(cond, *shape, k)) != 0;
      const T& from = c ? x : y;
      copy_element(from, broadcast_source(from, *shape, k), r, static_cast<size_t>(k));
    }
    return out(r);
  }
  if (op == "Range") {
    for (const T& t : in) {
      if (t.elements() != 1) return ctx.error("Range's inputs must be scalars");
    }
    const T& start = in.at(0);
    const double s = start.number(0), limit = in.at(1).number(0), delta = in.at(2).number(0);
    if (delta == 0) return ctx.error("Range with delta 0");
    const double n = std::max(0.0, std::ceil((limit - s) / delta));
    if (!(n <= static_cast<double>(kMaxFoldElements))) return ctx.error("a Range too long to fold");
    T r;
    const bool floats = start.is_float() || in.at(1).is_float() || in.at(2).is_float();
    r.type = floats ? T::Type::f32 : T::Type::i64;
    r.shape = {static_cast<int64_t>(n)};
    for (int64_t k = 0; k < r.shape[0]; ++k) {
      if (r.is_float()) {
        r.f.push_back(static_cast<float>(s + static_cast<double>(k) * delta));
      } else {
        r.i.push_back(static_cast<int64_t>(static_cast<uint64_t>(start.i[0]) +
                                           static_cast<uint64_t>(k) * static_cast<uint64_t>(in.at(2).i[0])));
      }
    }
    return out(r);
  }
  if (op == "ConstantOfShape") {
    const Shape shape = in.at(0).integers();
    MEMFIT_RETURN_IF_ERROR(check_size(ctx, shape).status());
    T value = T::floats({1}, {0.0f});
    if (const onnx::AttributeProto* v = ctx.attr("value"); v != nullptr && v->has_t()) {
      auto t = tensor_from_proto(v->t());
      if (!t) return ctx.error(t.message());
      if (t->elements() != 1) return ctx.error("ConstantOfShape's value must have one element");
      value = *t;
    }
    T r = empty_like(value, shape);
    for (size_t k = 0; k < static_cast<size_t>(r.elements()); ++k) copy_element(value, 0, r, k);
    return out(r);
  }
  if (op == "Reshape") {
    MEMFIT_ASSIGN_OR_RETURN(const int64_t allowzero, ctx.attr_int("allowzero", 0));
    return out(reshaped(ctx, in.at(0), in.at(1).integers(), allowzero != 0));
  }
  if (op == "Flatten" || op == "Unsqueeze" || op == "Squeeze") {
    const T& t = in.at(0);
    MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, ctx.attr_int("axis", 1));
    const std::vector<int64_t> axes = ctx.has_input(1) ? in.at(1).integers() : std::vector<int64_t>{};
    const Result<Shape> shape = op == "Flatten" ? flatten_target(t.shape, axis)
                                                : squeeze_target(t.shape, axes, op == "Unsqueeze");
    if (!shape) return ctx.error(shape.message());
    return out(reshaped(ctx, t, *shape, true));
  }
  if (op == "Gather") {
    MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, ctx.attr_int("axis", 0));
    return out(gather(ctx, in.at(0), in.at(1), axis));
  }
  if (op == "Concat") {
    MEMFIT_ASSIGN_OR_RETURN(const int64_t axis, ctx.attr_int("axis", 0));
    return out(concat(ctx, in, axis));
  }
  if (op == "Slice") {
    std::vector<int64_t> axes, steps;
    if (ctx.has_input(3)) axes = in.at(3).integers();
    if (ctx.has_input(4)) steps = in.at(4).integers();
    return out(slice(ctx, in.at(0), in.at(1).integers(), in.at(2).integers(), axes, steps));
  }
  if (op == "Expand") {
    const T& t = in.at(0);
    auto shape = ops::broadcast_shapes(t.shape, in.at(1).integers());
    if (!shape) return ctx.error(shape.message());
    MEMFIT_RETURN_IF_ERROR(check_size(ctx, *shape).status());
    T r = empty_like(t, *shape);
    for (int64_t k = 0; k < r.elements(); ++k) {
      copy_element(t, broadcast_source(t, *shape, k), r, static_cast<size_t>(k));
    }
    return out(r);
  }
  if (op == "Trilu") {
    // The upper (or lower) triangle of the last two dimensions, from diagonal k.
    MEMFIT_ASSIGN_OR_RETURN(const int64_t upper, ctx.attr_int("upper", 1));
    T t = in.at(0);
    if (t.shape.size() < 2) return ctx.error("Trilu needs at least 2 dimensions");
    const int64_t k = ctx.has_input(1) && in.at(1).elements() == 1 ? in.at(1).integer(0) : 0;
    const int64_t rows = t.shape[t.shape.size() - 2], cols = t.shape.back();
    for (int64_t e = 0; e < t.elements(); ++e) {
      const int64_t i = e / cols % rows, j = e % cols;
      const bool keep = upper ? j - i >= k : j - i <= k;
      if (keep) continue;
      if (t.is_float()) {
        t.f[static_cast<size_t>(e)] = 0.0f;
      } else {
        t.i[static_cast<size_t>(e)] = 0;
      }
    }
    return out(t);
  }
  if (op == "Transpose") {
    MEMFIT_ASSIGN_OR_RETURN(const std::vector<int64_t> perm, ctx.attr_ints("perm", {}));
    return out(transpose(ctx, in.at(0), perm));
  }
  return false;
}

}  // namespace memfit
#endif  // MEMFIT_HAVE_ONNX
