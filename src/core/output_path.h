// Checks of a path memfit will write (a checkpoint, a trace, a timeline),
// made before any work starts, so that a run does not train for an epoch and
// then fail to save, and never replaces a FIFO or a device with a file.
#pragma once

#include <string>

#include "memfit/status.h"

namespace memfit {

// OK when `path` names a regular file or nothing yet, and its directory
// exists and is writable; else an error naming `what` (e.g. "--save"), the
// path and the reason (the system's, where it gave one).
Status check_output_path(const std::string& path, const std::string& what);

// OK when `path` names a regular file, or nothing; else an error saying what
// it is. For the moment of writing, where check_output_path ran long before.
Status check_writable_kind(const std::string& path, const std::string& what);

}  // namespace memfit
