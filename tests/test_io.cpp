#include <doctest/doctest.h>

#include <filesystem>

#include "lib/files/io.h"

TEST_CASE("write_file_atomic writes, replaces and leaves no temp file") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "rmt_test_io";
  fs::remove_all(dir);
  fs::create_directories(dir);
  rmt::write_file_atomic(dir / "a.txt", "hello");
  rmt::write_file_atomic(dir / "a.txt", "world");
  CHECK(rmt::read_file(dir / "a.txt") == "world");
  int files = 0;
  for (auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);
  CHECK_THROWS(rmt::write_file_atomic(dir / "missing_dir" / "b.txt", "x"));
  CHECK(rmt::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  fs::remove_all(dir);
}
