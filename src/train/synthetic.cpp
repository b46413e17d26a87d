// Synthetic data sets, one per kind of input, each with structure a model can
// learn, so that a falling loss means the model learned something:
// - images: each class has a fixed smooth pattern per channel (products of
//   sines of random low frequencies and phases); an example is its class's
//   pattern plus Gaussian noise of standard deviation 0.5.
// - tokens: sequences of a fixed random Markov chain in which every token has
//   four possible successors with probabilities 0.6, 0.2, 0.15 and 0.05 (an
//   entropy of 1.1 nats per token, against ln V for guessing).
// - pairs: a source sequence from the same kind of chain over tokens 1..V-1,
//   and as target the source reversed; the decoder reads the target shifted
//   right after the start token 0.
// - volumes: Gaussian noise with 1 to 3 balls; a ball of class c in [1, K)
//   adds c to its voxels' intensity, and the label of a voxel is the class of
//   the last ball covering it (0: background).
// Every number is a pure function of (seed, stream, example, index), drawn
// with the Philox generator, so data sets are the same on every machine.
#include <algorithm>
#include <cmath>

#include "core/random.h"
#include "train/data_source.h"
#include "train/input_ranges.h"

namespace memfit {
namespace {

// Streams of random draws.
enum Stream : uint64_t {
  kClassStream = 1,
  kPatternStream,
  kNoiseStream,
  kChainStream,
  kSequenceStream,
  kBallStream,
};

// Test examples are drawn far from the training ones.
constexpr int64_t kTestOffset = int64_t{1} << 40;

float uniform(uint64_t seed, uint64_t stream, int64_t example, uint64_t index) {
  return random_uniform(seed, static_cast<uint64_t>(example), stream, index);
}

// A standard normal draw (Box-Muller).
float gaussian(uint64_t seed, uint64_t stream, int64_t example, uint64_t index) {
  const float u1 = uniform(seed, stream, example, 2 * index);
  const float u2 = uniform(seed, stream, example, 2 * index + 1);
  constexpr double kTwoPi = 6.283185307179586;
  return static_cast<float>(std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(kTwoPi * u2));
}

uint32_t bits(uint64_t seed, uint64_t stream, int64_t example, uint64_t index) {
  return random_bits(seed, static_cast<uint64_t>(example), stream, index);
}

// The shapes of one example of each data input, for the identity.
std::string example_shapes(const Model& model) {
  std::string text;
  for (const ValueId in : model.inputs) {
    if (in == model.labels) continue;
    const Value& v = model.graph.value(in);
    const Shape& shape = v.type.shape;
    text += (text.empty() ? "" : ", ") + v.name + " " +
            shape_string(Shape(shape.begin() + std::min<size_t>(1, shape.size()), shape.end()));
  }
  return text;
}

class SyntheticSource : public DataSource {
 public:
  // side: images (C, side, side) and volumes (C, side, side, side); else 0.
  // vocab: token ids lie in [0, vocab) (tokens and pairs; else unused).
  SyntheticSource(DataKind kind, int64_t classes, int64_t vocab, int64_t side, int64_t train_count,
                  int64_t test_count, uint64_t seed, std::string shapes)
      : kind_(kind),
        classes_(classes),
        vocab_(vocab),
        side_(side),
        train_(train_count),
        test_(test_count),
        seed_(seed),
        shapes_(std::move(shapes)) {}

  std::string description() const override {
    const bool ids = kind_ == DataKind::tokens || kind_ == DataKind::pairs;
    return "synthetic " + std::string(data_kind_name(kind_)) + " (" + std::to_string(classes_) +
           " classes" +
           (ids && vocab_ < classes_
                ? "; ids below " + std::to_string(vocab_) + ", the smallest embedding table's rows"
                : "") +
           ")";
  }
  // Example i is a function of (seed, i), which the checkpoint records
  // apart, and of the shapes of the model's inputs.
  std::string identity() const override { return description() + " of " + shapes_; }
  int64_t train_count() const override { return train_; }
  int64_t test_count() const override { return test_; }

  Status fill(bool test, std::span<const int64_t> examples, Batch& batch) const override {
    for (size_t k = 0; k < examples.size(); ++k) {
      const int64_t e = examples[k] + (test ? kTestOffset : 0);
      MEMFIT_RETURN_IF_ERROR(fill_example(e, static_cast<int64_t>(k), batch));
    }
    return Status::ok();
  }

 private:
  Status fill_example(int64_t e, int64_t slot, Batch& batch) const {
    switch (kind_) {
      case DataKind::images:
        return image(e, slot, batch);
      case DataKind::tokens:
        return tokens(e, slot, batch);
      case DataKind::pairs:
        return pair(e, slot, batch);
      case DataKind::volumes:
        return volume(e, slot, batch);
    }
    return Status::error("unknown data kind");
  }

  // Views of one example's slot in an input, with its expected element count checked.
  static Result<std::span<float>> f32_slot(Batch& batch, const char* name, int64_t slot) {
    Batch::Input* in = batch.find(name);
    if (in == nullptr || in->dtype != DType::f32) {
      return Status::error(std::string("the model has no f32 input '") + name + "'");
    }
    return std::span<float>(in->f32).subspan(static_cast<size_t>(slot * in->per_example),
                                             static_cast<size_t>(in->per_example));
  }
  static Result<std::span<int32_t>> i32_slot(Batch& batch, const char* name, int64_t slot) {
    Batch::Input* in = batch.find(name);
    if (in == nullptr || in->dtype != DType::i32) {
      return Status::error(std::string("the model has no i32 input '") + name + "'");
    }
    return std::span<int32_t>(in->i32).subspan(static_cast<size_t>(slot * in->per_example),
                                               static_cast<size_t>(in->per_example));
  }

  Status image(int64_t e, int64_t slot, Batch& batch) const {
    MEMFIT_ASSIGN_OR_RETURN(std::span<float> pixels, f32_slot(batch, "images", slot));
    const auto cls = static_cast<int32_t>(bits(seed_, kClassStream, e, 0) % classes_);
    MEMFIT_RETURN_IF_ERROR(batch.set_class(slot, cls));
    const int64_t side = side_;
    const int64_t channels = static_cast<int64_t>(pixels.size()) / (side * side);
    constexpr double kTwoPi = 6.283185307179586;
    for (int64_t c = 0; c < channels; ++c) {
      // The class's pattern for channel c: frequencies 1..3 and phases, fixed per (class, channel).
      const auto key = static_cast<uint64_t>(cls * channels + c);
      const double fy = 1 + bits(seed_, kPatternStream, 0, 4 * key) % 3;
      const double fx = 1 + bits(seed_, kPatternStream, 0, 4 * key + 1) % 3;
      const double py = kTwoPi * uniform(seed_, kPatternStream, 0, 4 * key + 2);
      const double px = kTwoPi * uniform(seed_, kPatternStream, 0, 4 * key + 3);
      for (int64_t y = 0; y < side; ++y) {
        for (int64_t x = 0; x < side; ++x) {
          const int64_t i = (c * side + y) * side + x;
          const double pattern = std::sin(kTwoPi * fy * static_cast<double>(y) / side + py) *
                                 std::cos(kTwoPi * fx * static_cast<double>(x) / side + px);
          pixels[static_cast<size_t>(i)] = static_cast<float>(
              pattern + 0.5 * gaussian(seed_, kNoiseStream, e, static_cast<uint64_t>(i)));
        }
      }
    }
    return Status::ok();
  }

  // The chain: successor j of token a is a fixed random token.
  int32_t next_token(int32_t a, float draw, int64_t vocab, int32_t lowest) const {
    static constexpr float kCumulative[] = {0.6f, 0.8f, 0.95f, 1.0f};
    uint64_t j = 0;
    while (j < 3 && draw >= kCumulative[j]) ++j;
    const auto range = static_cast<uint32_t>(vocab - lowest);
    return lowest + static_cast<int32_t>(
                        bits(seed_, kChainStream, 0, static_cast<uint64_t>(a) * 4 + j) % range);
  }

  // `count` tokens of the chain in [lowest, vocab), drawn for example e.
  void chain(int64_t e, int64_t vocab, int32_t lowest, std::span<int32_t> out) const {
    const auto range = static_cast<uint32_t>(vocab - lowest);
    int32_t token = lowest + static_cast<int32_t>(bits(seed_, kSequenceStream, e, 0) % range);
    for (size_t t = 0; t < out.size(); ++t) {
      out[t] = token;
      token = next_token(token, uniform(seed_, kSequenceStream, e, t + 1), vocab, lowest);
    }
  }

  Status tokens(int64_t e, int64_t slot, Batch& batch) const {
    MEMFIT_ASSIGN_OR_RETURN(std::span<int32_t> tokens, i32_slot(batch, "tokens", slot));
    MEMFIT_ASSIGN_OR_RETURN(std::span<int32_t> labels, i32_slot(batch, "labels", slot));
    std::vector<int32_t> sequence(tokens.size() + 1);
    chain(e, vocab_, 0, sequence);
    std::copy(sequence.begin(), sequence.end() - 1, tokens.begin());
    std::copy(sequence.begin() + 1, sequence.end(), labels.begin());
    return Status::ok();
  }

  Status pair(int64_t e, int64_t slot, Batch& batch) const {
    MEMFIT_ASSIGN_OR_RETURN(std::span<int32_t> source, i32_slot(batch, "source", slot));
    MEMFIT_ASSIGN_OR_RETURN(std::span<int32_t> target_in, i32_slot(batch, "target_in", slot));
    MEMFIT_ASSIGN_OR_RETURN(std::span<int32_t> labels, i32_slot(batch, "labels", slot));
    if (target_in.size() != labels.size() || labels.size() > source.size()) {
      return Status::error("pairs need a target no longer than the source");
    }
    chain(e, vocab_, 1, source);
    for (size_t t = 0; t < labels.size(); ++t) labels[t] = source[source.size() - 1 - t];
    target_in[0] = 0;
    std::copy(labels.begin(), labels.end() - 1, target_in.begin() + 1);
    return Status::ok();
  }

  Status volume(int64_t e, int64_t slot, Batch& batch) const {
    MEMFIT_ASSIGN_OR_RETURN(std::span<float> voxels, f32_slot(batch, "volume", slot));
    MEMFIT_ASSIGN_OR_RETURN(std::span<int32_t> labels, i32_slot(batch, "labels", slot));
    const int64_t side = side_, cube = side * side * side;
    const int64_t channels = static_cast<int64_t>(voxels.size()) / cube;
    std::fill(labels.begin(), labels.end(), 0);
    const int balls = 1 + static_cast<int>(bits(seed_, kBallStream, e, 0) % 3);
    for (int b = 0; b < balls && classes_ > 1; ++b) {
      const auto key = static_cast<uint64_t>(1 + 5 * b);
      const auto cls = static_cast<int32_t>(1 + bits(seed_, kBallStream, e, key) % (classes_ - 1));
      const double r = std::max(1.0, side * (0.125 + 0.125 * uniform(seed_, kBallStream, e, key + 1)));
      double center[3];
      for (int d = 0; d < 3; ++d) center[d] = side * uniform(seed_, kBallStream, e, key + 2 + d);
      for (int64_t z = 0; z < side; ++z) {
        for (int64_t y = 0; y < side; ++y) {
          for (int64_t x = 0; x < side; ++x) {
            const double dz = z - center[0], dy = y - center[1], dx = x - center[2];
            if (dz * dz + dy * dy + dx * dx <= r * r) {
              labels[static_cast<size_t>((z * side + y) * side + x)] = cls;
            }
          }
        }
      }
    }
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t i = 0; i < cube; ++i) {
        const auto index = static_cast<size_t>(c * cube + i);
        voxels[index] = static_cast<float>(labels[static_cast<size_t>(i)]) +
                        0.5f * gaussian(seed_, kNoiseStream, e, index);
      }
    }
    return Status::ok();
  }

  DataKind kind_;
  int64_t classes_, vocab_, side_, train_, test_;
  uint64_t seed_;
  std::string shapes_;  // example_shapes
};

// The shape of input `name` of `model`, or an error naming the kind.
Result<Shape> input_shape(const Model& model, DataKind kind, const std::string& name) {
  for (const ValueId id : model.inputs) {
    if (model.graph.value(id).name == name) return model.graph.value(id).type.shape;
  }
  return Status::error("model " + model.name + " has no input '" + name + "' that " +
                       std::string(data_kind_name(kind)) + " data need");
}

}  // namespace

Result<std::unique_ptr<DataSource>> synthetic_source(DataKind kind, const Model& model,
                                                     int64_t train_count, int64_t test_count,
                                                     uint64_t seed) {
  if (train_count < 1 || test_count < 1) {
    return Status::error("a synthetic data set needs at least one training and one test example");
  }
  if (!model.logits.valid() || !model.labels.valid()) {
    return Status::error("model " + model.name + " has no labels to train against");
  }
  if (model.graph.value(model.labels).type.dtype == DType::f32 && kind != DataKind::images) {
    return Status::error("model " + model.name + " trains against f32 targets (a squared error), "
                         "which synthetic data gives only for images, as one-hot classes; " +
                         std::string(data_kind_name(kind)) + " need class labels (cross-entropy)");
  }
  const int64_t classes = classes_of(model);
  const int64_t vocab = ids_below(model, classes);  // tokens and pairs
  int64_t side = 0;
  switch (kind) {
    case DataKind::images: {
      MEMFIT_ASSIGN_OR_RETURN(Shape images, input_shape(model, kind, "images"));
      if (images.size() != 4 || images[2] != images[3]) {
        return Status::error("synthetic images are (N, C, S, S), the model reads " +
                             shape_string(images));
      }
      side = images[2];
      break;
    }
    case DataKind::tokens:
      MEMFIT_RETURN_IF_ERROR(input_shape(model, kind, "tokens").status());
      if (vocab < 1) return Status::error("tokens need a vocabulary");
      break;
    case DataKind::pairs:
      MEMFIT_RETURN_IF_ERROR(input_shape(model, kind, "source").status());
      MEMFIT_RETURN_IF_ERROR(input_shape(model, kind, "target_in").status());
      if (vocab < 2) return Status::error("pairs need a vocabulary of at least 2 tokens");
      break;
    case DataKind::volumes: {
      MEMFIT_ASSIGN_OR_RETURN(Shape volume, input_shape(model, kind, "volume"));
      if (volume.size() != 5 || volume[2] != volume[3] || volume[3] != volume[4]) {
        return Status::error("synthetic volumes are (N, C, S, S, S), the model reads " +
                             shape_string(volume));
      }
      side = volume[2];
      break;
    }
  }
  return std::unique_ptr<DataSource>(std::make_unique<SyntheticSource>(
      kind, classes, vocab, side, train_count, test_count, seed, example_shapes(model)));
}

}  // namespace memfit
