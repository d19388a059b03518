#include "lib/experiments/repro_timing.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/experiments/reproduce.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string seconds_text(double s) {
  const long long whole = std::llround(s);
  if (whole < 60) return fmt::format("{} s", whole);
  return fmt::format("{} min {:02} s", whole / 60, whole % 60);
}

ItemTiming read_timing(const fs::path& file) {
  ItemTiming t;
  if (!fs::exists(file)) return t;
  json j = json::parse(read_file(file), nullptr, false);
  auto number = [&](const char* key) {
    if (!j.contains(key) || !j[key].is_number() || !std::isfinite(j[key].get<double>()) || j[key].get<double>() < 0)
      fail("{}: '{}' is not a number >= 0 (delete the file to start the timing anew)", file.string(), key);
    return j[key].get<double>();
  };
  if (j.is_discarded() || !j.is_object()) fail("{}: not a JSON object (delete it to start the timing anew)", file.string());
  t.wall_s = number("wall_s");
  t.train_s = number("train_s");
  t.runs = int(std::min(number("runs"), 1e9));
  t.jobs = int(std::min(number("jobs"), 1e9));
  return t;
}

void write_timing(const fs::path& file, const ItemTiming& t) {
  json j = {{"wall_s", t.wall_s}, {"train_s", t.train_s}, {"runs", t.runs}, {"jobs", t.jobs}};
  write_file_atomic(file, j.dump(2) + "\n");
}

std::string item_time(const std::string& out_dir, const std::string& item) {
  ItemTiming t;
  try {
    t = read_timing(fs::path(out_dir) / item / "timing.json");
  } catch (const Error&) {
    return "";  // a damaged record says nothing (the reproduction itself reports it)
  }
  if (t.wall_s <= 0) return "";
  if (t.runs == 0) return seconds_text(t.wall_s);  // an item that trains nothing (evaluations, maps)
  return fmt::format("{} at -j {} ({} runs)", seconds_text(t.wall_s), t.jobs, t.runs);
}

}  // namespace rmt
