// memfit._memfit.Trainer: the binding of BatchTrainer (src/train/
// batch_trainer.h) for memfit.Trainer (memfit/_trainer.py), which hands it
// the command line's arguments and, per call, a dict of contiguous numpy
// arrays by input name. The arrays are checked (a bad one raises
// memfit.UsageError naming the input, before anything changes), then
// written into the step's input buffers and run without the GIL; Ctrl-C
// during a step is raised once it is done.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "memfit/techniques.h"
#include "python/binding.h"
#include "train/batch_trainer.h"
#include "train/lr_schedule.h"

namespace memfit::python {
namespace {

ElementKind element_kind(const py::array& a) {
  const py::dtype dtype = a.dtype();
  // '=' native, '|' single bytes, '<' little-endian (native here: x86-64, aarch64).
  if (dtype.byteorder() == '>') return ElementKind::other;
  const auto size = dtype.itemsize();
  switch (dtype.kind()) {
    case 'f':
      return size == 4 ? ElementKind::f32 : size == 8 ? ElementKind::f64 : ElementKind::other;
    case 'i':
      return size == 1   ? ElementKind::i8
             : size == 2 ? ElementKind::i16
             : size == 4 ? ElementKind::i32
             : size == 8 ? ElementKind::i64
                         : ElementKind::other;
    case 'u':
      return size == 1   ? ElementKind::u8
             : size == 2 ? ElementKind::u16
             : size == 4 ? ElementKind::u32
             : size == 8 ? ElementKind::u64
                         : ElementKind::other;
    default:
      return ElementKind::other;
  }
}

// The arrays of `given` (input name to a C-contiguous numpy array), checked
// against the model's inputs: memfit.UsageError for any that does not fit.
// They point into `given`'s arrays, which the caller keeps alive.
std::vector<HostArray> checked_arrays(const BatchTrainer& trainer, const py::dict& given,
                                      bool labels_optional) {
  std::vector<HostArray> arrays;
  for (const auto& [key, value] : given) {
    const auto array = py::reinterpret_borrow<py::array>(value);
    if (!(array.flags() & py::array::c_style)) {
      raise(usage_error_type, "input '" + py::cast<std::string>(key) + "' is not C-contiguous");
    }
    HostArray host;
    host.name = py::cast<std::string>(key);
    host.kind = element_kind(array);
    host.dtype = py::cast<std::string>(py::str(array.dtype()));
    host.shape.assign(array.shape(), array.shape() + array.ndim());
    host.data = array.data();
    arrays.push_back(std::move(host));
  }
  const auto rows = check_arrays(trainer.inputs(), arrays, labels_optional);
  if (!rows) raise(usage_error_type, rows.message());
  return arrays;
}

// Raises KeyboardInterrupt (or what a signal handler raised) after a call
// that ran without the GIL, if a signal came meanwhile.
void raise_pending_signal() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

py::array_t<float> to_numpy(const Shape& shape, const std::vector<float>& data) {
  const std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  return py::array_t<float>(dims, data.data());  // a copy
}

class PyTrainer {
 public:
  explicit PyTrainer(const std::vector<std::string>& args) {
    const auto command_line = parse(args, "train");
    const TrainOptions options = command_line->command().train;
    // --min-lr against the learning rate, with the command line's message.
    if (const auto schedule = lr_schedule_of(options); !schedule) {
      raise(usage_error_type, schedule.message());
    }
    if (launched_by_mpi()) {
      raise(usage_error_type,
            "memfit.Trainer runs one process; for data parallel training under "
            "mpirun use the command line (mpirun -np N memfit train ...)");
    }
    trainer_ = value_or_raise(without_gil([&] { return BatchTrainer::create(options); }));
  }

  float step(const py::dict& given, float lr_scale) {
    const std::vector<HostArray> arrays = checked_arrays(*trainer_, given, false);
    const float loss =
        value_or_raise(without_gil([&] { return trainer_->step(arrays, lr_scale); }));
    raise_pending_signal();
    return loss;
  }

  py::dict evaluate(const py::dict& given) {
    const std::vector<HostArray> arrays = checked_arrays(*trainer_, given, false);
    const BatchEvaluation e =
        value_or_raise(without_gil([&] { return trainer_->evaluate(arrays); }));
    raise_pending_signal();
    py::dict out;
    out["loss"] = e.loss;
    if (e.accuracy) out["accuracy"] = *e.accuracy;
    return out;
  }

  py::array_t<float> predict(const py::dict& given) {
    const std::vector<HostArray> arrays = checked_arrays(*trainer_, given, true);
    const BatchOutput out = value_or_raise(without_gil([&] { return trainer_->predict(arrays); }));
    raise_pending_signal();
    return to_numpy(out.shape, out.values);
  }

  // [(name, dtype, shape of one example, is the labels)]
  py::list inputs() const {
    py::list out;
    for (const InputSpec& s : trainer_->inputs()) {
      out.append(py::make_tuple(s.name, s.dtype == DType::f32 ? "float32" : "int32",
                                py::tuple(py::cast(s.example)), s.label));
    }
    return out;
  }

  // [(name, numpy copy, is a parameter)]: the parameters and model state.
  py::list trained() const {
    const std::vector<TrainedTensor> tensors = value_or_raise(trainer_->trained());
    py::list out;
    for (const TrainedTensor& t : tensors) {
      out.append(py::make_tuple(t.name, to_numpy(t.shape, t.data), t.parameter));
    }
    return out;
  }

  void save(const std::string& path, int64_t epoch, int64_t train_examples, int64_t epochs) {
    const RunPosition position{epoch, train_examples, epochs};
    const Status saved = without_gil([&] { return trainer_->save(path, position); });
    if (!saved.is_ok()) raise(error_type, saved.message());
  }

  py::tuple load(const std::string& path) {
    const RunPosition p = value_or_raise(without_gil([&] { return trainer_->load(path); }));
    return py::make_tuple(p.epoch, p.train_examples, p.epochs);
  }

  BatchTrainer& trainer() { return *trainer_; }

 private:
  std::unique_ptr<BatchTrainer> trainer_;
};

}  // namespace

void bind_trainer(py::module_& m) {
  py::class_<PyTrainer>(m, "Trainer")
      .def(py::init<const std::vector<std::string>&>(), py::arg("args"),
           "the trainer of `memfit train ARGS`'s step, on the caller's batches")
      .def("step", &PyTrainer::step, py::arg("arrays"), py::arg("lr_scale"),
           "one micro-batch (a dict of C-contiguous arrays by input name): its loss")
      .def("evaluate", &PyTrainer::evaluate, py::arg("arrays"), "{loss, accuracy} of a batch")
      .def("predict", &PyTrainer::predict, py::arg("arrays"), "the model's output for a batch")
      .def("inputs", &PyTrainer::inputs, "[(name, dtype, example shape, is_labels)]")
      .def("trained", &PyTrainer::trained, "[(name, numpy copy, is_parameter)]")
      .def("save", &PyTrainer::save, py::arg("path"), py::arg("epoch"), py::arg("train_examples"),
           py::arg("epochs"), "a checkpoint in memfit train's format")
      .def("load", &PyTrainer::load, py::arg("path"), "(epoch, train_examples, epochs)")
      .def("plan_json", [](PyTrainer& t) { return t.trainer().plan_json(); })
      .def_property_readonly("batch", [](PyTrainer& t) { return t.trainer().batch(); })
      .def_property_readonly("accumulate", [](PyTrainer& t) { return t.trainer().accumulate(); })
      .def_property_readonly("base_lr", [](PyTrainer& t) { return t.trainer().base_lr(); })
      .def_property_readonly(
          "schedule",
          [](PyTrainer& t) { return std::string(name_of(t.trainer().schedule().kind)); })
      .def(
          "lr_scale",
          [](PyTrainer& t, int64_t step, std::optional<int64_t> total) {
            return t.trainer().lr_scale(step, total);
          },
          py::arg("step"), py::arg("total"),
          "the schedule's factor of the learning rate at optimizer step `step` of `total` "
          "(None: the decay has not begun)")
      .def_property_readonly("counters", [](PyTrainer& t) {
        const StepCounters& c = t.trainer().counters();
        return py::make_tuple(c.micro_step, c.optimizer_step);
      });
}

}  // namespace memfit::python
