#include "runtime/kernel.h"

namespace memfit {

TensorLayout Backend::layout(const Graph& graph, ValueId value) const {
  return TensorLayout{"plain", graph.value(value).bytes()};
}

}  // namespace memfit
