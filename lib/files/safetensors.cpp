#include "lib/files/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/files/io.h"

namespace rmt {

// The data section is copied as raw bytes, which is only the format's little-endian layout on a
// little-endian host.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // anything larger is a corrupt size field

int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return -1;
    if (dim != 0 && numel > std::numeric_limits<int64_t>::max() / dim) return -1;
    numel *= dim;
  }
  return numel;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    float magnitude = std::ldexp(float(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  uint32_t bits = exponent == 31 ? sign | 0x7f800000u | (mantissa << 13)  // inf / nan
                                 : sign | ((exponent + 112) << 23) | (mantissa << 13);
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

float bfloat16_to_float(uint16_t b) {  // bf16 is the top half of a float32
  uint32_t bits = uint32_t(b) << 16;
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

size_t dtype_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F64") return 8;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

std::vector<float> to_floats(const std::string& dtype, const char* bytes, int64_t numel) {
  std::vector<float> out(static_cast<size_t>(numel));
  for (int64_t i = 0; i < numel; ++i) {
    if (dtype == "F32") {
      std::memcpy(&out[i], bytes + 4 * i, 4);
    } else if (dtype == "F64") {
      double d;
      std::memcpy(&d, bytes + 8 * i, 8);
      out[i] = float(d);
    } else {
      uint16_t h;
      std::memcpy(&h, bytes + 2 * i, 2);
      out[i] = dtype == "F16" ? half_to_float(h) : bfloat16_to_float(h);
    }
  }
  return out;
}

}  // namespace

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

void save_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps __metadata__ first and the tensors in the order given.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = nlohmann::ordered_json::object();
  for (const auto& [key, value] : metadata) header["__metadata__"][key] = value;

  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& tensor : tensors) {
    if (tensor.name.empty() || tensor.name == "__metadata__")
      fail("{}: invalid tensor name '{}'", path, tensor.name);
    if (!names.insert(tensor.name).second) fail("{}: duplicate tensor name '{}'", path, tensor.name);
    int64_t numel = checked_numel(tensor.shape);
    if (numel < 0) fail("{}: tensor '{}' has invalid shape {}", path, tensor.name, shape_text(tensor.shape));
    uint64_t bytes = uint64_t(numel) * 4;
    header[tensor.name] = {{"dtype", "F32"},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }

  std::string header_text = header.dump();
  // The format allows trailing spaces in the header; padding to 8 bytes aligns the data.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::string file;
  file.reserve(8 + header_text.size() + offset);
  uint64_t header_size = header_text.size();
  file.append(reinterpret_cast<const char*>(&header_size), 8);
  file += header_text;
  for (const auto& tensor : tensors)
    file.append(reinterpret_cast<const char*>(tensor.data), size_t(checked_numel(tensor.shape)) * 4);
  write_file_atomic(path, file);
}

// A short description of a JSON value for error messages. Never recursive: a deeply nested
// value in a corrupt header must not overflow the stack through dump().
static std::string describe(const nlohmann::json& value) {
  if (value.is_array()) return fmt::format("a list of {} items", value.size());
  if (value.is_object()) return "an object";
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 60) + "...";
  return text;
}

SafetensorsFile parse_safetensors(std::string_view file, const std::string& path) {
  if (file.size() < 8)
    fail("{}: not a safetensors file: {} bytes, shorter than the 8-byte header size", path, file.size());
  uint64_t header_size;
  std::memcpy(&header_size, file.data(), 8);
  if (header_size > kMaxHeaderBytes)
    fail("{}: corrupt safetensors file: header size {} is absurd (> 100 MB)", path, header_size);
  if (header_size > file.size() - 8)
    fail("{}: corrupt safetensors file: header size {} is larger than the file ({} bytes)", path,
         header_size, file.size());
  const std::string_view header_text = file.substr(8, header_size);
  if (header_text.empty() || header_text[0] != '{')
    fail("{}: corrupt safetensors file: header is not a JSON object (it does not start with '{{')", path);

  // Duplicate tensor names would silently drop all but one tensor: refuse them. The callback
  // sees every key as it is parsed; depth 1 is the top-level object.
  std::string duplicate;
  std::set<std::string> top_keys;
  auto on_event = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && parsed.is_string() &&
        !top_keys.insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json header = nlohmann::json::parse(header_text.begin(), header_text.end(), on_event,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded()) fail("{}: corrupt safetensors file: header is not valid JSON", path);
  if (!header.is_object()) fail("{}: corrupt safetensors file: header is not a JSON object", path);
  if (!duplicate.empty()) fail("{}: corrupt safetensors file: '{}' appears twice in the header", path, duplicate);

  const char* data_section = file.data() + 8 + header_size;
  const uint64_t data_size = file.size() - 8 - header_size;

  SafetensorsFile result;
  struct ByteRange { uint64_t begin, end; std::string name; };
  std::vector<ByteRange> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail("{}: __metadata__ must be an object of strings", path);
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          fail("{}: metadata value for '{}' is not a string: {}", path, key, describe(value));
        result.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) fail("{}: tensor '{}': entry is not an object", path, name);
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(field)) fail("{}: tensor '{}': missing '{}'", path, name, field);

    const auto& dtype_json = entry["dtype"];
    std::string dtype = dtype_json.is_string() ? dtype_json.get<std::string>() : describe(dtype_json);
    size_t element_size = dtype_size(dtype);
    if (element_size == 0)
      fail("{}: tensor '{}': unsupported dtype '{}' (rmt reads F32, F64, F16, BF16)", path, name,
           dtype.size() > 60 ? dtype.substr(0, 60) + "..." : dtype);

    const auto& shape_json = entry["shape"];
    if (!shape_json.is_array()) fail("{}: tensor '{}': shape is not a list", path, name);
    Tensor tensor;
    for (const auto& dim : shape_json)
      if (!dim.is_number_integer())
        fail("{}: tensor '{}': shape holds a non-integer ({})", path, name, describe(dim));
    for (const auto& dim : shape_json) {  // all integers now, so dump() below is flat
      if (dim.is_number_unsigned() && dim.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        fail("{}: tensor '{}': shape {} is too large", path, name, describe(shape_json));
      if (dim.get<int64_t>() < 0)
        fail("{}: tensor '{}': negative dimension in shape {}", path, name, shape_json.dump());
      tensor.shape.push_back(dim.get<int64_t>());
    }
    int64_t numel = checked_numel(tensor.shape);
    if (numel < 0 || uint64_t(numel) > data_size)  // cheap bound that also keeps numel*size from overflowing
      fail("{}: tensor '{}': shape {} needs more bytes than the data section holds ({})", path, name,
           shape_text(tensor.shape), data_size);

    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      fail("{}: tensor '{}': data_offsets must be two non-negative integers, got {}", path, name,
           offsets.is_array() && offsets.size() == 2 && offsets[0].is_primitive() && offsets[1].is_primitive()
               ? offsets.dump() : describe(offsets));
    uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size)
      fail("{}: tensor '{}': byte range [{}, {}) lies outside the data section ({} bytes)", path, name,
           begin, end, data_size);
    uint64_t expected = uint64_t(numel) * element_size;
    if (end - begin != expected)
      fail("{}: tensor '{}': byte range [{}, {}) holds {} bytes but shape {} of {} needs {}", path,
           name, begin, end, end - begin, shape_text(tensor.shape), dtype, expected);
    ranges.push_back({begin, end, name});

    tensor.data = to_floats(dtype, data_section + begin, numel);
    result.tensors[name] = std::move(tensor);
  }

  // As the format requires, the tensors tile the data section: no overlap, no gap, nothing after
  // the last one. Anything else means the offsets (or the file's length) are wrong.
  std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].begin < covered)
      fail("{}: corrupt safetensors file: tensors '{}' and '{}' overlap", path, ranges[i - 1].name,
           ranges[i].name);
    if (ranges[i].begin > covered)
      fail("{}: corrupt safetensors file: bytes [{}, {}) of the data section belong to no tensor (before '{}')",
           path, covered, ranges[i].begin, ranges[i].name);
    covered = ranges[i].end;
  }
  if (covered != data_size)
    fail("{}: corrupt safetensors file: {} bytes after the last tensor's data (data section {} bytes, tensors "
         "cover {})", path, data_size - covered, data_size, covered);
  return result;
}

SafetensorsFile load_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

}  // namespace rmt
