// memfit._memfit: the Python module's binding of the library. Thin: every
// function takes the command line's arguments (["plan", "--model", "lenet",
// ...], which memfit/_settings.py makes from keywords), parses them with the
// command line's own parser (tools/memfit/command_line.h), and calls the
// library as `memfit` does; reports come back as the command line's JSON
// text, which memfit/__init__.py turns into Python objects. Errors raise
// memfit.UsageError (bad settings, before any work) or memfit.Error.
// memfit.Trainer's class is bound in trainer.cpp.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "memfit/builder.h"
#include "memfit/plan.h"
#include "memfit/train.h"
#include "python/binding.h"
#include "tools/memfit/command_line.h"

namespace memfit::python {

PyObject* error_type = nullptr;
PyObject* usage_error_type = nullptr;

// A message may quote bytes of a file (a checkpoint's names) that are not
// UTF-8: those become U+FFFD rather than a UnicodeDecodeError in its place.
void raise(PyObject* type, const std::string& message) {
  PyObject* text =
      PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()), "replace");
  if (text != nullptr) {
    PyErr_SetObject(type, text);
    Py_DECREF(text);
  }
  throw py::error_already_set();
}

std::unique_ptr<memfit::cli::CommandLine> parse(const std::vector<std::string>& args,
                                                const std::string& expected) {
  auto command_line = std::make_unique<memfit::cli::CommandLine>();
  std::vector<std::string> argv = {"memfit"};
  argv.insert(argv.end(), args.begin(), args.end());
  const memfit::cli::Parsed parsed = command_line->parse(argv);
  if (!parsed.run) raise(usage_error_type, parsed.exit_code == 0 ? "help was asked for" : parsed.text);
  if (command_line->command().name != expected) {
    raise(usage_error_type, "expected the " + expected + " command, not " + command_line->command().name);
  }
  return command_line;
}

}  // namespace memfit::python

namespace {

using namespace memfit::python;

std::string plan(const std::vector<std::string>& args) {
  const auto command_line = parse(args, "plan");
  const memfit::cli::Command& c = command_line->command();
  if (c.plan_output.profile.profile || !c.plan_output.profile.trace_path.empty()) {
    raise(usage_error_type, "--profile and --trace run training steps: use memfit.train(profile=True, "
                            "trace=...) or the command line");
  }
  memfit::cli::PlanOutput output = c.plan_output;
  output.json = true;
  return value_or_raise(without_gil([&] { return memfit::cli::plan_command(c.plan, output); }));
}

std::string max_batch(const std::vector<std::string>& args) {
  const auto command_line = parse(args, "maxbatch");
  const memfit::cli::Command& c = command_line->command();
  const memfit::MaxBatchReport report =
      value_or_raise(without_gil([&] { return memfit::find_max_batch(c.max_request, c.vary); }));
  return memfit::max_batch_json(c.max_request, report);
}

// The trained tensors of a run, owned here; the numpy arrays of
// memfit.train's result are views of them (no copies), each keeping this
// object alive.
struct Trained {
  std::vector<memfit::TrainedTensor> tensors;
};

// The Python side of a training run: its callbacks, and the first exception
// one raised (KeyboardInterrupt among them), which ends the run after its
// current step and is raised again once the run has stopped.
class TrainCallbacks {
 public:
  TrainCallbacks(py::object on_step, py::object log) : on_step_(std::move(on_step)), log_(std::move(log)) {}

  void step(const memfit::StepRecord& r) {
    py::gil_scoped_acquire acquire;
    if (failed() || on_step_.is_none()) return;
    py::dict record;
    record["epoch"] = r.epoch;
    record["step"] = r.step;
    record["steps"] = r.steps;
    record["loss"] = r.loss;
    record["examples_per_second"] = r.examples_per_second;
    call(on_step_, record);
  }
  void line(const std::string& text) {
    py::gil_scoped_acquire acquire;
    if (failed() || log_.is_none()) return;
    call(log_, py::str(text));
  }
  // Asked after every optimizer step: true once Ctrl-C (or any signal
  // handler, or a callback) raised.
  bool stop() {
    py::gil_scoped_acquire acquire;
    if (!failed() && PyErr_CheckSignals() != 0) error_ = py::error_already_set();
    return failed();
  }
  bool failed() const { return error_.has_value(); }
  [[noreturn]] void raise_error() {
    error_->restore();
    throw py::error_already_set();
  }

 private:
  void call(const py::object& fn, const py::object& arg) {
    try {
      fn(arg);
    } catch (py::error_already_set& e) {
      error_ = std::move(e);
    }
  }
  py::object on_step_, log_;
  std::optional<py::error_already_set> error_;
};

py::tuple train(const std::vector<std::string>& args, py::object on_step, py::object log) {
  const auto command_line = parse(args, "train");
  memfit::TrainOptions options = command_line->command().train;
  if (memfit::launched_by_mpi()) {
    raise(usage_error_type, "memfit.train runs one process; for data parallel training under mpirun "
                            "use the command line (mpirun -np N memfit train ...)");
  }
  TrainCallbacks callbacks(std::move(on_step), std::move(log));
  options.on_step = [&callbacks](const memfit::StepRecord& r) { callbacks.step(r); };
  options.stop_requested = [&callbacks] { return callbacks.stop(); };
  options.keep_trained = true;
  auto report = without_gil([&] {
    return memfit::train(options, [&callbacks](const std::string& text) { callbacks.line(text); });
  });
  if (callbacks.failed()) callbacks.raise_error();
  if (!report) raise(error_type, report.message());
  auto trained = std::make_shared<Trained>();
  trained->tensors = std::move(report->trained);
  return py::make_tuple(memfit::train_report_json(options, *report), trained);
}

// The tensors of `trained` as (name, array, is_parameter): numpy arrays over
// their memory, whose base keeps `trained` alive.
py::list trained_arrays(const std::shared_ptr<Trained>& trained) {
  py::object owner = py::cast(trained);
  py::list out;
  for (memfit::TrainedTensor& t : trained->tensors) {
    std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
    py::array_t<float> array(shape, t.data.data(), owner);
    out.append(py::make_tuple(t.name, array, t.parameter));
  }
  return out;
}

py::list models() {
  py::list out;
  for (const memfit::ModelInfo& info : memfit::model_infos()) {
    py::dict model;
    model["name"] = info.name;
    model["parameters"] = value_or_raise(memfit::parameter_count({.name = info.name, .batch = 1}));
    model["data"] = std::string(memfit::data_kind_name(info.data));
    model["input"] = info.input;
    model["classes"] = info.classes;
    model["description"] = info.description;
    out.append(model);
  }
  return out;
}

}  // namespace

PYBIND11_MODULE(_memfit, m) {
  m.doc() = "memfit's library, bound for memfit/__init__.py (use the package, not this module)";
  error_type = PyErr_NewException("memfit.Error", PyExc_RuntimeError, nullptr);
  const py::tuple usage_bases = py::make_tuple(py::handle(error_type), py::handle(PyExc_ValueError));
  usage_error_type = PyErr_NewException("memfit.UsageError", usage_bases.ptr(), nullptr);
  m.attr("Error") = py::handle(error_type);
  m.attr("UsageError") = py::handle(usage_error_type);

  py::class_<Trained, std::shared_ptr<Trained>>(m, "Trained");
  bind_trainer(m);
  m.def("plan", &plan, py::arg("args"), "memfit plan ARGS --json: the report's JSON text");
  m.def("max_batch", &max_batch, py::arg("args"), "memfit maxbatch ARGS --json: the report's JSON text");
  m.def("train", &train, py::arg("args"), py::arg("on_step"), py::arg("log"),
        "memfit train ARGS: (the report's JSON text, the trained tensors)");
  m.def("trained_arrays", &trained_arrays, py::arg("trained"),
        "[(name, numpy view, is_parameter)] of a train result's tensors");
  m.def("models", &models, "the zoo: one dict per model");
}
