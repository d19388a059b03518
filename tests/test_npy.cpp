#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"

namespace fs = std::filesystem;

static fs::path npy_tmp_dir() {
  fs::path dir = fs::temp_directory_path() / "rmt_test_npy";
  fs::create_directories(dir);
  return dir;
}

// Builds a .npy file by hand: magic, version, header text, data bytes.
static std::string handmade(int major, const std::string& dict, const std::string& data) {
  std::string out = "\x93NUMPY";
  out += char(major);
  out += char(0);
  std::string header = dict;
  while ((out.size() + (major == 1 ? 2 : 4) + header.size() + 1) % 64) header += ' ';
  header += '\n';
  if (major == 1) {
    out += char(header.size() & 0xff);
    out += char(header.size() >> 8);
  } else {
    for (int k = 0; k < 4; k++) out += char((header.size() >> (8 * k)) & 0xff);
  }
  return out + header + data;
}

static std::string le_bytes(int64_t v, int n) {
  std::string s;
  for (int k = 0; k < n; k++) s += char((uint64_t(v) >> (8 * k)) & 0xff);
  return s;
}

template <typename Action>
static std::string error_of_npy(Action action) {
  try {
    action();
  } catch (const rmt::Error& e) {
    return e.what();
  }
  return "";
}

static void check_rejects(const std::string& bytes, const std::string& expect_in_message) {
  fs::path p = npy_tmp_dir() / "broken.npy";
  rmt::write_file_atomic(p, bytes);
  try {
    rmt::read_npy(p);
    FAIL("expected rmt::Error containing: " << expect_in_message);
  } catch (const rmt::Error& e) {
    std::string msg = e.what();
    CHECK_MESSAGE(msg.find(expect_in_message) != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("broken.npy") != std::string::npos, msg);  // names the file
  }
}

TEST_CASE("npy int64 and float32 round trip, header padded to 64 bytes") {
  fs::path p = npy_tmp_dir() / "a.npy";
  std::vector<int64_t> v = {1, -2, 3, 1LL << 40, 5, 6};
  rmt::write_npy_int64(p, {2, 3}, v.data());
  std::string bytes = rmt::read_file(p);
  CHECK(bytes.size() == 128 + 48);  // 10-byte prefix + dict padded to 128, then 6 int64
  rmt::NpyHeader h = rmt::parse_npy_header(bytes, "a.npy");
  CHECK(h.data_offset % 64 == 0);
  CHECK(bytes.find("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }") != std::string::npos);
  rmt::NpyArray a = rmt::read_npy(p);
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(a.ints == v);

  std::vector<float> f = {0.5f, -1.25f, 3e9f};
  rmt::write_npy_float32(p, {3}, f.data());
  a = rmt::read_npy(p);
  CHECK(a.dtype == rmt::NpyDtype::float32);
  CHECK(a.shape == std::vector<int64_t>{3});
  CHECK(a.floats == f);
  CHECK(rmt::read_file(p).find("'shape': (3,)") != std::string::npos);

  std::vector<int64_t> empty;
  rmt::write_npy_int64(p, {0, 4}, empty.data());
  a = rmt::read_npy(p);
  CHECK(a.shape == std::vector<int64_t>{0, 4});
}

TEST_CASE("npy reads int32, uint8 and version 2.0") {
  fs::path p = npy_tmp_dir() / "b.npy";
  rmt::write_file_atomic(p, handmade(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
                                     le_bytes(-7, 4) + le_bytes(9, 4)));
  CHECK(rmt::read_npy(p).ints == std::vector<int64_t>{-7, 9});
  rmt::write_file_atomic(p, handmade(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }", "\x01\x02\xff"));
  CHECK(rmt::read_npy(p).ints == std::vector<int64_t>{1, 2, 255});
  rmt::write_file_atomic(p, handmade(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 1), }", le_bytes(42, 8)));
  CHECK(rmt::read_npy(p).ints == std::vector<int64_t>{42});
}

TEST_CASE("npy rejects broken files with an error naming the file") {
  const std::string ok_dict = "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }";
  const std::string data = le_bytes(1, 8) + le_bytes(2, 8);
  check_rejects("not a numpy file at all", "bad magic");
  check_rejects("", "bad magic");
  std::string bad_version = handmade(1, ok_dict, data);
  bad_version[6] = 4;
  check_rejects(bad_version, "unsupported npy format version 4.0");
  check_rejects(handmade(1, "{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", data), "big-endian");
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': True, 'shape': (2,), }", data), "Fortran");
  check_rejects(handmade(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", data), "unsupported npy dtype");
  check_rejects(handmade(1, ok_dict, data.substr(0, 12)), "truncated");
  check_rejects(handmade(1, ok_dict, data + le_bytes(3, 8)), "header/shape mismatch");
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': False, }", data), "shape");
  std::string cut_header = handmade(1, ok_dict, data).substr(0, 30);
  check_rejects(cut_header, "truncated npy header");
  CHECK_THROWS_AS(rmt::read_npy(npy_tmp_dir() / "does_not_exist.npy"), rmt::Error);
}

// Sizes are validated before any element is read: a declared shape whose element count (or
// byte count) overflows 64 bits, a corrupt header length, malformed tuples.
TEST_CASE("npy: shapes, header lengths and sizes are checked with overflow in mind") {
  const std::string data = le_bytes(1, 8) + le_bytes(2, 8);
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1099511627776, 1099511627776, 1099511627776), }", data),
                "declares more elements than any file can hold");
  // 2^61 elements of 8 bytes: the count fits in int64, the byte count does not.
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2305843009213693952,), }", data),
                "declares more elements than any file can hold");
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (99999999999999999999,), }", data),
                "dimension too large");
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 1099511627776), }", data),
                "truncated npy data: shape [1, 1099511627776] of int64 needs 8796093022208 bytes, the file has 16");
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (-2,), }", data), "malformed npy shape");
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2 3), }", data), "malformed npy shape");
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, x), }", data), "malformed npy shape");
  check_rejects(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), 'shape': (2,), }", data), "twice");
  check_rejects(handmade(1, "'descr': '<i8', 'fortran_order': False, 'shape': (2,)", data), "not a dictionary");
  // A version 2.0 header length of 4 GiB: refused before anything is allocated for it.
  std::string huge = handmade(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", data);
  huge[8] = huge[9] = huge[10] = huge[11] = char(0xff);
  check_rejects(huge, "corrupt npy header: header length 4294967295 bytes");
  // The header-only reader checks the same things against the file's size.
  fs::path p = npy_tmp_dir() / "broken.npy";
  rmt::write_file_atomic(p, handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", data));
  CHECK(error_of_npy([&] { rmt::read_npy_header(p); }).find("truncated npy data") != std::string::npos);
  rmt::write_file_atomic(p, handmade(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }", data));
  CHECK(rmt::read_npy_header(p).shape == std::vector<int64_t>{4});
}

TEST_CASE("npy: the id-matrix reader wants a 2-D integer array with at least one column") {
  fs::path p = npy_tmp_dir() / "ids.npy";
  auto error_for = [&](const std::string& bytes) {
    rmt::write_file_atomic(p, bytes);
    int64_t rows = 0, cols = 0;
    return error_of_npy([&] { rmt::read_npy_int_matrix(p, rows, cols); });
  };
  const std::string four = le_bytes(1, 8) + le_bytes(2, 8) + le_bytes(3, 8) + le_bytes(4, 8);
  CHECK(error_for(handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", four.substr(0, 16)))
            .find("ids.npy: dtype float32, expected integer token ids") != std::string::npos);
  CHECK(error_for(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", four))
            .find("expected a 2-D array [rows, columns], found shape [4]") != std::string::npos);
  CHECK(error_for(handmade(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (5, 0), }", ""))
            .find("shape [5, 0] has rows of no elements") != std::string::npos);
  // The dtype and shape are refused even when the data is also wrong: nothing is read first.
  CHECK(error_for(handmade(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 2), }", ""))
            .find("dtype float32") != std::string::npos);
  CHECK(error_for(handmade(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }", four.substr(0, 16))) == "");
  int64_t rows = 0, cols = 0;
  CHECK(rmt::read_npy_int_matrix(p, rows, cols) == std::vector<int64_t>{1, 0, 2, 0});
  CHECK((rows == 2 && cols == 2));
}
