// Each node's workspace bytes on a backend, from one kernel per distinct node
// signature (op, input and output types, attributes: src/cost/cost_model.h).
// A kernel's workspace depends on nothing else, so the policies' many trial
// plans of one step (thousands of nodes, few distinct) create a kernel only
// for a node unlike any seen before, and keep none.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/kernel.h"

namespace memfit {

class WorkspaceSizes {
 public:
  explicit WorkspaceSizes(const Backend& backend);
  // The workspace bytes of every node of `graph`, in its order; an error
  // names the first node whose kernel cannot be made.
  Result<std::vector<size_t>> of(const Graph& graph);

 private:
  const Backend& backend_;
  std::unique_ptr<Backend> reference_;
  std::unordered_map<std::string, size_t> bytes_;  // by node signature
};

}  // namespace memfit
