// The CPU backend: oneDNN kernels for the compute-heavy ops; OpenMP loops for
// add, sub and mul, embedding and its gradient, causal_mask, attention and its
// gradient (in tiles), the LSTM cell and its gradient, max pooling, the
// cross-entropy, reductions, data movement (reshape, transpose, concat, split,
// slice), fill, dropout and the optimizer updates, and batch norm on
// channel-blocked values; oneDNN reorders between layouts; the reference
// kernels for the rest. All kernels are created when a graph is compiled.
// Which operands each kernel takes in the blocked layout (nChw8c or nChw16c,
// the one oneDNN's convolutions choose on this machine) is blocked_operands,
// which the layout pass reads.
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/dnnl_util.h"

namespace memfit {
namespace {

// The entry of `op` (cpu_kernels.h).
const cpu::KernelEntry& kernel_entry(OpKind op) {
  static const cpu::KernelEntry entries[] = {
#define MEMFIT_CPU_KERNEL_ENTRY(id, attrs, min_inputs, max_inputs) cpu::kernel_entry_##id(),
      MEMFIT_OPS(MEMFIT_CPU_KERNEL_ENTRY)
#undef MEMFIT_CPU_KERNEL_ENTRY
  };
  return entries[static_cast<size_t>(op)];
}

// Whether every tensor of `node` holds fewer than 2^31 elements: oneDNN's
// kernels and the cpu backend's own loops index them by 32-bit integers.
// Larger ones are the reference kernels' (64-bit indices).
bool indexed_by_int32(const Graph& graph, const Node& node) {
  auto small = [&](ValueId v) {
    return graph.value(v).elements() <= std::numeric_limits<int32_t>::max();
  };
  return std::all_of(node.inputs.begin(), node.inputs.end(), small) &&
         std::all_of(node.outputs.begin(), node.outputs.end(), small);
}

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }

  // True for the nodes that get a CPU kernel: their op's entry has a
  // factory, every tensor is indexed by 32-bit integers, the kernel takes
  // their blocked operands, and the node is what the entry takes (by default
  // f32 but the op's i32 inputs; data moved by the shape kernels may be of
  // any dtype).
  bool supports(const Graph& graph, const Node& node) const override {
    const cpu::KernelEntry& entry = kernel_entry(node.op);
    if (entry.make == nullptr) return false;
    if (!indexed_by_int32(graph, node)) return false;
    if (node.op != OpKind::reorder && cpu::touches_blocked(graph, node) &&
        operands_of(graph, node, false).kind == BlockedOperands::Kind::none) {
      return false;
    }
    return entry.takes(graph, node);
  }

  Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, NodeId id) const override {
    const Node& node = graph.node(id);
    if (!supports(graph, node)) return reference_->make_kernel(graph, id);
    try {
      return kernel_entry(node.op).make(graph, node);
    } catch (const dnnl::error& e) {
      return Status::error("oneDNN rejected node '" + node.name + "' (" +
                           std::string(op_name(node.op)) + "): " + e.what() +
                           "; check its shapes and attributes");
    }
  }

  // The kernels that run in the blocked layout (src/passes/assign_layouts.h):
  // oneDNN's convolutions, batch norm and pooling, and the loops of max
  // pooling, are seeds; oneDNN's eltwise, the loops of add, sub and mul of
  // same-shape operands, the optimizer updates and a fill of zeros follow
  // their inputs. Convolutions read and write their weights in oneDNN's
  // blocked weights layout where it is one of memfit's (oi8, oi16).
  BlockedOperands blocked_operands(const Graph& graph, const Node& node) const override {
    return operands_of(graph, node, true);
  }

  Layout blocked_layout() const override { return blocked_; }
  std::string isa() const override { return isa_name(dnnl::get_effective_cpu_isa()); }
  int threads() const override { return omp_get_max_threads(); }

 private:
  // blocked_operands, with the weights' layout only where `query_weights`
  // (it asks oneDNN, which supports() need not).
  BlockedOperands operands_of(const Graph& graph, const Node& node, bool query_weights) const {
    using Kind = BlockedOperands::Kind;
    if (!indexed_by_int32(graph, node)) return {};
    auto volume = [&](size_t input) {
      const size_t rank = graph.value(node.inputs[input]).type.shape.size();
      return rank == 4 || rank == 5;
    };
    switch (node.op) {
      case OpKind::conv2d:
      case OpKind::conv2d_relu:
      case OpKind::conv2d_add:
      case OpKind::conv3d: {
        // x with fewer channels than a block (an image) is read as it is;
        // oneDNN's fast kernels take a plain x only for such first layers.
        // conv2d_add's residual r (input 2) is in y's layout.
        // The weights (input 1) are read plain or in a weights layout as they
        // are; oneDNN's own (weights) where they may take it.
        const bool image = graph.value(node.inputs[0]).type.shape[1] < layout_block(blocked_);
        const uint32_t residual = node.op == OpKind::conv2d_add ? 0b100 : 0;
        const uint32_t weights = weights_as_they_are(graph, node);
        BlockedOperands operands = image ? BlockedOperands{Kind::seed, residual, 0b1 | weights, 0b1}
                                         : BlockedOperands{Kind::seed, 0b1 | residual, weights, 0b1};
        if (query_weights) {
          const Layout x = image ? graph.value(node.inputs[0]).layout : blocked_;
          operands.weights = cpu::conv_weight_layout(graph, node, x, blocked_);
          if (operands.weights != Layout::plain) operands.weight_inputs = 0b10;
        }
        return operands;
      }
      case OpKind::conv2d_grad_input:
      case OpKind::conv3d_grad_input:
        return {Kind::seed, 0b1, weights_as_they_are(graph, node), 0b1};
      case OpKind::conv2d_grad_weight:
      case OpKind::conv3d_grad_weight:
        // dy in x's layout (dw plain), except that a first layer's image x
        // stays plain beside a blocked dy where oneDNN has a direct kernel for
        // that pair (oneDNN 2.6 with AVX2 does for 2-D; otherwise only its
        // reference loops, and dy is reordered to plain).
        if (graph.value(node.inputs[1]).layout == Layout::plain) {
          const bool image = graph.value(node.inputs[1]).type.shape[1] < layout_block(blocked_);
          if (image && cpu::image_grad_weight_reads_blocked_dy(graph, node, blocked_)) {
            return {Kind::seed, 0b1, 0b10, 0};
          }
          return {};
        }
        {
          BlockedOperands operands{Kind::seed, 0b11, 0, 0};
          if (query_weights) {
            operands.weights = cpu::conv_weight_layout(graph, node, blocked_, blocked_);
            if (operands.weights != Layout::plain) operands.weight_outputs = 0b1;
          }
          return operands;
        }
      case OpKind::max_pool2d:
      case OpKind::max_pool3d:
      case OpKind::avg_pool2d:
      case OpKind::avg_pool3d:
      case OpKind::global_avg_pool:
      case OpKind::avg_pool2d_grad:
      case OpKind::avg_pool3d_grad:
      case OpKind::global_avg_pool_grad:
        return {Kind::seed, 0b1, 0, 0b1};
      case OpKind::max_pool2d_grad:
      case OpKind::max_pool3d_grad:
        return {Kind::seed, 0b11, 0, 0b1};
      case OpKind::batch_norm:
      case OpKind::batch_norm_inference:
        return volume(0) ? BlockedOperands{Kind::seed, 0b1, 0, 0b1} : BlockedOperands{};
      case OpKind::batch_norm_grad:
      case OpKind::batch_norm_inference_grad:
        return volume(1) ? BlockedOperands{Kind::seed, 0b11, 0, 0b1} : BlockedOperands{};
      case OpKind::relu:
      case OpKind::gelu:
      case OpKind::tanh:
      case OpKind::sigmoid:
      case OpKind::scale:
        return {Kind::follow, 0b1, 0, 0b1};
      case OpKind::relu_grad:
      case OpKind::gelu_grad:
      case OpKind::tanh_grad:
      case OpKind::sigmoid_grad:
        return {Kind::follow, 0b11, 0, 0b1};
      case OpKind::add:
      case OpKind::sub:
      case OpKind::mul: {
        const Shape& y = graph.value(node.outputs[0]).type.shape;
        const bool same = graph.value(node.inputs[0]).type.shape == y &&
                          graph.value(node.inputs[1]).type.shape == y;
        return same ? BlockedOperands{Kind::follow, 0b11, 0, 0b1} : BlockedOperands{};
      }
      case OpKind::sgd_update:
      case OpKind::adamw_update:
        // Element by element over the stored elements: every operand in one layout.
        return {Kind::follow, 0b1111, 0, 0b111};
      case OpKind::fill:
        // Zeros, padding included, over a blocked input's bytes.
        return node.inputs.size() == 1 && std::get<FillAttrs>(node.attrs).value == 0.0f
                   ? BlockedOperands{Kind::follow, 0b1, 0, 0b1}
                   : BlockedOperands{};
      default:
        return {};
    }
  }

  // The mask of a convolution's weights (input 1) where they may stay as
  // they are: plain or in a weights layout (not in an activations' one).
  static uint32_t weights_as_they_are(const Graph& graph, const Node& node) {
    const Layout layout = graph.value(node.inputs[1]).layout;
    return layout == Layout::plain || is_weight_layout(layout) ? 0b10 : 0;
  }

  static std::string isa_name(dnnl::cpu_isa isa) {
    using dnnl::cpu_isa;
    switch (isa) {
      case cpu_isa::sse41:
        return "sse41";
      case cpu_isa::avx:
        return "avx";
      case cpu_isa::avx2:
        return "avx2";
      case cpu_isa::avx2_vnni:
        return "avx2_vnni";
      case cpu_isa::avx512_core:
        return "avx512_core";
      case cpu_isa::avx512_core_vnni:
        return "avx512_core_vnni";
      case cpu_isa::avx512_core_bf16:
        return "avx512_core_bf16";
      case cpu_isa::avx512_core_amx:
        return "avx512_core_amx";
      default:
        return "isa " + std::to_string(static_cast<int>(isa));
    }
  }

  std::unique_ptr<Backend> reference_ = make_reference_backend();
  Layout blocked_ = cpu::native_blocked_layout();
};

// The threads of a backend made with threads 0: OMP_NUM_THREADS where the
// user set it (its first count), else one per CPU this process may run on,
// as OpenMP itself starts. Not OpenMP's current count: another library in
// the process may have changed it (importing PyTorch sets it to its count
// of physical cores), and memfit's plans would then differ between Python
// and the command line.
int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr) {
    char* end = nullptr;
    const long count = std::strtol(env, &end, 10);
    if (end != env && count > 0 && count <= 1 << 16) return static_cast<int>(count);
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > 0) return CPU_COUNT(&cpus);
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  // oneDNN runs on OpenMP, whose thread count is global to the process:
  // every backend sets it, to its threads or to the default.
  static const int defaults = default_threads();
  omp_set_num_threads(threads > 0 ? threads : defaults);
  return std::make_unique<CpuBackend>();
}

}  // namespace memfit
