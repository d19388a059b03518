#pragma once
// A small sorting task of one's own, as a user would bring it to `rmt data import`: X is 6 digits
// (ids 0..9), y the same digits sorted; the rows are distinct across all three splits. Shared by
// tests/test_import.cpp and tests/catalogue_import.cpp.
#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "lib/files/io.h"
#include "lib/files/npy.h"

struct SortSplits {
  static constexpr int kWidth = 6;
  std::vector<int64_t> x[3], y[3];  // train, val, test: [n, kWidth] row-major
  int64_t n[3] = {0, 0, 0};
};

inline SortSplits sort_task(int64_t train = 120, int64_t val = 16, int64_t test = 16) {
  SortSplits s;
  std::set<std::vector<int64_t>> seen;
  uint64_t state = 12345;
  const int64_t sizes[3] = {train, val, test};
  for (int k = 0; k < 3; k++) {
    while (s.n[k] < sizes[k]) {
      std::vector<int64_t> row(SortSplits::kWidth);
      for (int64_t& id : row) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;  // a fixed LCG: the same data every run
        id = int64_t((state >> 33) % 10);
      }
      if (!seen.insert(row).second) continue;
      std::vector<int64_t> sorted = row;
      std::sort(sorted.begin(), sorted.end());
      s.x[k].insert(s.x[k].end(), row.begin(), row.end());
      s.y[k].insert(s.y[k].end(), sorted.begin(), sorted.end());
      s.n[k]++;
    }
  }
  return s;
}

inline const char* const kSortSplitNames[3] = {"train", "val", "test"};

// An .npy file of int32 ('<i4') ids, as numpy.save writes it (numpy's int32 is a common dtype).
inline std::string npy_bytes_int32(const std::vector<int64_t>& shape, const std::vector<int64_t>& ids) {
  std::string dict = fmt::format("{{'descr': '<i4', 'fortran_order': False, 'shape': ({}, {}), }}", shape[0], shape[1]);
  const size_t total = 10 + dict.size() + 1;
  dict.append((total + 63) / 64 * 64 - total, ' ');
  dict += '\n';
  std::string out = std::string("\x93NUMPY", 6) + char(1) + char(0) + char(dict.size() & 0xff) +
                    char(dict.size() >> 8) + dict;
  for (int64_t id : ids) {
    const int32_t v = int32_t(id);
    out.append(reinterpret_cast<const char*>(&v), 4);
  }
  return out;
}

// DIR/sort_{split}_{X,y}.npy (int64, or int32 with int32 = true).
inline void write_sort_task(const std::string& dir, const SortSplits& s, bool int32 = false) {
  for (int k = 0; k < 3; k++)
    for (auto [which, ids] : {std::pair{"X", &s.x[k]}, std::pair{"y", &s.y[k]}}) {
      const std::string path = fmt::format("{}/sort_{}_{}.npy", dir, kSortSplitNames[k], which);
      const std::vector<int64_t> shape = {s.n[k], SortSplits::kWidth};
      rmt::write_file_atomic(path, int32 ? npy_bytes_int32(shape, *ids) : rmt::npy_bytes_int64(shape, ids->data()));
    }
}
