// Fuzz harness: the safetensors reader (lib/safetensors.*): header size, JSON header, dtypes,
// shapes against byte ranges, ranges tiling the data section, metadata.
#include "fuzz/harness.h"
#include "lib/files/safetensors.h"

using namespace rmt_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  rmt::SafetensorsFile f;
  if (!accepts([&] { f = rmt::parse_safetensors(bytes, "fuzz.safetensors"); })) return 0;
  uint64_t total = 0;
  for (const auto& [name, t] : f.tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) {
      require(d >= 0, "negative dimension accepted");
      n *= d;
    }
    require(size_t(n) == t.data.size(), "tensor '" + name + "': data size differs from its shape");
    require(name != "__metadata__", "__metadata__ read as a tensor");
    total += uint64_t(n);
  }
  require(total <= size, "more elements than bytes in the file");
  return 0;
}
