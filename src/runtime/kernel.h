// The kernel and backend interfaces. A backend turns each node into a Kernel
// once, when a graph is compiled (primitives, descriptors, workspace sizes);
// running a step only calls Kernel::run with the buffers the engine hands it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "memfit/ir.h"
#include "runtime/device.h"

namespace memfit {

// What a kernel may depend on besides its inputs.
struct StepContext {
  uint64_t seed = 0;           // the run's seed (dropout masks)
  int64_t micro_step = 0;      // forward passes so far (dropout masks)
  int64_t optimizer_step = 0;  // optimizer updates so far (AdamW bias correction)
  float lr_scale = 1.0f;       // the learning-rate schedule's factor for this step
};

struct KernelArgs {
  std::span<void* const> inputs;   // one buffer per node input, in the backend's layout
  std::span<void* const> outputs;  // one buffer per node output; may alias an input
                                   // only where the op table lists that in-place pair
  void* workspace = nullptr;       // workspace_bytes() bytes, uninitialized
  StepContext step;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Scratch memory the kernel needs while it runs; planned as a temporary.
  virtual size_t workspace_bytes() const { return 0; }
  virtual void run(const KernelArgs& args) = 0;
};

// The physical form of a value chosen by a backend, and its exact byte size.
struct TensorLayout {
  std::string format = "plain";  // row-major, dense
  size_t bytes = 0;
};

// Which operands of a node a backend's kernel takes in the backend's blocked
// layout (src/passes/assign_layouts.h). Masks: bit i stands for input or
// output i.
struct BlockedOperands {
  enum class Kind : uint8_t {
    none,    // every input must be plain, and the outputs are
    seed,    // `inputs` must be blocked, `either_inputs` may be blocked or plain,
             // `outputs` are blocked
    follow,  // when one of `inputs` is blocked, all of them must be in its
             // layout and `outputs` are; otherwise all are plain
  };
  Kind kind = Kind::none;
  uint32_t inputs = 0;
  uint32_t either_inputs = 0;
  uint32_t outputs = 0;
  // Convolution weights the kernel reads (`weight_inputs`) or writes
  // (`weight_outputs`) in `weights` (oi8, oi16) without a reorder; plain: none.
  Layout weights = Layout::plain;
  uint32_t weight_inputs = 0;
  uint32_t weight_outputs = 0;
};

// The machine a roofline estimate of node times assumes (cost/cost_model.h):
// a backend's peak arithmetic and memory rates and its cost per kernel. The
// defaults are one core of a 2-core shared x86 VM with AVX2 as measured
// orders of magnitude, not a datasheet: 20 GFLOP/s, 5 GB/s of memory
// traffic, 2 microseconds per kernel.
struct MachineSpec {
  double flops_per_second = 20e9;
  double bytes_per_second = 5e9;
  double launch_seconds = 2e-6;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual bool supports(const Graph& graph, const Node& node) const = 0;
  // The layout of a value; the planner plans these bytes: the value's
  // Layout and its bytes, padding included.
  virtual TensorLayout layout(const Graph& graph, ValueId value) const;
  // The channel-blocked layout the backend's kernels run fastest in (plain:
  // none), and which operands of `node` its kernel takes in it.
  virtual Layout blocked_layout() const { return Layout::plain; }
  virtual BlockedOperands blocked_operands(const Graph&, const Node&) const { return {}; }
  virtual Result<std::unique_ptr<Kernel>> make_kernel(const Graph& graph, NodeId node) const = 0;
  // What the kernels' choices (and so their workspaces and layouts) depend
  // on besides the graph: the instruction set and the thread count.
  virtual std::string isa() const { return "none"; }
  virtual int threads() const { return 1; }
  // Where its kernels find their buffers: the arena, the host pool and the
  // swap stream come from it. The host unless the backend runs elsewhere.
  virtual std::shared_ptr<const Device> device() const { return host_device(); }
  // The device's link to host memory in GB/s as measured when the backend
  // was made, for the cost model of swapping; 0: none measured (the host).
  virtual double link_gbps() const { return 0; }
  // The machine the roofline cost model assumes for its kernels.
  virtual MachineSpec roofline_machine() const { return {}; }
};

// Plain loops for every op: the oracle.
std::unique_ptr<Backend> make_reference_backend();
// oneDNN kernels where oneDNN has them, reference kernels for the rest.
// threads > 0 sets the number of threads oneDNN uses (for the whole process);
// 0 sets the default: OMP_NUM_THREADS, else one per CPU the process may run on.
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);

}  // namespace memfit
