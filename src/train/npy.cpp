#include "train/npy.h"

#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "core/text.h"

namespace memfit {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader takes little-endian elements as they are");

// What the readers accept, by numpy's 'descr' without its byte order.
struct TypeName {
  std::string_view code;
  NpyType type;
  std::string_view name;
};
constexpr TypeName kTypes[] = {
    {"f4", NpyType::f4, "float32"}, {"f8", NpyType::f8, "float64"}, {"i1", NpyType::i1, "int8"},
    {"u1", NpyType::u1, "uint8"},   {"i2", NpyType::i2, "int16"},   {"u2", NpyType::u2, "uint16"},
    {"i4", NpyType::i4, "int32"},   {"u4", NpyType::u4, "uint32"},  {"i8", NpyType::i8, "int64"},
    {"u8", NpyType::u8, "uint64"},
};

constexpr std::string_view kSupported =
    "float32, float64, int8, uint8, int16, uint16, int32, uint32, int64 or uint64";

// A value of the header dict: a string, a bool, a tuple of integers, or a
// list (structured types' descr), which is refused.
struct DictValue {
  enum class Kind { string, boolean, tuple, list } kind = Kind::string;
  std::string text = {};
  bool flag = false;
  std::vector<int64_t> numbers = {};
};

// A parser of the Python literal numpy writes (format.py's
// _write_array_header: repr of a dict of str keys).
class DictParser {
 public:
  explicit DictParser(std::string_view text) : text_(text) {}

  // The entries in order, or nullopt when the text is not such a dict.
  std::optional<std::vector<std::pair<std::string, DictValue>>> parse() {
    std::vector<std::pair<std::string, DictValue>> entries;
    skip_space();
    if (!eat('{')) return std::nullopt;
    for (;;) {
      skip_space();
      if (eat('}')) break;
      std::string key;
      if (!string(key)) return std::nullopt;
      skip_space();
      if (!eat(':')) return std::nullopt;
      skip_space();
      DictValue value;
      if (!parse_value(value)) return std::nullopt;
      entries.emplace_back(std::move(key), std::move(value));
      skip_space();
      if (eat('}')) break;
      if (!eat(',')) return std::nullopt;
    }
    skip_space();
    if (pos_ != text_.size()) return std::nullopt;
    return entries;
  }

 private:
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool word(std::string_view w) {
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  bool string(std::string& out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') return false;  // numpy's keys and types need no escapes
      out += text_[pos_++];
    }
    return eat(quote);
  }
  bool integer(int64_t& out) {
    const size_t start = pos_;
    out = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      if (out > (std::numeric_limits<int64_t>::max() - 9) / 10) return false;
      out = out * 10 + (text_[pos_++] - '0');
    }
    word("L");  // Python 2's long integers, in files numpy wrote long ago
    return pos_ > start;
  }
  // Skips a (nested) list, keeping its text: a structured type's descr.
  bool list(std::string& out) {
    int depth = 0;
    const size_t start = pos_;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '[') ++depth;
      if (c == ']' && --depth == 0) {
        out = std::string(text_.substr(start, pos_ - start));
        return true;
      }
    }
    return false;
  }
  bool parse_value(DictValue& value) {
    if (pos_ < text_.size() && (text_[pos_] == '\'' || text_[pos_] == '"')) {
      value.kind = DictValue::Kind::string;
      return string(value.text);
    }
    if (word("True") || word("False")) {
      value.kind = DictValue::Kind::boolean;
      value.flag = text_[pos_ - 1] == 'e' && text_[pos_ - 2] == 'u';  // "True", not "False"
      return true;
    }
    if (pos_ < text_.size() && text_[pos_] == '[') {
      value.kind = DictValue::Kind::list;
      return list(value.text);
    }
    if (!eat('(')) return false;
    value.kind = DictValue::Kind::tuple;
    for (;;) {
      skip_space();
      if (eat(')')) return true;
      int64_t n = 0;
      if (!integer(n)) return false;
      value.numbers.push_back(n);
      skip_space();
      if (eat(')')) return true;
      if (!eat(',')) return false;
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t read_le(const uint8_t* p, size_t bytes) {
  uint32_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}

// The type of a 'descr' string, or an error that says why it is refused.
Result<NpyType> type_of(const std::string& descr, const std::string& where) {
  if (descr.size() >= 2) {
    const char order = descr[0];
    const std::string_view code = std::string_view(descr).substr(1);
    for (const TypeName& t : kTypes) {
      if (code != t.code) continue;
      if (order == '<' || order == '|' || order == '=') return t.type;  // '=': native, little here
      if (order == '>') {
        return Status::error(
            format("%s: big-endian %s ('%s'); memfit reads little-endian arrays: save "
                   "array.astype('<%s')",
                   where.c_str(), std::string(t.name).c_str(), descr.c_str(),
                   std::string(t.code).c_str()));
      }
    }
    if (code == "b1") {
      return Status::error(where + ": a boolean array ('" + descr +
                           "'); save it as numbers, e.g. array.astype('uint8')");
    }
    if (code[0] == 'O') {
      return Status::error(where + ": an object array ('" + descr +
                           "', Python objects, not numbers); memfit reads arrays of " +
                           std::string(kSupported));
    }
  }
  return Status::error(where + ": element type '" + descr +
                       "' is not one memfit reads; save the array as " + std::string(kSupported) +
                       " (little-endian)");
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Calls f(i, value) for each of `count` elements of `type` at `src`,
// `value` in the element's own C++ type; stops when f returns false.
template <class F>
void for_each_element(NpyType type, const uint8_t* src, int64_t count, F&& f) {
  auto run = [&]<class T>(T) {
    for (int64_t i = 0; i < count; ++i) {
      if (!f(i, load<T>(src + i * static_cast<int64_t>(sizeof(T))))) return;
    }
  };
  switch (type) {
    case NpyType::f4:
      return run(float{});
    case NpyType::f8:
      return run(double{});
    case NpyType::i1:
      return run(int8_t{});
    case NpyType::u1:
      return run(uint8_t{});
    case NpyType::i2:
      return run(int16_t{});
    case NpyType::u2:
      return run(uint16_t{});
    case NpyType::i4:
      return run(int32_t{});
    case NpyType::u4:
      return run(uint32_t{});
    case NpyType::i8:
      return run(int64_t{});
    case NpyType::u8:
      return run(uint64_t{});
  }
}

}  // namespace

bool npy_is_float(NpyType type) { return type == NpyType::f4 || type == NpyType::f8; }

size_t npy_size(NpyType type) {
  switch (type) {
    case NpyType::i1:
    case NpyType::u1:
      return 1;
    case NpyType::i2:
    case NpyType::u2:
      return 2;
    case NpyType::f4:
    case NpyType::i4:
    case NpyType::u4:
      return 4;
    case NpyType::f8:
    case NpyType::i8:
    case NpyType::u8:
      return 8;
  }
  return 0;
}

std::string_view npy_name(NpyType type) {
  for (const TypeName& t : kTypes) {
    if (t.type == type) return t.name;
  }
  return "?";
}

std::string npy_shape_string(const Shape& shape) {
  std::string text = "(";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

Result<NpyHeader> parse_npy_header(std::span<const uint8_t> bytes, const std::string& where) {
  const auto starts = [&](std::string_view magic) {
    return bytes.size() >= magic.size() &&
           std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
  };
  if (!starts(kNpyMagic)) {
    return Status::error(where +
                         ": not a .npy array (it does not start with numpy's magic "
                         "\\x93NUMPY); write it with numpy.save or numpy.savez");
  }
  if (bytes.size() < 10) return Status::error(where + ": truncated inside the .npy header");
  const int major = bytes[6], minor = bytes[7];
  if (minor != 0 || major < 1 || major > 3) {
    return Status::error(
        format("%s: .npy format version %d.%d; memfit reads versions 1.0, 2.0 and 3.0",
               where.c_str(), major, minor));
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_bytes)
    return Status::error(where + ": truncated inside the .npy header");
  const uint64_t header_length = read_le(bytes.data() + 8, length_bytes);
  const uint64_t data_offset = 8 + length_bytes + header_length;
  if (bytes.size() < data_offset) {
    return Status::error(
        format("%s: truncated: the .npy header declares %llu bytes but the array "
               "holds %llu in all",
               where.c_str(), static_cast<unsigned long long>(data_offset),
               static_cast<unsigned long long>(bytes.size())));
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + 8 + length_bytes),
                              header_length);
  const auto entries = DictParser(text).parse();
  if (!entries) {
    return Status::error(where + ": the .npy header is not the dict numpy writes: " +
                         std::string(text.substr(0, 200)));
  }
  const DictValue* descr = nullptr;
  const DictValue* fortran = nullptr;
  const DictValue* shape = nullptr;
  for (const auto& [key, value] : *entries) {
    if (key == "descr") descr = &value;
    if (key == "fortran_order") fortran = &value;
    if (key == "shape") shape = &value;
  }
  if (descr == nullptr || fortran == nullptr || shape == nullptr ||
      fortran->kind != DictValue::Kind::boolean || shape->kind != DictValue::Kind::tuple) {
    return Status::error(where + ": the .npy header lacks 'descr', 'fortran_order' or 'shape': " +
                         std::string(text.substr(0, 200)));
  }
  if (descr->kind == DictValue::Kind::list) {
    return Status::error(where + ": a structured array (" + descr->text.substr(0, 100) +
                         "); save each field as an array of its own");
  }
  if (descr->kind != DictValue::Kind::string) {
    return Status::error(where + ": the .npy header's 'descr' is not a type name");
  }
  NpyHeader header;
  MEMFIT_ASSIGN_OR_RETURN(header.type, type_of(descr->text, where));
  if (fortran->flag) {
    return Status::error(where +
                         ": the array is stored in Fortran (column-major) order; save "
                         "numpy.ascontiguousarray(array) instead");
  }
  header.shape = shape->numbers;
  uint64_t bytes_total = npy_size(header.type);
  for (const int64_t d : header.shape) {
    if (__builtin_mul_overflow(bytes_total, static_cast<uint64_t>(d), &bytes_total) ||
        bytes_total > (uint64_t{1} << 62)) {
      return Status::error(where + ": the shape " + npy_shape_string(header.shape) +
                           " declares more bytes than any file holds");
    }
  }
  header.data_offset = data_offset;
  header.data_bytes = bytes_total;
  return header;
}

void npy_to_f32(NpyType type, const uint8_t* src, int64_t count, float* dst) {
  for_each_element(type, src, count, [&](int64_t i, auto v) {
    dst[i] = static_cast<float>(v);
    return true;
  });
}

void npy_to_i32(NpyType type, const uint8_t* src, int64_t count, int32_t* dst) {
  for_each_element(type, src, count, [&](int64_t i, auto v) {
    dst[i] = static_cast<int32_t>(v);
    return true;
  });
}

NpyOutlier npy_first_outside(NpyType type, const uint8_t* src, int64_t count, int64_t below) {
  NpyOutlier outlier;
  for_each_element(type, src, count, [&](int64_t i, auto v) {
    const auto value = static_cast<int64_t>(v);
    if (value >= 0 && value < below) return true;
    outlier = {i, value};
    return false;
  });
  return outlier;
}

}  // namespace memfit
