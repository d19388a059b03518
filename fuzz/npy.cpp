// Fuzz harness: the .npy reader (lib/npy.*): header, dtype, shape and size checks, the integer
// matrix reader the datasets use, and the path reader of headers.
#include "fuzz/harness.h"
#include "lib/files/npy.h"

using namespace rmt_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  rmt::NpyArray a;
  if (accepts([&] { a = rmt::parse_npy(bytes, "fuzz.npy"); })) {
    int64_t n = 1;
    for (int64_t d : a.shape) {
      require(d >= 0, "negative dimension accepted");
      n *= d;
    }
    const size_t have = a.dtype == rmt::NpyDtype::float32 ? a.floats.size() : a.ints.size();
    require(size_t(n) == have, "element count differs from the shape");
    // What was read writes back to bytes that read the same.
    if (a.dtype == rmt::NpyDtype::int64) {
      rmt::NpyArray b = rmt::parse_npy(rmt::npy_bytes_int64(a.shape, a.ints.data()), "again.npy");
      require(b.shape == a.shape && b.ints == a.ints, "int64 round trip differs");
    }
  }

  int64_t rows = -1, cols = -1;
  std::vector<int64_t> ids;
  if (accepts([&] { ids = rmt::parse_npy_int_matrix(bytes, "fuzz.npy", rows, cols); })) {
    require(rows >= 0 && cols >= 1, "matrix with no columns accepted");
    require(ids.size() == size_t(rows) * size_t(cols), "matrix size differs from rows x cols");
  }

  // The path reader reads only the header and checks the size against the file's.
  const std::string path = memory_file(bytes);
  rmt::NpyHeader h;
  const bool header_ok = accepts([&] { h = rmt::read_npy_header(path); });
  const bool whole_ok = accepts([&] { rmt::parse_npy(bytes, "fuzz.npy"); });
  require(header_ok == whole_ok, "read_npy_header and parse_npy disagree on the same bytes");
  return 0;
}
