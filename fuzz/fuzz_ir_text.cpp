// libFuzzer target: the IR text parser (memfit/ir.h parse_graph). Any input
// gives a graph or an error, never a crash; a graph that parses and verifies
// prints to text that parses back to the same text.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "memfit/ir.h"
#include "ops/typed_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  memfit::Result<memfit::Graph> graph = memfit::parse_graph(text);
  if (!graph.is_ok() || !memfit::verify_graph(*graph).is_ok()) return 0;
  const std::string printed = memfit::print_graph(*graph);
  memfit::Result<memfit::Graph> again = memfit::parse_graph(printed);
  if (!again.is_ok() || memfit::print_graph(*again) != printed) std::abort();
  return 0;
}
