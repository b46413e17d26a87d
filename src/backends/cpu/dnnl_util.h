// Shared pieces of the oneDNN kernels: the engine and stream, the attributes
// every primitive is made with, plain memory descriptors, and PrimitiveKernel,
// which runs a fixed list of primitives on the buffers the engine hands it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "runtime/kernel.h"

namespace memfit::cpu {

// One engine and one in-order stream for all kernels: the executor runs
// compute nodes one at a time on a single thread, so sharing them is safe.
const dnnl::engine& engine();
dnnl::stream& stream();

// The attributes of every primitive: the scratchpad is passed in by the kernel
// (it lives in the node's planned workspace, never in memory oneDNN allocates
// on its own), and f32 math is never down-converted to bf16 on CPUs that could.
dnnl::primitive_attr kernel_attr();

dnnl::memory::dims to_dims(const Shape& shape);

inline const Shape& input_shape(const Graph& graph, const Node& node, size_t i) {
  return graph.value(node.inputs[i]).type.shape;
}
inline const Shape& output_shape(const Graph& graph, const Node& node, size_t i) {
  return graph.value(node.outputs[i]).type.shape;
}

// A dense row-major f32 descriptor of `shape`: the "plain" layout.
dnnl::memory::desc plain_md(const Shape& shape);
// The f32 descriptor of `shape` in `layout`: plain_md, or oneDNN's nChw8c,
// nChw16c, nCdhw8c or nCdhw16c for the channel-blocked layouts.
dnnl::memory::desc layout_md(const Shape& shape, Layout layout);
// The descriptor of a value in its own layout; its size is the value's bytes.
dnnl::memory::desc value_md(const Graph& graph, ValueId value);
inline dnnl::memory::desc input_md(const Graph& graph, const Node& node, size_t i) {
  return value_md(graph, node.inputs[i]);
}
inline dnnl::memory::desc output_md(const Graph& graph, const Node& node, size_t i) {
  return value_md(graph, node.outputs[i]);
}
// Whether an input or output of `node` is in a blocked layout.
bool touches_blocked(const Graph& graph, const Node& node);
// The channel-blocked layout oneDNN picks for a convolution's activations on
// this machine's instruction set (c8 with AVX2, c16 with AVX-512).
Layout native_blocked_layout();

// Where the buffer of a primitive argument is when the kernel runs.
enum class BufferSource : uint8_t {
  input,       // args.inputs[index]
  output,      // args.outputs[index]
  workspace,   // args.workspace + index bytes: a buffer passed between primitives
  scratchpad,  // the shared scratchpad region at the end of the workspace
};

struct ArgBuffer {
  int arg = 0;  // DNNL_ARG_*
  BufferSource source = BufferSource::input;
  size_t index = 0;
  dnnl::memory::desc desc;
};

inline ArgBuffer input_arg(int arg, size_t index, const dnnl::memory::desc& desc) {
  return {arg, BufferSource::input, index, desc};
}
inline ArgBuffer output_arg(int arg, size_t index, const dnnl::memory::desc& desc) {
  return {arg, BufferSource::output, index, desc};
}
inline ArgBuffer workspace_arg(int arg, size_t offset, const dnnl::memory::desc& desc) {
  return {arg, BufferSource::workspace, offset, desc};
}

// A kernel made of primitives created once; run() only points their memory
// objects at the step's buffers and executes them in order.
//
// Workspace layout: the regions handed out by reserve(), each 64-byte aligned,
// then one scratchpad region as large as the largest scratchpad of the
// primitives (they run one after the other, so they share it).
class PrimitiveKernel : public Kernel {
 public:
  // Appends a primitive made from `pd` (reorders too); its scratchpad is bound here.
  void add(const dnnl::primitive_desc_base& pd, const std::vector<ArgBuffer>& args);
  // Appends a reorder from `from` to `to` (DNNL_ARG_FROM, DNNL_ARG_TO).
  void add_reorder(const ArgBuffer& from, const ArgBuffer& to);
  // Reserves `bytes` of the workspace; returns their offset.
  size_t reserve(size_t bytes);

  size_t workspace_bytes() const override;
  void run(const KernelArgs& args) override;

 protected:
  // Plain C++ work after the primitives, once their results are complete.
  virtual void finish(const KernelArgs& args);

 private:
  struct Bound {
    BufferSource source;
    size_t index;
    dnnl::memory memory;  // shares its object with the entry in Step::args
  };
  struct Step {
    dnnl::primitive primitive;
    std::unordered_map<int, dnnl::memory> args;
    std::vector<Bound> bound;
  };
  void* buffer(const Bound& bound, const KernelArgs& args) const;
  size_t scratchpad_offset() const;

  std::vector<Step> steps_;
  size_t reserved_end_ = 0;      // end of the last reserved region
  size_t scratchpad_bytes_ = 0;  // the largest scratchpad of a step
};

// y = input `c_input` (copied unless the planner wrote y in place over it),
// then the primitives, which add into y with a sum post-op.
class AddIntoKernel final : public PrimitiveKernel {
 public:
  AddIntoKernel(size_t bytes, size_t c_input) : bytes_(bytes), c_input_(c_input) {}
  void run(const KernelArgs& args) override;

 private:
  size_t bytes_;
  size_t c_input_;
};

// kernel_attr() with post-ops: a sum (y += the primitive's result, for
// AddIntoKernel) and then a ReLU, each when asked for.
dnnl::primitive_attr post_op_attr(bool sum, bool relu);

}  // namespace memfit::cpu
