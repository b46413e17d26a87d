#include "runtime/executor.h"

#include <chrono>
#include <cstring>
#include <new>

#include "core/check.h"

namespace memfit {

const std::vector<float>* StateStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

namespace {

constexpr std::align_val_t kAlignment{64};

struct AlignedDelete {
  void operator()(std::byte* p) const { ::operator delete[](p, kAlignment); }
};
using Buffer = std::unique_ptr<std::byte[], AlignedDelete>;

Buffer allocate(size_t bytes) {
  return Buffer(static_cast<std::byte*>(::operator new[](bytes == 0 ? 1 : bytes, kAlignment)));
}

// Counts the bytes allocated now and the most ever allocated at once.
struct LiveBytes {
  size_t now = 0;
  size_t peak = 0;
  void add(size_t bytes) {
    now += bytes;
    peak = std::max(peak, now);
  }
  void remove(size_t bytes) { now -= bytes; }
};

}  // namespace

Result<std::unique_ptr<Executable>> Executable::compile(Graph graph, const Backend& backend) {
  auto exe = std::unique_ptr<Executable>(new Executable());
  exe->graph_ = std::move(graph);
  const Graph& g = exe->graph_;
  const auto reference = make_reference_backend();
  // The bytes the backend's layout of each value takes: what is allocated and counted.
  // Values exchanged with the host (inputs, state, outputs) are copied as plain data.
  for (size_t v = 0; v < g.num_values(); ++v) {
    const TensorLayout layout = backend.layout(g, ValueId(static_cast<int32_t>(v)));
    exe->value_bytes_.push_back(layout.bytes);
    if (!g.values()[v].producer.valid() && layout.format != "plain") {
      return Status::error("graph input '" + g.values()[v].name + "' must have the plain layout");
    }
  }
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const NodeId id(static_cast<int32_t>(n));
    const Backend& chosen = backend.supports(g, g.node(id)) ? backend : *reference;
    auto kernel = chosen.make_kernel(g, id);
    if (!kernel) return Status::error("node '" + g.node(id).name + "': " + kernel.message());
    exe->kernels_.push_back(std::move(kernel).value());
    exe->node_backends_.emplace_back(chosen.name());
  }
  // A produced value dies after its last reader; graph outputs and update
  // values live to the end of the step. Graph inputs are owned elsewhere.
  std::vector<int> last_use(g.num_values(), -1);
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    for (ValueId in : g.nodes()[n].inputs) last_use[in.idx()] = static_cast<int>(n);
    for (ValueId out : g.nodes()[n].outputs) last_use[out.idx()] = std::max(last_use[out.idx()], static_cast<int>(n));
  }
  const int end = static_cast<int>(g.num_nodes());
  for (ValueId v : g.outputs()) last_use[v.idx()] = end;
  for (const StateUpdate& u : g.updates()) last_use[u.next.idx()] = end;
  exe->frees_after_.resize(g.num_nodes());
  exe->node_seconds_.assign(g.num_nodes(), 0.0);
  for (size_t v = 0; v < g.num_values(); ++v) {
    if (g.values()[v].producer.valid() && last_use[v] < end) {
      exe->frees_after_[static_cast<size_t>(last_use[v])].push_back(ValueId(static_cast<int32_t>(v)));
    }
  }
  return exe;
}

Result<StepResult> Executable::run(StateStore& state, const Feeds& feeds, const StepContext& step) {
  const Graph& g = graph_;
  LiveBytes live;
  std::vector<void*> data(g.num_values(), nullptr);
  std::vector<Buffer> owned(g.num_values());
  for (size_t v = 0; v < g.num_values(); ++v) {
    const Value& value = g.values()[v];
    if (value.producer.valid()) continue;
    if (is_persistent(value.role)) {
      auto* tensor = state.find(value.name) ? &state[value.name] : nullptr;
      if (!tensor || tensor->size() != static_cast<size_t>(value.elements())) {
        return Status::error("state '" + value.name + "' is missing or has the wrong size");
      }
      data[v] = tensor->data();
    } else {
      auto it = feeds.find(value.name);
      if (it == feeds.end()) return Status::error("no data was given for input '" + value.name + "'");
      // Inputs are copied in, as onto a device.
      owned[v] = allocate(value_bytes_[v]);
      std::memcpy(owned[v].get(), it->second, value.bytes());
      data[v] = owned[v].get();
    }
    live.add(value_bytes_[v]);
  }

  std::vector<void*> inputs, outputs;
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const Node& node = g.nodes()[n];
    inputs.clear();
    outputs.clear();
    for (ValueId in : node.inputs) inputs.push_back(data[in.idx()]);
    for (ValueId out : node.outputs) {
      const size_t bytes = value_bytes_[out.idx()];
      owned[out.idx()] = allocate(bytes);
      data[out.idx()] = owned[out.idx()].get();
      outputs.push_back(data[out.idx()]);
      live.add(bytes);
    }
    Kernel& kernel = *kernels_[n];
    const size_t workspace_bytes = kernel.workspace_bytes();
    Buffer workspace = workspace_bytes ? allocate(workspace_bytes) : nullptr;
    live.add(workspace_bytes);
    const auto start = std::chrono::steady_clock::now();
    kernel.run(KernelArgs{inputs, outputs, workspace.get(), step});
    node_seconds_[n] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    live.remove(workspace_bytes);
    for (ValueId v : frees_after_[n]) {
      owned[v.idx()].reset();
      live.remove(value_bytes_[v.idx()]);
    }
  }

  StepResult result;
  result.peak_bytes = live.peak;
  for (ValueId v : g.outputs()) {
    const Value& value = g.value(v);
    MEMFIT_CHECK(value.type.dtype == DType::f32);
    const auto* begin = static_cast<const float*>(data[v.idx()]);
    result.outputs[value.name].assign(begin, begin + value.elements());
  }
  for (const StateUpdate& u : g.updates()) {
    const Value& s = g.value(u.state);
    const auto* begin = static_cast<const float*>(data[u.next.idx()]);
    std::memcpy(state[s.name].data(), begin, s.bytes());
  }
  return result;
}

}  // namespace memfit
