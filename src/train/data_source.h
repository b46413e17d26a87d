// Where training examples come from: Fashion-MNIST, a synthetic data set
// made for the model's kind of input (src/train/synthetic.cpp), or the
// user's files: numpy arrays (src/train/array_source.cpp) or token ids
// (src/train/token_source.cpp). A source
// fills a Batch: one buffer per data input of the model, labels included.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "memfit/builder.h"
#include "runtime/executor.h"
#include "train/fashion_mnist.h"

namespace memfit {

// The data inputs of one step, shaped as the model's graph says.
struct Batch {
  struct Input {
    std::string name;
    DType dtype = DType::f32;
    int64_t per_example = 0;     // elements of one example
    std::vector<float> f32;      // f32 inputs: (batch, per_example)
    std::vector<int32_t> i32;    // i32 inputs and labels: (batch, per_example)
  };
  int64_t batch = 0;
  std::vector<Input> inputs;

  // The buffers of `inputs` of `model`'s graph (dimension 0 is the batch).
  static Batch for_model(const Model& model);
  Feeds feeds() const;
  Input* find(const std::string& name);
  const Input* find(const std::string& name) const;
  // The class of every label element: i32 labels as they are; f32 labels
  // (one-hot targets of a squared-error loss) one class per example, the
  // index of its largest element.
  std::vector<int32_t> label_classes() const;
  // Sets the label of example `slot` to class `cls`: an i32 label, or an f32
  // one-hot target of per_example elements.
  Status set_class(int64_t slot, int32_t cls);
};

class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual std::string description() const = 0;
  // The training examples, as a checkpoint records them: two sources with
  // the same identity give the same examples (the description and, for
  // files, a checksum of what was read from them).
  virtual std::string identity() const = 0;
  virtual int64_t train_count() const = 0;
  virtual int64_t test_count() const = 0;
  // Fills every input of `batch` with examples[k] in slot k, from the test set
  // when `test`. The examples are indices below the set's count.
  virtual Status fill(bool test, std::span<const int64_t> examples, Batch& batch) const = 0;
};

// Fashion-MNIST as loaded; the model must read (1, 28, 28) images into 10 classes.
std::unique_ptr<DataSource> fashion_mnist_source(ImageDataset train, ImageDataset test);

// A synthetic data set of `kind` shaped for `model` (whose graph gives the
// example shapes and whose logits give the classes). Example i is a pure
// function of (seed, i): the same on every machine, in any order.
Result<std::unique_ptr<DataSource>> synthetic_source(DataKind kind, const Model& model,
                                                     int64_t train_count, int64_t test_count,
                                                     uint64_t seed);

// Examples from the user's numpy arrays: `train_path` and, unless empty,
// `test_path` (the validation set; none: test_count() is 0), each a .npz
// archive (numpy.savez or savez_compressed) with one array per data input
// of `model`, named as the input (images, labels, tokens, ...), whose first
// dimension counts the examples and whose other dimensions are the input's
// without its batch dimension. Floats (float32, float64) feed f32 inputs
// and integers (int8 to uint64) i32 ones; a single .npy array serves a model
// of one data input. Opening reads every header, checks names, shapes and
// types, scans every integer array once for values outside the input's
// range (labels below the classes, token ids below the embedding rows:
// train/input_ranges.h) and computes the identity's checksum. Uncompressed
// arrays are read in place from a read-only mapping of the file (fill
// converts what it needs); compressed ones are decompressed into memory.
Result<std::unique_ptr<DataSource>> array_file_source(const Model& model,
                                                      const std::string& train_path,
                                                      const std::string& test_path);

// Examples from flat files of token ids (uint16 or uint32 little-endian:
// `element_bytes` 2 or 4) for a model whose data inputs are `tokens` and
// `labels`, both (batch, seq_len) i32: example i is the window of seq_len + 1
// tokens at token_window_offset(seed, test, i, ...), its first seq_len the
// tokens and its last seq_len the labels (the next token of each). A file of
// n tokens gives n / (seq_len + 1) examples, at most `limit` when positive.
// The files are mapped read-only and only the windows filled are read (no
// scan at open: a token id past the vocabulary is an error of fill).
Result<std::unique_ptr<DataSource>> token_file_source(const Model& model,
                                                      const std::string& train_path,
                                                      const std::string& test_path,
                                                      int element_bytes, int64_t limit,
                                                      uint64_t seed);

// Where example `example`'s window starts in a token file with `positions`
// possible starts (tokens - seq_len): uniform in [0, positions), a pure
// function of (seed, test, example); the validation set draws from another
// stream than the training set.
int64_t token_window_offset(uint64_t seed, bool test, int64_t example, int64_t positions);

}  // namespace memfit
