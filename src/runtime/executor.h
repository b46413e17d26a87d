// The executor: runs a compiled training graph, one node after the other, on
// buffers it allocates when a value is produced and frees after its last
// reader. It counts the live bytes at every allocation and reports the peak.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/kernel.h"

namespace memfit {

// Values that outlive a step (parameters, optimizer state, running
// statistics), by value name, as plain float data.
class StateStore {
 public:
  std::vector<float>& operator[](const std::string& name) { return tensors_[name]; }
  const std::vector<float>* find(const std::string& name) const;
  bool contains(const std::string& name) const { return tensors_.count(name) > 0; }
  const std::unordered_map<std::string, std::vector<float>>& tensors() const { return tensors_; }

 private:
  std::unordered_map<std::string, std::vector<float>> tensors_;
};

// Data for the input and label values of one step, by value name; each buffer
// holds exactly the value's bytes.
using Feeds = std::unordered_map<std::string, const void*>;

struct StepResult {
  std::unordered_map<std::string, std::vector<float>> outputs;  // the graph outputs
  size_t peak_bytes = 0;  // the most bytes live at once: state, buffers and workspaces
};

class Executable {
 public:
  // Creates every node's kernel once: with `backend` where it supports the
  // node, else with the reference backend.
  static Result<std::unique_ptr<Executable>> compile(Graph graph, const Backend& backend);

  // Runs one step. Persistent inputs come from `state` (an error names any
  // missing or mis-sized one); at the end, every update's new value replaces
  // its state there.
  Result<StepResult> run(StateStore& state, const Feeds& feeds, const StepContext& step);

  const Graph& graph() const { return graph_; }
  // The backend that runs each node ("cpu" or "reference").
  const std::vector<std::string>& node_backends() const { return node_backends_; }
  // Seconds spent in each node's kernel, summed over all runs so far.
  const std::vector<double>& node_seconds() const { return node_seconds_; }

 private:
  Graph graph_;
  std::vector<std::unique_ptr<Kernel>> kernels_;
  std::vector<std::string> node_backends_;
  std::vector<double> node_seconds_;
  std::vector<size_t> value_bytes_;  // per value, as the backend lays it out
  std::vector<std::vector<ValueId>> frees_after_;  // per node: values whose last reader it is
};

}  // namespace memfit
