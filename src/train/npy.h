// numpy's .npy format (numpy.lib.format, versions 1.0, 2.0 and 3.0): the
// magic "\x93NUMPY", a version, a header length, then a Python dict literal
// such as {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 784), }
// padded with spaces to a newline, then the elements in C order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "memfit/ir.h"
#include "memfit/status.h"

namespace memfit {

// The element types memfit reads: little-endian floats and integers.
enum class NpyType : uint8_t { f4, f8, i1, u1, i2, u2, i4, u4, i8, u8 };

bool npy_is_float(NpyType type);
size_t npy_size(NpyType type);
// numpy's name: "float32", "int64", ...
std::string_view npy_name(NpyType type);
// A shape as numpy prints it: (60000, 784), (60000,), ().
std::string npy_shape_string(const Shape& shape);

inline constexpr std::string_view kNpyMagic = "\x93NUMPY";

struct NpyHeader {
  NpyType type = NpyType::f4;
  Shape shape;               // () for a scalar
  uint64_t data_offset = 0;  // where the elements start, from the magic
  uint64_t data_bytes = 0;   // elements times their size, as the header declares
};

// Parses the header at the start of `bytes` (a .npy file or zip member);
// `where` names it in messages ("array file data.npz, array 'images'").
// Refuses Fortran order, big-endian and non-numeric types (objects,
// strings, structures, booleans), saying how to convert them. Does not
// check that the data follows: the caller compares data_bytes with what it has.
Result<NpyHeader> parse_npy_header(std::span<const uint8_t> bytes, const std::string& where);

// Converts `count` elements of `type` at `src` (any alignment). Integers
// to f32 round; to i32 they must lie in i32's range (checked before).
void npy_to_f32(NpyType type, const uint8_t* src, int64_t count, float* dst);
void npy_to_i32(NpyType type, const uint8_t* src, int64_t count, int32_t* dst);

// The first of `count` integer elements at `src` outside [0, below), as
// (flat index, value); index -1 when all lie inside. Values of u8 past
// 2^63 read as negative, which is outside too.
struct NpyOutlier {
  int64_t index = -1;
  int64_t value = 0;
};
NpyOutlier npy_first_outside(NpyType type, const uint8_t* src, int64_t count, int64_t below);

}  // namespace memfit
