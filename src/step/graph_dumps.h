// `memfit plan --dump-graphs DIR`: the step graph's IR text (docs/ir-text.md)
// after each pass of the pipeline that changed it (src/passes/step_pipeline.h),
// one file per pass: DIR/<graph>-<NN>-<pass>.ir, where <graph> is `step` (the
// step that applies the update) or `accumulate` (the micro-batches that only
// accumulate), NN counts from 00 (`model`: the forward graph before any pass).
// Every file reads back with parse_graph and passes verify_graph.
#pragma once

#include <string>

#include "passes/pass.h"

namespace memfit {

// Creates `dir` where it does not exist, and removes the dumps an earlier plan
// left in it (files named as above, nothing else); an error names the flag
// and the reason.
Status prepare_dump_dir(const std::string& dir);

// A hook that writes each graph it is called with to `dir` as <graph>-<NN>-<pass>.ir.
AfterPass graph_dumper(std::string dir, std::string graph);

}  // namespace memfit
