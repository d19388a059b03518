#pragma once
// safetensors files (https://huggingface.co/docs/safetensors): 8-byte little-endian header
// size, a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, then the
// raw little-endian data. rmt writes F32 only; it reads F32 (and F64/F16/BF16, converted).
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace rmt {

struct TensorRef {  // a tensor to write: name, shape, pointer to numel() floats
  std::string name;
  std::vector<int64_t> shape;
  const float* data;
};

struct Tensor {     // a tensor read back
  std::vector<int64_t> shape;
  std::vector<float> data;
  int64_t numel() const;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::map<std::string, Tensor> tensors;
};

// Writes atomically (temp file + rename). Tensor names must be unique.
void save_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                      const std::map<std::string, std::string>& metadata);
// Validates everything (header size, JSON, dtypes, shapes vs byte ranges, ranges inside the
// file, tensors tiling the data section with no overlap, gap or trailing bytes, no duplicate
// names) and throws rmt::Error naming the file and the problem. NaN/Inf values are read as they
// are (the checkpoint loader decides what to refuse).
SafetensorsFile load_safetensors(const std::string& path);
// The same on bytes already in memory; `path` names them in error messages.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& path);

}  // namespace rmt
