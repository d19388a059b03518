#pragma once
// How long each item of `rmt reproduce` took: OUT/ITEM/timing.json, accumulated over every call
// that did work on the item, and the durations as the report writes them.
#include <filesystem>
#include <string>

namespace rmt {

struct ItemTiming {
  double wall_s = 0;       // reproduce wall time spent on the item
  double train_s = 0;      // sum of its runs' training wall times (results.csv)
  int runs = 0, jobs = 0;
};

// The item's timing; zero when the file does not exist. A damaged file is an error naming it.
ItemTiming read_timing(const std::filesystem::path& file);
void write_timing(const std::filesystem::path& file, const ItemTiming& timing);  // atomically

// "37 s", "12 min 07 s".
std::string seconds_text(double seconds);

}  // namespace rmt
