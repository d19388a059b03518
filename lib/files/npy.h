#pragma once
// Minimal .npy reader/writer (NumPy format versions 1.0, 2.0 and 3.0).
// Reads little-endian, C-order int64 / int32 / uint8 / float32 arrays; writes int64, float32 and uint8
// in version 1.0 with the header padded to a multiple of 64 bytes, exactly as numpy.save does.
// Every malformed file is reported as an rmt::Error naming the file, never a crash.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace rmt {

enum class NpyDtype { int64, int32, uint8, float32 };

struct NpyHeader {
  NpyDtype dtype = NpyDtype::int64;
  std::vector<int64_t> shape;  // C order
  size_t data_offset = 0;      // bytes before the array data
  int64_t numel() const;
  size_t item_size() const;
};

struct NpyArray {
  NpyDtype dtype = NpyDtype::int64;
  std::vector<int64_t> shape;
  std::vector<int64_t> ints;    // filled for integer dtypes (widened to int64)
  std::vector<float> floats;    // filled for float32
};

// Parses the header at the start of `bytes` (a whole file or just its first bytes).
// `name` is used in error messages.
NpyHeader parse_npy_header(std::string_view bytes, const std::string& name);
// Reads only the header of a file (cheap for large arrays).
NpyHeader read_npy_header(const std::filesystem::path& path);
// Parses a whole in-memory file; checks that the data length matches the shape exactly.
NpyArray parse_npy(std::string_view bytes, const std::string& name);
NpyArray read_npy(const std::filesystem::path& path);
// Reads an integer array and fails unless it is 2-D with at least one column; returns values
// widened to int64. Header, dtype, shape and size are checked before any element is read.
std::vector<int64_t> parse_npy_int_matrix(std::string_view bytes, const std::string& name, int64_t& rows,
                                          int64_t& cols);
std::vector<int64_t> read_npy_int_matrix(const std::filesystem::path& path, int64_t& rows, int64_t& cols);

// The bytes of a .npy file; data.size() must equal the product of shape.
std::string npy_bytes_int64(const std::vector<int64_t>& shape, const int64_t* data);
std::string npy_bytes_float32(const std::vector<int64_t>& shape, const float* data);
// The header numpy.save writes before a C-order uint8 array ('|u1') of `shape`: a writer appends
// the raw bytes (byte-level text splits, read straight in after it).
std::string npy_header_uint8(const std::vector<int64_t>& shape);
// Atomic writes (via write_file_atomic).
void write_npy_int64(const std::filesystem::path& path, const std::vector<int64_t>& shape, const int64_t* data);
void write_npy_float32(const std::filesystem::path& path, const std::vector<int64_t>& shape, const float* data);

}  // namespace rmt
