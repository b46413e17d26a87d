#include "runtime/kernel.h"

namespace memfit {

TensorLayout Backend::layout(const Graph& graph, ValueId value) const {
  const Value& v = graph.value(value);
  return TensorLayout{std::string(layout_name(v.layout)), v.bytes()};
}

}  // namespace memfit
