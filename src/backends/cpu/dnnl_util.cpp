#include "backends/cpu/dnnl_util.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace memfit::cpu {
namespace {

// Regions inside the workspace start on cache lines.
constexpr size_t kAlignment = 64;

size_t align_up(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

const dnnl::engine& engine() {
  static const dnnl::engine cpu_engine(dnnl::engine::kind::cpu, 0);
  return cpu_engine;
}

dnnl::stream& stream() {
  static dnnl::stream cpu_stream(engine());
  return cpu_stream;
}

dnnl::primitive_attr kernel_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_fpmath_mode(dnnl::fpmath_mode::strict);
  return attr;
}

dnnl::memory::dims to_dims(const Shape& shape) { return {shape.begin(), shape.end()}; }

dnnl::memory::desc plain_md(const Shape& shape) {
  // A 0-D tensor is one element; oneDNN descriptors have at least one dimension.
  const Shape dims = shape.empty() ? Shape{1} : shape;
  dnnl::memory::dims strides(dims.size());
  int64_t stride = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= dims[i];
  }
  return dnnl::memory::desc(to_dims(dims), dnnl::memory::data_type::f32, strides);
}

dnnl::memory::desc layout_md(const Shape& shape, Layout layout) {
  using tag = dnnl::memory::format_tag;
  if (layout == Layout::plain) return plain_md(shape);
  MEMFIT_CHECK(shape.size() == 4 || shape.size() == 5);
  const bool volume = shape.size() == 5;
  tag blocked = tag::undef;
  switch (layout) {
    case Layout::c8:
      blocked = volume ? tag::nCdhw8c : tag::nChw8c;
      break;
    case Layout::c16:
      blocked = volume ? tag::nCdhw16c : tag::nChw16c;
      break;
    case Layout::oi8:
      blocked = volume ? tag::ABcde8b8a : tag::ABcd8b8a;
      break;
    case Layout::oi16:
      blocked = volume ? tag::ABcde16b16a : tag::ABcd16b16a;
      break;
    case Layout::plain:
      break;
  }
  return dnnl::memory::desc(to_dims(shape), dnnl::memory::data_type::f32, blocked);
}

dnnl::memory::desc value_md(const Graph& graph, ValueId id) {
  const Value& value = graph.value(id);
  dnnl::memory::desc md = layout_md(value.type.shape, value.layout);
  MEMFIT_CHECK(value.layout == Layout::plain || md.get_size() == value.bytes());
  return md;
}

bool touches_blocked(const Graph& graph, const Node& node) {
  for (const std::vector<ValueId>* values : {&node.inputs, &node.outputs}) {
    for (ValueId v : *values) {
      if (graph.value(v).layout != Layout::plain) return true;
    }
  }
  return false;
}

Layout native_blocked_layout() {
  // A 3x3 convolution of 64 channels, its activations in the layout oneDNN
  // chooses ("any"): nChw16c on AVX-512, nChw8c on AVX2.
  using tag = dnnl::memory::format_tag;
  const dnnl::memory::dims x = {8, 64, 28, 28}, w = {64, 64, 3, 3};
  const dnnl::memory::desc any_x(x, dnnl::memory::data_type::f32, tag::any);
  const dnnl::memory::desc any_w(w, dnnl::memory::data_type::f32, tag::any);
  const dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, any_x, any_w,
      any_x, {1, 1}, {0, 0}, {1, 1}, {1, 1});
  const dnnl::convolution_forward::primitive_desc pd(desc, kernel_attr(), engine());
  for (Layout layout : {Layout::c16, Layout::c8}) {
    if (pd.dst_desc() == layout_md({8, 64, 28, 28}, layout)) return layout;
  }
  return Layout::plain;
}

void PrimitiveKernel::add_reorder(const ArgBuffer& from, const ArgBuffer& to) {
  const dnnl::reorder::primitive_desc pd(engine(), from.desc, engine(), to.desc, kernel_attr());
  add(pd, {{DNNL_ARG_FROM, from.source, from.index, from.desc},
           {DNNL_ARG_TO, to.source, to.index, to.desc}});
}

void PrimitiveKernel::add(const dnnl::primitive_desc_base& pd, const std::vector<ArgBuffer>& args) {
  Step step{dnnl::primitive(pd.get()), {}, {}};
  std::vector<ArgBuffer> all = args;
  const dnnl::memory::desc scratchpad = pd.scratchpad_desc();
  if (scratchpad.get_size() > 0) {
    all.push_back({DNNL_ARG_SCRATCHPAD, BufferSource::scratchpad, 0, scratchpad});
    scratchpad_bytes_ = std::max(scratchpad_bytes_, scratchpad.get_size());
  }
  for (const ArgBuffer& arg : all) {
    dnnl::memory memory(arg.desc, engine(), DNNL_MEMORY_NONE);
    step.args.emplace(arg.arg, memory);
    step.bound.push_back({arg.source, arg.index, memory});
  }
  steps_.push_back(std::move(step));
}

size_t PrimitiveKernel::reserve(size_t bytes) {
  const size_t offset = align_up(reserved_end_);
  reserved_end_ = offset + bytes;
  return offset;
}

size_t PrimitiveKernel::scratchpad_offset() const { return align_up(reserved_end_); }

size_t PrimitiveKernel::workspace_bytes() const {
  return scratchpad_bytes_ > 0 ? scratchpad_offset() + scratchpad_bytes_ : reserved_end_;
}

void* PrimitiveKernel::buffer(const Bound& bound, const KernelArgs& args) const {
  switch (bound.source) {
    case BufferSource::input:
      return args.inputs[bound.index];
    case BufferSource::output:
      return args.outputs[bound.index];
    case BufferSource::workspace:
      return static_cast<std::byte*>(args.workspace) + bound.index;
    case BufferSource::scratchpad:
      return static_cast<std::byte*>(args.workspace) + scratchpad_offset();
  }
  MEMFIT_CHECK(false);
  return nullptr;
}

void PrimitiveKernel::run(const KernelArgs& args) {
  MEMFIT_CHECK(args.workspace != nullptr || workspace_bytes() == 0);
  for (Step& step : steps_) {
    for (const Bound& bound : step.bound) bound.memory.set_data_handle(buffer(bound, args));
    step.primitive.execute(stream(), step.args);
  }
  stream().wait();
  finish(args);
}

void PrimitiveKernel::finish(const KernelArgs&) {}

void AddIntoKernel::run(const KernelArgs& args) {
  const void* c = args.inputs[c_input_];
  if (args.outputs[0] != c) std::memcpy(args.outputs[0], c, bytes_);
  PrimitiveKernel::run(args);
}

dnnl::primitive_attr post_op_attr(bool sum, bool relu) {
  dnnl::primitive_attr attr = kernel_attr();
  if (!sum && !relu) return attr;
  dnnl::post_ops ops;
  if (sum) ops.append_sum(1.0f);
  if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  attr.set_post_ops(ops);
  return attr;
}

}  // namespace memfit::cpu
