// Prints a step's whole plan as text: the graph the executor runs (IR text,
// in its order) and then every value's and every workspace's slice (pool,
// offset, bytes, the input it is written over in place), for both
// executables of an accumulating step. Two builds that print the same text
// for a step plan it to the byte (scripts/plan_fingerprints.sh).
// Usage: plan_slices MODEL BATCH [--policy P] [--recompute R] [--swap S]
//                     [--budget BYTES] [--accumulate K] [--ranks N]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "step/compile_step.h"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "plan_slices: %s\n", message.c_str());
  return 2;
}

void print_executable(const char* what, const memfit::Executable& exe) {
  const memfit::Graph& g = exe.graph();
  const memfit::MemoryPlan& plan = exe.plan();
  std::printf("== %s: arena %zu, host %zu\n%s", what, plan.arena_bytes, plan.host_bytes,
              memfit::print_graph(g).c_str());
  for (size_t v = 0; v < g.num_values(); ++v) {
    const memfit::Slice& s = plan.value_slices[v];
    const memfit::ValueId over = plan.inplace_of[v];
    std::printf("value %s %s %zu %zu%s\n", g.values()[v].name.c_str(),
                s.pool == memfit::Pool::device ? "device" : "host", s.offset, s.bytes,
                over.valid() ? (" over " + g.value(over).name).c_str() : "");
  }
  for (size_t n = 0; n < g.num_nodes(); ++n) {
    const memfit::Slice& s = plan.workspace_slices[n];
    if (s.bytes > 0) std::printf("workspace %s %zu %zu\n", g.nodes()[n].name.c_str(), s.offset, s.bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: plan_slices MODEL BATCH [--policy P] [--recompute R] ...");
  memfit::StepSpec spec;
  spec.model.name = argv[1];
  spec.model.batch = std::atoll(argv[2]);
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--policy") {
      spec.policy = memfit::parse_name<memfit::Policy>(value).value();
    } else if (flag == "--recompute") {
      spec.recompute = memfit::parse_name<memfit::Recompute>(value).value();
    } else if (flag == "--swap") {
      spec.swap = memfit::parse_name<memfit::Swap>(value).value();
    } else if (flag == "--budget") {
      spec.budget = std::strtoull(value.c_str(), nullptr, 10);
    } else if (flag == "--accumulate") {
      spec.accumulate = std::atoll(value.c_str());
    } else if (flag == "--ranks") {
      spec.ranks = std::atoll(value.c_str());
    } else {
      return fail("unknown flag " + flag);
    }
  }
  auto step = memfit::compile_step(spec, memfit::StepBuild{.accumulate_only = true});
  if (!step) return fail(step.message());
  print_executable("step", *step->apply);
  if (step->accumulate_only) print_executable("accumulate", *step->accumulate_only);
  return 0;
}
