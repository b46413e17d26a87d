// What the binding's files share (python/module.cpp defines it): the
// exception types, the command line's parser, and running without the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>
#include <new>
#include <string>
#include <vector>

#include "memfit/status.h"
#include "tools/memfit/command_line.h"

namespace py = pybind11;

namespace memfit::python {

extern PyObject* error_type;        // memfit.Error (RuntimeError)
extern PyObject* usage_error_type;  // memfit.UsageError (memfit.Error and ValueError)

// Raises `type` with `message` (bytes that are not UTF-8 become U+FFFD).
[[noreturn]] void raise(PyObject* type, const std::string& message);

// Parses `args` (a subcommand and its flags) as `memfit` would; a usage
// error raises memfit.UsageError with the command line's message.
std::unique_ptr<memfit::cli::CommandLine> parse(const std::vector<std::string>& args,
                                                const std::string& expected);

template <typename T>
T value_or_raise(memfit::Result<T> result) {
  if (!result) raise(error_type, result.message());
  return std::move(result).value();
}

// Runs `work` without the GIL; memory that runs out is memfit.Error, as the
// command line reports it.
template <typename Work>
auto without_gil(Work work) {
  try {
    py::gil_scoped_release release;
    return work();
  } catch (const std::bad_alloc&) {
    raise(error_type,
          "out of memory: an allocation failed; make the step smaller (--budget BYTES with "
          "--policy auto, --recompute, --swap, or a smaller --batch)");
  }
}

// memfit._memfit.Trainer (python/trainer.cpp).
void bind_trainer(py::module_& m);

}  // namespace memfit::python
