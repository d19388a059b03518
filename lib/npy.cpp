#include "lib/npy.h"

#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "lib/error.h"
#include "lib/io.h"

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

int64_t NpyHeader::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
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

// Returns the text after `'key':` in the header dict, or fails.
static std::string_view dict_value(std::string_view dict, std::string_view key, const std::string& name) {
  std::string quoted = fmt::format("'{}'", key);
  size_t at = dict.find(quoted);
  if (at == std::string_view::npos) fail("{}: npy header has no {} entry", name, quoted);
  size_t colon = dict.find(':', at + quoted.size());
  if (colon == std::string_view::npos) fail("{}: malformed npy header near {}", name, quoted);
  size_t start = colon + 1;
  while (start < dict.size() && dict[start] == ' ') start++;
  return dict.substr(start);
}

static NpyDtype parse_descr(std::string_view value, const std::string& name) {
  if (value.empty() || value[0] != '\'') fail("{}: malformed npy dtype", name);
  size_t end = value.find('\'', 1);
  if (end == std::string_view::npos) fail("{}: malformed npy dtype", name);
  std::string descr(value.substr(1, end - 1));
  if (descr.size() >= 1 && descr[0] == '>')
    fail("{}: big-endian data ('{}') is not supported; save it little-endian", name, descr);
  if (descr == "<i8") return NpyDtype::int64;
  if (descr == "<i4") return NpyDtype::int32;
  if (descr == "|u1" || descr == "<u1") return NpyDtype::uint8;
  if (descr == "<f4") return NpyDtype::float32;
  fail("{}: unsupported npy dtype '{}' (supported: <i8, <i4, |u1, <f4)", name, descr);
}

static std::vector<int64_t> parse_shape(std::string_view value, const std::string& name) {
  if (value.empty() || value[0] != '(') fail("{}: malformed npy shape", name);
  size_t end = value.find(')');
  if (end == std::string_view::npos) fail("{}: malformed npy shape", name);
  std::vector<int64_t> shape;
  size_t i = 1;
  while (i < end) {
    while (i < end && (value[i] == ' ' || value[i] == ',')) i++;
    if (i >= end) break;
    if (value[i] < '0' || value[i] > '9') fail("{}: malformed npy shape", name);
    int64_t dim = 0;
    while (i < end && value[i] >= '0' && value[i] <= '9') {
      dim = dim * 10 + (value[i] - '0');
      if (dim > (int64_t(1) << 40)) fail("{}: npy shape too large", name);
      i++;
    }
    shape.push_back(dim);
  }
  return shape;
}

NpyHeader parse_npy_header(std::string_view bytes, const std::string& name) {
  if (!host_is_little_endian()) fail("{}: .npy reading needs a little-endian host", name);
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view(kMagic, 6))
    fail("{}: not a .npy file (bad magic)", name);
  const int major = (unsigned char)bytes[6], minor = (unsigned char)bytes[7];
  size_t header_len = 0, prefix = 0;
  if (major == 1) {
    header_len = size_t((unsigned char)bytes[8]) | size_t((unsigned char)bytes[9]) << 8;
    prefix = 10;
  } else if (major == 2) {
    if (bytes.size() < 12) fail("{}: truncated npy header", name);
    for (int k = 0; k < 4; k++) header_len |= size_t((unsigned char)bytes[8 + k]) << (8 * k);
    prefix = 12;
  } else {
    fail("{}: unsupported npy format version {}.{} (supported: 1.0, 2.0)", name, major, minor);
  }
  if (bytes.size() < prefix + header_len) fail("{}: truncated npy header", name);
  std::string_view dict = bytes.substr(prefix, header_len);

  NpyHeader h;
  h.dtype = parse_descr(dict_value(dict, "descr", name), name);
  std::string_view fortran = dict_value(dict, "fortran_order", name);
  if (fortran.substr(0, 4) == "True") fail("{}: Fortran-order arrays are not supported; save C order", name);
  if (fortran.substr(0, 5) != "False") fail("{}: malformed fortran_order in npy header", name);
  h.shape = parse_shape(dict_value(dict, "shape", name), name);
  h.data_offset = prefix + header_len;
  return h;
}

NpyHeader read_npy_header(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path.string());
  std::string head(4096, '\0');
  in.read(head.data(), std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  NpyHeader h = parse_npy_header(head, path.string());
  // Check the data length against the shape without reading the data.
  const uint64_t want = h.data_offset + uint64_t(h.numel()) * h.item_size();
  const uint64_t have = fs::file_size(path);
  if (have < want)
    fail("{}: truncated npy data: shape needs {} bytes, file has {}", path.string(), want, have);
  if (have > want)
    fail("{}: npy header/shape mismatch: {} bytes beyond the data the shape describes", path.string(), have - want);
  return h;
}

NpyArray parse_npy(std::string_view bytes, const std::string& name) {
  NpyHeader h = parse_npy_header(bytes, name);
  const uint64_t n = uint64_t(h.numel());
  const uint64_t data_bytes = n * h.item_size();
  const uint64_t have = bytes.size() - h.data_offset;
  if (have < data_bytes) fail("{}: truncated npy data: shape needs {} bytes, file has {}", name, data_bytes, have);
  if (have > data_bytes)
    fail("{}: npy header/shape mismatch: {} bytes beyond the data the shape describes", name, have - data_bytes);
  NpyArray a;
  a.dtype = h.dtype;
  a.shape = h.shape;
  const char* p = bytes.data() + h.data_offset;
  switch (h.dtype) {
    case NpyDtype::int64:
      a.ints.resize(n);
      std::memcpy(a.ints.data(), p, data_bytes);
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
      std::memcpy(a.floats.data(), p, data_bytes);
      break;
  }
  return a;
}

NpyArray read_npy(const fs::path& path) { return parse_npy(read_file(path), path.string()); }

std::vector<int64_t> read_npy_int_matrix(const fs::path& path, int64_t& rows, int64_t& cols) {
  NpyArray a = read_npy(path);
  if (a.dtype == NpyDtype::float32) fail("{}: expected integer ids, found float32", path.string());
  if (a.shape.size() != 2) fail("{}: expected a 2-D array, found {} dimensions", path.string(), a.shape.size());
  rows = a.shape[0];
  cols = a.shape[1];
  return std::move(a.ints);
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
void write_npy_int64(const fs::path& path, const std::vector<int64_t>& shape, const int64_t* data) {
  write_file_atomic(path, npy_bytes_int64(shape, data));
}
void write_npy_float32(const fs::path& path, const std::vector<int64_t>& shape, const float* data) {
  write_file_atomic(path, npy_bytes_float32(shape, data));
}

}  // namespace rmt
