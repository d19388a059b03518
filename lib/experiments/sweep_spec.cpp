// Reading and checking a sweep file (sweep.h): its data:, base:, grid: and derive: sections.
#include "lib/experiments/sweep.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/experiments/sweep_internal.h"
#include "lib/files/io.h"
#include "tasks/task_kind.h"
#include "tasks/text.h"

namespace rmt {

namespace fs = std::filesystem;

namespace sweep_internal {

namespace {

// The task table's options a `data:` block may give (tasks/task_kind.h), by key.
const TaskOptionInfo* data_task_option(const std::string& key) {
  const TaskOptionInfo* info = find_task_option(key);
  return info && info->flag && !(info->traits & kNotInSweep) ? info : nullptr;
}

// The `rmt generate` options a `data:` block may hold: the task, its options, the sizes and seed.
const std::vector<std::string>& data_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k = {"task"};
    for (const TaskOptionInfo& info : task_option_info())
      if (data_task_option(info.key)) k.push_back(info.key);
    for (const char* other : {"train", "val", "test", "seed",
                              "input", "split", "bytes",  // task text
                              "dir"})                     // an existing dataset
      k.push_back(other);
    return k;
  }();
  return keys;
}

void check_data_option(const std::string& option, const std::string& value, const std::string& where) {
  const std::vector<std::string>& keys = data_keys();
  if (std::find(keys.begin(), keys.end(), option) == keys.end())
    fail("{}: unknown data option '{}'{}; options: {}", where, option, did_you_mean(closest_match(option, keys)),
         fmt::join(keys, ", "));
  if (option == "task") return;
  const TaskOptionInfo* task_option = data_task_option(option);
  if (task_option && task_option->arg_text) {  // BABILong-style noise: filler | text, and the text file
    if (value.empty()) fail("{}: data option '{}' is empty", where, option);
    return;
  }
  if (option == "input") {  // task text: the file whose bytes become the dataset
    if (value.empty()) fail("{}: data option 'input' is empty; give the text file", where);
    return;
  }
  if (option == "dir") {  // an existing dataset's directory
    if (value.empty()) fail("{}: data option 'dir' is empty; give the dataset's directory", where);
    return;
  }
  if (option == "split") {  // task text: "90,5,5"
    try {
      parse_text_shares(value);
    } catch (const Error& e) {
      fail("{}: data option 'split': {}", where, e.what());
    }
    return;
  }
  // `rmt generate` takes these as int (the seed and text's bytes as 64-bit integers).
  const bool wide = option == "seed" || option == "bytes";
  const long long max = wide ? std::numeric_limits<long long>::max() : std::numeric_limits<int>::max();
  long long v = 0;
  const char* begin = value.data();
  const char* end = begin + value.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, v);
  if (value.empty() || ptr != end || ec == std::errc::invalid_argument)
    fail("{}: invalid value '{}' for data option '{}': expected an integer", where, value, option);
  // A task option's range as the task table states it, else the type's (a seed may be 0).
  const long long lo = task_option ? task_option->lo : option == "seed" ? 0 : 1;
  const long long hi = task_option ? task_option->hi : max;
  if (ec == std::errc::result_out_of_range || v < lo || v > hi)
    fail("{}: invalid value '{}' for data option '{}': expected an integer in [{}, {}]", where, value, option, lo, hi);
}

}  // namespace

void apply_value(Config& config, const std::string& key, const std::string& value,
                 const std::string& where) {
  if (key == "data")
    fail("{}: 'data' is filled in by the sweep; give the dataset's `rmt generate` options in the "
         "top-level 'data:' block instead", where);
  try {
    apply_override(config, key + "=" + value);
  } catch (const Error& e) {
    std::string msg = e.what();
    const std::string prefix = "--set " + key + "=" + value + ": ";
    if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    fail("{}: {}", where, msg);
  }
}

namespace {

// Whether a data block generates task text (`rmt generate text --input FILE [--split S] [--bytes
// N]`), the sweep's one decision of its family; the algorithmic tasks' options are refused as
// `rmt generate text` refuses them.
bool is_text_task(const std::map<std::string, std::string>& data, const std::string& where) {
  auto task = data.find("task");
  if (task == data.end() || task->second != "text") {
    for (const char* k : {"input", "split", "bytes"})
      if (data.count(k))
        fail("{}: data option '{}' belongs to task text (a text file as a dataset), not task {}", where, k,
             task == data.end() ? "(none)" : task->second);
    return false;
  }
  for (const auto& [k, v] : data) {
    check_data_option(k, v, where);
    if (k != "task" && k != "input" && k != "split" && k != "bytes")
      fail("{}: data option '{}' is not an option of task text (its dataset is the file's bytes, in order; "
           "options: input, split, bytes)", where, k);
  }
  if (!data.count("input")) fail("{}: data: task text needs 'input' (the text file)", where);
  return true;
}

// `data: {dir: PATH}`: a dataset that exists (rmt data import, rmt generate), read as it is.
SweepData existing_dataset(const std::map<std::string, std::string>& data, const std::string& where) {
  for (const auto& [k, v] : data)
    if (k != "dir")
      fail("{}: data option '{}' is an `rmt generate` option; data option 'dir' names a dataset that "
           "exists (rmt data import, rmt generate), which the sweep reads as it is: give one or the other",
           where, k);
  const std::string dir = data.at("dir");
  check_data_option("dir", dir, where);
  if (!fs::is_directory(dir))
    fail("{}: data.dir {} is not a directory (make the dataset first: rmt data import SRC --out {}, or "
         "rmt generate TASK --out {}; a relative path is from where rmt runs)", where, dir, dir, dir);
  return read_existing_dataset(dir, where);
}

}  // namespace

SweepData resolve_data(const std::map<std::string, std::string>& data, const std::string& where) {
  if (data.count("dir")) return existing_dataset(data, where);
  auto get = [&](const char* k) -> std::optional<int> {
    auto it = data.find(k);
    if (it == data.end()) return std::nullopt;
    check_data_option(k, it->second, where);  // so the conversion below cannot fail
    return int(std::stoll(it->second));
  };
  auto task = data.find("task");
  if (task == data.end()) fail("{}: data: 'task' is required (e.g. task: copy), or 'dir' (a dataset that exists)", where);
  SweepData out;
  out.task = task->second;
  if (is_text_task(data, where)) {  // no algorithmic task to resolve
    out.family = FamilyKind::text;
    return out;
  }
  auto text = [&](const char* k) -> std::optional<std::string> {
    auto it = data.find(k);
    if (it == data.end()) return std::nullopt;
    check_data_option(k, it->second, where);
    return it->second;
  };
  TaskArgs args;
  for (const TaskOptionInfo& info : task_option_info()) {
    if (!data_task_option(info.key)) continue;
    if (info.arg) args.*info.arg = get(info.key);
    else args.*info.arg_text = text(info.key);
  }
  TaskOptions resolved;
  try {
    resolved = resolve_task(task->second, args);
  } catch (const Error& e) {
    fail("{}: data: {}", where, e.what());
  }
  out.task = resolved.name;
  out.seq_len = task_stacked(resolved) ? task_len_x(resolved) + task_len_y(resolved) - 1 : task_len_x(resolved);
  return out;
}

}  // namespace sweep_internal

using namespace sweep_internal;

namespace {

// A mapping key: plain text, not a list or a mapping.
std::string key_of(const YAML::Node& key, const std::string& where) {
  if (!key.IsScalar())
    fail("{}: keys must be plain names, got {}", where, key.IsSequence() ? "a list" : key.IsMap() ? "a mapping" : "nothing");
  return key.Scalar();
}

std::string scalar_of(const YAML::Node& node, const std::string& where) {
  if (!node.IsScalar()) fail("{}: expected a single value, got {}", where, node.IsSequence() ? "a list" : node.IsMap() ? "a mapping" : "nothing");
  return node.Scalar();
}

}  // namespace

std::string generate_flag(const std::string& data_option) {
  std::string flag = "--" + data_option;  // a_b -> --a-b
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

namespace {

// eval: {multiples, data, segment_length}; multiples need a generated dataset with a length.
SweepEvalSpec parse_eval(const YAML::Node& node, const std::string& path, const SweepSpec& spec,
                         const std::set<std::string>& grid_keys) {
  const std::string where = path + ": eval";
  if (!node.IsMap() || node.size() == 0)
    fail("{}: expected a mapping with multiples: (of the data's length, e.g. [2, 10]) and/or data: (datasets "
         "that exist), and optionally segment_length:", where);
  const std::vector<std::string> keys = {"multiples", "data", "segment_length"};
  SweepEvalSpec eval;
  auto positive = [&](const YAML::Node& v, const std::string& at, const char* what) {
    const std::string text = scalar_of(v, at);
    int value = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || value < 1)
      fail("{}: '{}' is not {} (an integer >= 1)", at, text, what);
    return value;
  };
  auto list = [&](const YAML::Node& v, const std::string& at) {
    if (!v.IsSequence() || v.size() == 0) fail("{}: expected a non-empty list, e.g. [2, 10]", at);
    return v;
  };
  for (const auto& entry : node) {
    const std::string key = key_of(entry.first, where);
    const std::string at = fmt::format("{}.{}", where, key);
    if (key == "multiples") {
      for (const auto& v : list(entry.second, at)) {
        const int k = positive(v, at, "a multiple of the trained length");
        if (std::find(eval.multiples.begin(), eval.multiples.end(), k) != eval.multiples.end())
          fail("{}: {} is listed twice", at, k);
        eval.multiples.push_back(k);
      }
    } else if (key == "data") {
      for (const auto& v : list(entry.second, at)) {
        const std::string dir = scalar_of(v, at);
        if (dir.empty()) fail("{}: an empty dataset path", at);
        if (std::find(eval.data.begin(), eval.data.end(), dir) != eval.data.end())
          fail("{}: {} is listed twice", at, dir);
        eval.data.push_back(dir);
      }
    } else if (key == "segment_length") {
      eval.segment_length = positive(entry.second, at, "a segment length");
    } else {
      fail("{}: unknown key '{}'{}; keys: {}", where, key, did_you_mean(closest_match(key, keys)), fmt::join(keys, ", "));
    }
  }
  if (eval.multiples.empty() && eval.data.empty())
    fail("{}: give multiples: (of the data's length) or data: (datasets that exist), or both", where);
  if (!eval.multiples.empty()) {
    bool has_length = grid_keys.count("data.length") > 0, has_dir = grid_keys.count("data.dir") > 0;
    for (const auto& [k, v] : spec.data) has_length |= k == "length", has_dir |= k == "dir";
    if (has_dir)
      fail("{}.multiples: multiples of the data's length need data the sweep generates; this sweep reads a "
           "dataset that exists (data.dir): give eval.data, datasets of its task at other lengths "
           "(rmt generate, rmt data import)", where);
    if (!has_length)
      fail("{}.multiples: multiples of the data's length need data.length (the task's length option) in data: "
           "or grid:; for a task without one (e.g. ar_remember's pairs), give eval.data", where);
  }
  return eval;
}

}  // namespace

SweepSpec parse_sweep(const std::string& yaml_text, const std::string& path) {
  SweepSpec spec;
  spec.path = path;
  spec.name = fs::path(path).stem().string();
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    fail("{}: malformed YAML at line {}, column {}: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  if (!root.IsMap()) fail("{}: expected a mapping with data:, base: and grid:", path);
  const std::vector<std::string> sections = {"data", "base", "grid", "derive", "eval"};
  std::set<std::string> seen_sections;
  for (const auto& entry : root) {
    std::string key = key_of(entry.first, path);
    if (std::find(sections.begin(), sections.end(), key) == sections.end())
      fail("{}: unknown section '{}'{}; sections: data, base, grid, derive, eval", path, key,
           did_you_mean(closest_match(key, sections)));
    // YAML readers keep one of two equal keys and drop the other without a word.
    if (!seen_sections.insert(key).second) fail("{}: section '{}' is given twice", path, key);
  }
  // data: the `rmt generate` options
  if (!root["data"] || !root["data"].IsMap()) fail("{}: 'data:' (the dataset's `rmt generate` options, e.g. task: copy) is required", path);
  std::map<std::string, std::string> data;
  for (const auto& entry : root["data"]) {
    std::string option = key_of(entry.first, path + ": data");
    std::string where = fmt::format("{}: data.{}", path, option);
    if (data.count(option)) fail("{}: given twice", where);
    std::string value = scalar_of(entry.second, where);
    check_data_option(option, value, fmt::format("{}: data", path));
    spec.data.emplace_back(option, value);
    data[option] = value;
  }
  // base: an rmt train config, checked by the config's own parser (did-you-mean included)
  if (root["base"]) {
    if (!root["base"].IsMap()) fail("{}: 'base:' must be a mapping of `rmt train` config keys", path);
    if (root["base"]["data"])
      fail("{}: base: 'data' is filled in by the sweep; give the dataset's `rmt generate` options "
           "in the top-level 'data:' block instead", path);
    YAML::Emitter out;
    out << root["base"];
    spec.base = parse_config(out.c_str(), path + ": base");
  }
  // grid: every value of every key is applied to the base config now, so a bad one fails
  // before any run starts. A list of maps is several grids, run one after another.
  YAML::Node grid_node = root["grid"];
  if (!grid_node || !(grid_node.IsMap() || grid_node.IsSequence()) || grid_node.size() == 0)
    fail("{}: 'grid:' (dotted config keys -> lists of values, or a list of such maps) is required "
         "and must not be empty", path);
  std::vector<YAML::Node> blocks;
  if (grid_node.IsMap()) blocks.push_back(grid_node);
  else
    for (const auto& b : grid_node) blocks.push_back(b);
  std::set<std::string> grid_keys;
  bool any_task_grid = false;
  for (size_t bi = 0; bi < blocks.size(); ++bi) {
    const std::string gname = blocks.size() == 1 ? "grid" : fmt::format("grid[{}]", bi);
    if (!blocks[bi].IsMap() || blocks[bi].size() == 0)
      fail("{}: {}: expected a non-empty mapping of dotted config keys to lists", path, gname);
    SweepSpec::Grid grid;
    for (const auto& entry : blocks[bi]) {
      std::string key = key_of(entry.first, fmt::format("{}: {}", path, gname));
      std::string where = fmt::format("{}: {}.{}", path, gname, key);
      for (const auto& [k, v] : grid)
        if (k == key) fail("{}: given twice", where);
      if (!entry.second.IsSequence()) fail("{}: expected a list of values, e.g. [1, 2, 3]", where);
      if (entry.second.size() == 0) fail("{}: the list is empty; give at least one value", where);
      std::vector<std::string> values;
      for (const auto& v : entry.second) {
        std::string text = scalar_of(v, where);
        if (std::find(values.begin(), values.end(), text) != values.end())
          fail("{}: value '{}' is listed twice", where, text);
        if (is_data_key(key)) {
          check_data_option(key.substr(5), text, fmt::format("{}: {}", path, gname));
          auto d = data;
          d[key.substr(5)] = text;
          resolve_data(d, where);
        } else {
          Config probe = spec.base;
          apply_value(probe, key, text, where);
        }
        values.push_back(text);
      }
      grid_keys.insert(key);
      any_task_grid |= key == "data.task" || key == "data.dir";
      grid.emplace_back(key, values);
    }
    spec.grids.push_back(grid);
  }
  if (!any_task_grid) resolve_data(data, path);
  // derive: key -> expression, parsed now with placeholder values to catch typos
  if (root["derive"]) {
    if (!root["derive"].IsMap()) fail("{}: 'derive:' must map config keys to expressions", path);
    for (const auto& entry : root["derive"]) {
      std::string key = key_of(entry.first, path + ": derive");
      std::string where = fmt::format("{}: derive.{}", path, key);
      std::string expr = scalar_of(entry.second, where);
      for (const auto& [k, e] : spec.derive)
        if (k == key) fail("{}: given twice", where);
      if (grid_keys.count(key)) fail("{}: '{}' is also in grid:; a key is either listed or derived", where, key);
      Config probe = spec.base;
      apply_value(probe, key, "1", where);  // unknown keys fail here, with did-you-mean
      // Syntax and names only: the values are known per grid point (plan_sweep evaluates them).
      check_expression(expr, {"segment_length", "seq_len", "segments"}, where);
      spec.derive.emplace_back(key, expr);
    }
  }
  if (root["eval"]) spec.eval = parse_eval(root["eval"], path, spec, grid_keys);
  return spec;
}

SweepSpec load_sweep(const std::string& path) {
  if (!fs::exists(path)) fail("sweep file {} does not exist", path);
  return parse_sweep(read_file(path), path);
}

void apply_sweep_override(SweepSpec& spec, const std::string& assignment, const std::string& device) {
  const size_t equals = assignment.find('=');
  std::string key = assignment.substr(0, equals);
  key.erase(key.find_last_not_of(" \t") + 1);
  key.erase(0, key.find_first_not_of(" \t"));
  if (key == "data" || sweep_internal::is_data_key(key))
    fail("--set {}: the sweep's dataset is its data: block (edit the sweep file, or grid it as data.KEY)", assignment);
  for (const auto& grid : spec.grids)
    for (const auto& [grid_key, values] : grid)
      if (grid_key == key) fail("--set {}: {}'s grid sets {} run by run", assignment, spec.path, key);
  for (const auto& [derive_key, expr] : spec.derive)
    if (derive_key == key) fail("--set {}: {}'s derive: sets {} ({})", assignment, spec.path, key, expr);
  // What plan_sweep sets in every run after the base config, over any --set.
  if (key == "train.threads")
    fail("--set {}: the sweep sets each run's train.threads (the cores split between the -j runs); give "
         "--threads N", assignment);
  if (key == "device" && !device.empty())
    fail("--set {}: --device {} sets the runs' device; give one of them", assignment, device);
  apply_override(spec.base, assignment);  // the config's own checks: unknown keys, values
}

}  // namespace rmt
