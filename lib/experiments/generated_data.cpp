#include "lib/experiments/generated_data.h"

#include <algorithm>
#include <charconv>

#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

// "1000" == "1000.0" == "1e3": numbers compare as numbers, anything else as text.
bool same_value(const std::string& a, const std::string& b) {
  if (a == b) return true;
  double x = 0, y = 0;
  const auto [pa, ea] = std::from_chars(a.data(), a.data() + a.size(), x);
  const auto [pb, eb] = std::from_chars(b.data(), b.data() + b.size(), y);
  return ea == std::errc() && eb == std::errc() && pa == a.data() + a.size() && pb == b.data() + b.size() && x == y;
}

// The value meta.yaml records for option `key` (options, counts, top level), or "" if none.
std::string recorded(const YAML::Node& meta, const std::string& key) {
  for (const char* section : {"options", "counts"})
    if (meta[section] && meta[section].IsMap() && meta[section][key] && meta[section][key].IsScalar())
      return meta[section][key].as<std::string>();
  if (key == "seed" && meta["seed"] && meta["seed"].IsScalar()) return meta["seed"].as<std::string>();
  return "";
}

}  // namespace

void check_generated_dataset(const fs::path& dir, const std::vector<std::string>& generate_args) {
  const fs::path meta_path = dir / "meta.yaml";
  YAML::Node meta;
  try {
    meta = YAML::LoadFile(meta_path.string());
  } catch (const YAML::Exception& e) {
    fail("{}: not readable as the meta.yaml of a generated dataset ({}); delete {} to generate it again",
         meta_path.string(), e.what(), dir.string());
  }
  auto mismatch = [&](const std::string& what, const std::string& has, const std::string& wanted) {
    fail("{} was generated with {} {}, but the spec asks for {} {}: the runs that used it trained on "
         "other data. Move {} and the runs beside it aside (or use another --runs-dir) to start anew",
         dir.string(), what, has, what, wanted, dir.string());
  };
  if (generate_args.size() >= 2 && meta["task"] && meta["task"].IsScalar() &&
      meta["task"].as<std::string>() != generate_args[1])
    mismatch("task", meta["task"].as<std::string>(), generate_args[1]);
  for (size_t i = 2; i + 1 < generate_args.size(); ++i) {
    const std::string& flag = generate_args[i];
    if (flag.rfind("--", 0) != 0 || flag == "--force") continue;
    if (flag == "--out") {
      ++i;
      continue;
    }
    std::string key = flag.substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    const std::string has = recorded(meta, key), wanted = generate_args[++i];
    if (!has.empty() && !same_value(has, wanted)) mismatch(key, has, wanted);
  }
}

}  // namespace rmt
