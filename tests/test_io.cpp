#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

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

TEST_CASE("write_file_atomic writes a name of up to 255 bytes (its temp file's name stays within them)") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "rmt_test_io_long";
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (size_t length : {size_t(241), size_t(251), size_t(255)}) {
    CAPTURE(length);
    const std::string name(length, 'n');
    rmt::write_file_atomic(dir / name, "x");  // was "File name too long" from 242 bytes on
    CHECK(rmt::read_file(dir / name) == "x");
    // A killed writer's temp file of such a name is found as the name's (PID 999999999: no process).
    const std::string stale = name.substr(0, std::min(length, size_t(241))) + ".tmp.999999999";
    rmt::write_file_atomic(dir / "tmp", "");
    fs::rename(dir / "tmp", dir / stale);
    CHECK(rmt::remove_stale_temp_files(dir, {name}) == std::vector<fs::path>{dir / stale});
    fs::remove(dir / name);
    CHECK(fs::is_empty(dir));
  }
  fs::remove_all(dir);
}
