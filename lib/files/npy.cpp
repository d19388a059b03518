#include "lib/files/npy.h"

#include <cstring>
#include <fstream>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;

static_assert(sizeof(float) == 4, "float32 must be 4 bytes");

// The reader copies raw bytes into native integers, so the host must be little-endian too.
static bool host_is_little_endian() {
  const uint16_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// parse_npy_header has checked that the product fits (checked_numel), so this cannot overflow.
int64_t NpyHeader::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The element count of a shape, or -1 when a dimension is negative or the product (or the
// product times 8, the largest item size) would not fit in an int64.
static int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  const int64_t limit = std::numeric_limits<int64_t>::max() / 8;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > limit / d) return -1;
    n *= d;
  }
  return n;
}

static std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

size_t NpyHeader::item_size() const {
  switch (dtype) {
    case NpyDtype::int64: return 8;
    case NpyDtype::int32: return 4;
    case NpyDtype::uint8: return 1;
    case NpyDtype::float32: return 4;
  }
  return 0;
}

static const char kMagic[] = "\x93NUMPY";
// numpy itself refuses headers over 10000 bytes by default; anything near this limit is a
// corrupt length field, and reading it would allocate for nothing.
constexpr size_t kMaxHeaderLen = size_t(1) << 20;

static const char* dtype_name(NpyDtype dtype) {
  switch (dtype) {
    case NpyDtype::int64: return "int64";
    case NpyDtype::int32: return "int32";
    case NpyDtype::uint8: return "uint8";
    case NpyDtype::float32: return "float32";
  }
  return "?";
}

// Magic and version; returns the header length and sets `prefix` (the bytes before the header).
static size_t parse_npy_prefix(std::string_view bytes, const std::string& name, size_t& prefix) {
  if (!host_is_little_endian()) fail("{}: .npy reading needs a little-endian host", name);
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view(kMagic, 6))
    fail("{}: not a .npy file (bad magic)", name);
  const int major = (unsigned char)bytes[6], minor = (unsigned char)bytes[7];
  size_t header_len = 0;
  if (major == 1) {
    header_len = size_t((unsigned char)bytes[8]) | size_t((unsigned char)bytes[9]) << 8;
    prefix = 10;
  } else if (major == 2 || major == 3) {  // 3.0 only changes the header's text encoding (utf-8)
    if (bytes.size() < 12) fail("{}: truncated npy header", name);
    for (int k = 0; k < 4; k++) header_len |= size_t((unsigned char)bytes[8 + k]) << (8 * k);
    prefix = 12;
  } else {
    fail("{}: unsupported npy format version {}.{} (supported: 1.0, 2.0, 3.0)", name, major, minor);
  }
  if (header_len > kMaxHeaderLen)
    fail("{}: corrupt npy header: header length {} bytes (more than {})", name, header_len, kMaxHeaderLen);
  return header_len;
}

// Returns the text after `'key':` in the header dict, or fails.
static std::string_view dict_value(std::string_view dict, std::string_view key, const std::string& name) {
  std::string quoted = fmt::format("'{}'", key);
  size_t at = dict.find(quoted);
  if (at == std::string_view::npos) fail("{}: npy header has no {} entry", name, quoted);
  if (dict.find(quoted, at + 1) != std::string_view::npos) fail("{}: npy header has {} twice", name, quoted);
  size_t start = at + quoted.size();
  while (start < dict.size() && dict[start] == ' ') start++;
  if (start >= dict.size() || dict[start] != ':') fail("{}: malformed npy header near {}", name, quoted);
  start++;
  while (start < dict.size() && dict[start] == ' ') start++;
  return dict.substr(start);
}

static NpyDtype parse_descr(std::string_view value, const std::string& name) {
  if (value.empty() || value[0] != '\'') fail("{}: malformed npy dtype (expected a quoted descr such as '<i8')", name);
  size_t end = value.find('\'', 1);
  if (end == std::string_view::npos) fail("{}: malformed npy dtype (unterminated quote)", name);
  std::string descr(value.substr(1, end - 1));
  if (descr.size() > 32) descr = descr.substr(0, 32) + "...";
  if (descr.size() >= 1 && descr[0] == '>')
    fail("{}: big-endian data ('{}') is not supported; save it little-endian", name, descr);
  if (descr == "<i8") return NpyDtype::int64;
  if (descr == "<i4") return NpyDtype::int32;
  if (descr == "|u1" || descr == "<u1") return NpyDtype::uint8;
  if (descr == "<f4") return NpyDtype::float32;
  fail("{}: unsupported npy dtype '{}' (supported: <i8, <i4, |u1, <f4)", name, descr);
}

// "(2, 3)", "(5,)" or "()": non-negative integers separated by commas.
static std::vector<int64_t> parse_shape(std::string_view value, const std::string& name) {
  if (value.empty() || value[0] != '(') fail("{}: malformed npy shape (expected a tuple such as (2, 3))", name);
  std::vector<int64_t> shape;
  size_t i = 1;
  auto skip_spaces = [&] { while (i < value.size() && value[i] == ' ') i++; };
  skip_spaces();
  if (i < value.size() && value[i] == ')') return shape;
  while (true) {
    if (i >= value.size() || value[i] < '0' || value[i] > '9')
      fail("{}: malformed npy shape (expected non-negative integers in a tuple such as (2, 3))", name);
    int64_t dim = 0;
    while (i < value.size() && value[i] >= '0' && value[i] <= '9') {
      if (dim > (std::numeric_limits<int64_t>::max() - 9) / 10)
        fail("{}: npy shape has a dimension too large for a 64-bit size", name);
      dim = dim * 10 + (value[i] - '0');
      i++;
    }
    if (i < value.size() && value[i] == 'L') i++;  // Python 2's long literals
    if (shape.size() >= 32) fail("{}: npy shape has more than 32 dimensions", name);
    shape.push_back(dim);
    skip_spaces();
    if (i < value.size() && value[i] == ')') break;
    if (i >= value.size() || value[i] != ',') fail("{}: malformed npy shape (expected ',' or ')')", name);
    i++;
    skip_spaces();
    if (i < value.size() && value[i] == ')') break;  // trailing comma: (5,)
  }
  return shape;
}

NpyHeader parse_npy_header(std::string_view bytes, const std::string& name) {
  size_t prefix = 0;
  const size_t header_len = parse_npy_prefix(bytes, name, prefix);
  if (bytes.size() - prefix < header_len)
    fail("{}: truncated npy header: {} bytes declared, {} present", name, header_len, bytes.size() - prefix);
  std::string_view dict = bytes.substr(prefix, header_len);
  // A Python dict literal, padded with spaces and ended by '\n'.
  while (!dict.empty() && (dict.back() == '\n' || dict.back() == ' ' || dict.back() == '\0')) dict.remove_suffix(1);
  if (dict.empty() || dict.front() != '{' || dict.back() != '}')
    fail("{}: corrupt npy header: not a dictionary {{'descr': ..., 'fortran_order': ..., 'shape': ...}}", name);

  NpyHeader h;
  h.dtype = parse_descr(dict_value(dict, "descr", name), name);
  std::string_view fortran = dict_value(dict, "fortran_order", name);
  if (fortran.substr(0, 4) == "True") fail("{}: Fortran-order arrays are not supported; save C order", name);
  if (fortran.substr(0, 5) != "False") fail("{}: malformed fortran_order in npy header", name);
  h.shape = parse_shape(dict_value(dict, "shape", name), name);
  if (checked_numel(h.shape) < 0)
    fail("{}: npy shape {} declares more elements than any file can hold (the count overflows)", name,
         shape_text(h.shape));
  h.data_offset = prefix + header_len;
  return h;
}

// The data must be exactly what the shape and dtype describe.
static void check_data_size(const NpyHeader& h, uint64_t have, const std::string& name) {
  const uint64_t want = uint64_t(h.numel()) * h.item_size();  // no overflow: checked_numel
  if (have < want)
    fail("{}: truncated npy data: shape {} of {} needs {} bytes, the file has {}", name, shape_text(h.shape),
         dtype_name(h.dtype), want, have);
  if (have > want)
    fail("{}: npy header/shape mismatch: {} bytes beyond the data that shape {} of {} describes", name,
         have - want, shape_text(h.shape), dtype_name(h.dtype));
}

NpyHeader read_npy_header(const fs::path& path) {
  const std::string name = path.string();
  require_regular_file(path);  // a FIFO would block the open; say what the path is instead
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", name);
  std::string head(12, '\0');
  in.read(head.data(), std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  size_t prefix = 0;
  const size_t header_len = parse_npy_prefix(head, name, prefix);
  head.resize(prefix + header_len);
  in.clear();
  in.seekg(0);
  in.read(head.data(), std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  NpyHeader h = parse_npy_header(head, name);
  // Check the data length against the shape without reading the data.
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) fail("cannot read the size of {}: {}", name, ec.message());
  check_data_size(h, size < h.data_offset ? 0 : size - h.data_offset, name);
  return h;
}

NpyArray parse_npy(std::string_view bytes, const std::string& name) {
  NpyHeader h = parse_npy_header(bytes, name);
  check_data_size(h, bytes.size() - h.data_offset, name);
  const uint64_t n = uint64_t(h.numel());
  const uint64_t data_bytes = n * h.item_size();
  NpyArray a;
  a.dtype = h.dtype;
  a.shape = h.shape;
  const char* p = bytes.data() + h.data_offset;
  switch (h.dtype) {
    case NpyDtype::int64:
      a.ints.resize(n);
      if (n > 0) std::memcpy(a.ints.data(), p, data_bytes);
      break;
    case NpyDtype::int32: {
      a.ints.resize(n);
      for (uint64_t i = 0; i < n; i++) {
        int32_t v;
        std::memcpy(&v, p + 4 * i, 4);
        a.ints[i] = v;
      }
      break;
    }
    case NpyDtype::uint8:
      a.ints.resize(n);
      for (uint64_t i = 0; i < n; i++) a.ints[i] = (unsigned char)p[i];
      break;
    case NpyDtype::float32:
      a.floats.resize(n);
      if (n > 0) std::memcpy(a.floats.data(), p, data_bytes);
      break;
  }
  return a;
}

NpyArray read_npy(const fs::path& path) { return parse_npy(read_file(path), path.string()); }

std::vector<int64_t> parse_npy_int_matrix(std::string_view bytes, const std::string& name, int64_t& rows,
                                          int64_t& cols) {
  // Header, dtype, shape and size are all checked before any element is read.
  NpyHeader h = parse_npy_header(bytes, name);
  if (h.dtype == NpyDtype::float32)
    fail("{}: dtype float32, expected integer token ids (int64; int32 and uint8 are accepted too)", name);
  if (h.shape.size() != 2)
    fail("{}: expected a 2-D array [rows, columns], found shape {}", name, shape_text(h.shape));
  if (h.shape[1] == 0) fail("{}: shape {} has rows of no elements; expected at least one column", name, shape_text(h.shape));
  check_data_size(h, bytes.size() - h.data_offset, name);
  NpyArray a = parse_npy(bytes, name);
  rows = a.shape[0];
  cols = a.shape[1];
  return std::move(a.ints);
}

std::vector<int64_t> read_npy_int_matrix(const fs::path& path, int64_t& rows, int64_t& cols) {
  return parse_npy_int_matrix(read_file(path), path.string(), rows, cols);
}

// Header text as numpy writes it, padded with spaces and a final '\n' so that the data starts
// at a multiple of 64 bytes.
static std::string npy_header(const char* descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); i++) dims += fmt::format("{}{}", i ? ", " : "", shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  size_t total = 10 + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  dict.append(padded - total, ' ');
  dict += '\n';
  if (dict.size() > 65535) fail("npy header too long");
  std::string out(kMagic, 6);
  out += char(1);
  out += char(0);
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  return out + dict;
}

static std::string npy_bytes(const char* descr, const std::vector<int64_t>& shape, const void* data, size_t item) {
  if (!host_is_little_endian()) fail(".npy writing needs a little-endian host");
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::string out = npy_header(descr, shape);
  size_t head = out.size();
  out.resize(head + size_t(n) * item);
  if (n > 0) std::memcpy(out.data() + head, data, size_t(n) * item);
  return out;
}

std::string npy_bytes_int64(const std::vector<int64_t>& shape, const int64_t* data) {
  return npy_bytes("<i8", shape, data, 8);
}
std::string npy_bytes_float32(const std::vector<int64_t>& shape, const float* data) {
  return npy_bytes("<f4", shape, data, 4);
}
std::string npy_header_uint8(const std::vector<int64_t>& shape) { return npy_header("|u1", shape); }
void write_npy_int64(const fs::path& path, const std::vector<int64_t>& shape, const int64_t* data) {
  write_file_atomic(path, npy_bytes_int64(shape, data));
}
void write_npy_float32(const fs::path& path, const std::vector<int64_t>& shape, const float* data) {
  write_file_atomic(path, npy_bytes_float32(shape, data));
}

}  // namespace rmt
