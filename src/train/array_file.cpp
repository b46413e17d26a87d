#include "train/array_file.h"

#include <zip.h>

#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "core/text.h"

namespace memfit {
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;        // "PK\3\4"
constexpr uint32_t kCentralHeader = 0x02014b50;      // "PK\1\2"
constexpr uint32_t kEndOfCentral = 0x06054b50;       // "PK\5\6"
constexpr uint32_t kZip64EndLocator = 0x07064b50;    // "PK\6\7"
constexpr uint32_t kZip64EndOfCentral = 0x06064b50;  // "PK\6\6"

uint64_t le(std::span<const uint8_t> bytes, uint64_t at, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
  return v;
}

std::string damaged_zip(const std::string& path, const std::string& problem) {
  return "array file " + path + ": " + problem +
         "; the .npz archive is damaged or cut short: write it again with numpy.savez";
}

// The offset of each member's local header, by name, from the zip's central
// directory (APPNOTE.TXT 4.3.12-4.3.16, with the zip64 records of 4.3.14-15
// and the zip64 extra field of 4.5.3). libzip reads the same directory but
// does not tell where a member's data starts; memfit needs that to read a
// stored member in place.
Result<std::map<std::string, uint64_t>> local_header_offsets(std::span<const uint8_t> zip,
                                                             const std::string& path) {
  const uint64_t size = zip.size();
  if (size < 22) return Status::error(damaged_zip(path, "too short for a zip directory"));
  // The end record is 22 bytes plus a comment of at most 65535.
  std::optional<uint64_t> end;
  const uint64_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  for (uint64_t at = size - 22 + 1; at-- > lowest;) {
    if (le(zip, at, 4) == kEndOfCentral) {
      end = at;
      break;
    }
  }
  if (!end) return Status::error(damaged_zip(path, "no end of central directory record"));
  uint64_t entries = le(zip, *end + 10, 2);
  uint64_t directory = le(zip, *end + 16, 4);
  if ((entries == 0xFFFF || directory == 0xFFFFFFFF) && *end >= 20 &&
      le(zip, *end - 20, 4) == kZip64EndLocator) {
    const uint64_t end64 = le(zip, *end - 20 + 8, 8);
    if (size < 56 || end64 > size - 56 || le(zip, end64, 4) != kZip64EndOfCentral) {
      return Status::error(damaged_zip(path, "a bad zip64 end of central directory record"));
    }
    entries = le(zip, end64 + 32, 8);
    directory = le(zip, end64 + 48, 8);
  }
  std::map<std::string, uint64_t> offsets;
  uint64_t at = directory;
  for (uint64_t e = 0; e < entries; ++e) {
    if (size < 46 || at > size - 46 || le(zip, at, 4) != kCentralHeader) {
      return Status::error(damaged_zip(path, "a bad central directory entry"));
    }
    const uint64_t name_length = le(zip, at + 28, 2);
    const uint64_t extra_length = le(zip, at + 30, 2);
    const uint64_t comment_length = le(zip, at + 32, 2);
    const uint64_t next = at + 46 + name_length + extra_length + comment_length;
    if (next > size) return Status::error(damaged_zip(path, "a bad central directory entry"));
    const std::string name(reinterpret_cast<const char*>(zip.data() + at + 46), name_length);
    uint64_t offset = le(zip, at + 42, 4);
    if (offset == 0xFFFFFFFF) {
      // The zip64 extra field holds, in order, those of the uncompressed
      // size, compressed size and offset whose 32-bit fields are all ones.
      uint64_t field = at + 46 + name_length;
      const uint64_t fields_end = field + extra_length;
      while (field + 4 <= fields_end) {
        const uint64_t id = le(zip, field, 2), length = le(zip, field + 2, 2);
        if (field + 4 + length > fields_end) {
          return Status::error(damaged_zip(path, "a bad extra field of member " + name));
        }
        if (id == 0x0001) {
          uint64_t slot = field + 4;
          if (le(zip, at + 24, 4) == 0xFFFFFFFF) slot += 8;
          if (le(zip, at + 20, 4) == 0xFFFFFFFF) slot += 8;
          if (slot + 8 > field + 4 + length) {
            return Status::error(damaged_zip(path, "a bad zip64 field of member " + name));
          }
          offset = le(zip, slot, 8);
        }
        field += 4 + length;
      }
    }
    offsets[name] = offset;
    at = next;
  }
  return offsets;
}

// Where member `name`'s data starts: after its local header (whose name and
// extra field may differ in length from the central directory's).
Result<uint64_t> stored_data_offset(std::span<const uint8_t> zip, const std::string& path,
                                    const std::string& name, uint64_t local) {
  if (zip.size() < 30 || local > zip.size() - 30 || le(zip, local, 4) != kLocalHeader) {
    return Status::error(damaged_zip(path, "no local header of member " + name));
  }
  return local + 30 + le(zip, local + 26, 2) + le(zip, local + 28, 2);
}

std::string zip_problem(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

// Checks that `bytes` hold exactly the header and the data it declares.
Status check_length(const NpyHeader& header, uint64_t bytes, const std::string& where) {
  const uint64_t expected = header.data_offset + header.data_bytes;
  if (bytes == expected) return Status::ok();
  return Status::error(
      format("%s: the header declares %s %s (%llu bytes of data) but %llu bytes follow it%s",
             where.c_str(), npy_shape_string(header.shape).c_str(),
             std::string(npy_name(header.type)).c_str(),
             static_cast<unsigned long long>(header.data_bytes),
             static_cast<unsigned long long>(bytes - header.data_offset),
             bytes < expected ? " (truncated)" : ""));
}

// An array in place: in `bytes` (its whole member, or the .npy file).
Result<NpyArray> array_in(std::span<const uint8_t> bytes, std::string name,
                          const std::string& where, bool mapped) {
  MEMFIT_ASSIGN_OR_RETURN(const NpyHeader header, parse_npy_header(bytes, where));
  MEMFIT_RETURN_IF_ERROR(check_length(header, bytes.size(), where));
  NpyArray array;
  array.name = std::move(name);
  array.header = header;
  array.data = bytes.subspan(header.data_offset, header.data_bytes);
  array.mapped = mapped;
  return array;
}

struct ZipCloser {
  void operator()(zip_t* zip) const { zip_discard(zip); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* file) const { zip_fclose(file); }
};

}  // namespace

Result<ArrayFile> ArrayFile::open(const std::string& path) {
  ArrayFile result;
  MEMFIT_ASSIGN_OR_RETURN(result.file_, MappedFile::open(path, "array file"));
  const std::span<const uint8_t> bytes = result.file_.bytes();
  const auto starts = [&](std::string_view magic) {
    return bytes.size() >= magic.size() &&
           std::memcmp(bytes.data(), magic.data(), magic.size()) == 0;
  };
  if (starts(kNpyMagic)) {
    MEMFIT_ASSIGN_OR_RETURN(NpyArray array, array_in(bytes, "", "array file " + path, true));
    result.arrays_.push_back(std::move(array));
    return result;
  }
  if (!starts("PK\x03\x04") && !starts("PK\x05\x06")) {
    return Status::error("array file " + path +
                         " is neither a .npy array (numpy.save) nor a .npz archive of arrays "
                         "(numpy.savez, a zip file)" +
                         (bytes.empty() ? ": it is empty" : ""));
  }
  result.npz_ = true;
  int code = 0;
  std::unique_ptr<zip_t, ZipCloser> zip(zip_open(path.c_str(), ZIP_RDONLY, &code));
  if (zip == nullptr)
    return Status::error(damaged_zip(path, "cannot read it as a zip: " + zip_problem(code)));
  MEMFIT_ASSIGN_OR_RETURN(const auto offsets, local_header_offsets(bytes, path));
  const zip_int64_t members = zip_get_num_entries(zip.get(), 0);
  for (zip_int64_t m = 0; m < members; ++m) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(zip.get(), static_cast<zip_uint64_t>(m), 0, &st) != 0) {
      return Status::error(damaged_zip(path, zip_strerror(zip.get())));
    }
    const std::string member = st.name;
    std::string name = member;
    if (name.size() > 4 && name.ends_with(".npy")) name.resize(name.size() - 4);
    const std::string where = "array file " + path + ", array '" + name + "'";
    if (st.comp_method == ZIP_CM_STORE) {
      const auto local = offsets.find(member);
      if (local == offsets.end() || st.comp_size != st.size) {
        return Status::error(damaged_zip(path, "member " + member + " is not in the directory"));
      }
      MEMFIT_ASSIGN_OR_RETURN(const uint64_t start,
                              stored_data_offset(bytes, path, member, local->second));
      if (start > bytes.size() || st.size > bytes.size() - start) {
        return Status::error(
            damaged_zip(path, "member " + member + " reaches past the file's end"));
      }
      // parse_npy_header checks that the bytes found start with .npy's magic.
      MEMFIT_ASSIGN_OR_RETURN(NpyArray array,
                              array_in(bytes.subspan(start, st.size), name, where, true));
      result.arrays_.push_back(std::move(array));
      continue;
    }
    // Compressed (numpy.savez_compressed): decompressed once. Deflate
    // shrinks by at most 1032:1, so a directory that claims more is damaged
    // (and cannot make memfit allocate without bound); so is one whose
    // compressed bytes claim more than the whole file.
    if (st.comp_size > bytes.size() || st.size > st.comp_size * 1032 + 1024) {
      return Status::error(
          damaged_zip(path, "member " + member + " claims more bytes than it can hold"));
    }
    std::unique_ptr<zip_file_t, ZipFileCloser> in(
        zip_fopen_index(zip.get(), static_cast<zip_uint64_t>(m), 0));
    if (in == nullptr) {
      return Status::error(
          damaged_zip(path, "cannot read member " + member + ": " + zip_strerror(zip.get())));
    }
    std::vector<uint8_t> inflated(st.size);
    uint64_t got = 0;
    while (got < st.size) {
      const zip_int64_t n = zip_fread(in.get(), inflated.data() + got, st.size - got);
      if (n <= 0) {
        return Status::error(
            damaged_zip(path, "cannot decompress member " + member + ": " +
                                  (n < 0 ? zip_file_strerror(in.get()) : "it ends early")));
      }
      got += static_cast<uint64_t>(n);
    }
    // libzip compares the member's CRC-32 when a read reaches its end.
    uint8_t past_end = 0;
    if (zip_fread(in.get(), &past_end, 1) != 0) {
      return Status::error(damaged_zip(path, "member " + member +
                                                 " fails its CRC-32 check or is longer than "
                                                 "the directory says"));
    }
    result.inflated_.push_back(std::move(inflated));
    MEMFIT_ASSIGN_OR_RETURN(NpyArray array, array_in(result.inflated_.back(), name, where, false));
    result.arrays_.push_back(std::move(array));
  }
  return result;
}

}  // namespace memfit
