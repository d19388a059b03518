#include "lib/experiments/sweep.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/files/io.h"
#include "tasks/tasks.h"
#include "tasks/text.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The `rmt generate` options a `data:` block may hold.
const std::vector<std::string> kDataKeys = {"task", "length", "symbols", "pairs", "max_root",
                                            "max_alpha", "train", "val", "test", "seed",
                                            "input", "split", "bytes"};  // the last three: task text

std::string closest_of(const std::string& word, const std::vector<std::string>& choices) {
  // Fewest differing characters at the same position plus the length difference: crude but
  // enough to point at a typo among a handful of names.
  std::string best;
  size_t best_score = size_t(-1);
  for (const auto& c : choices) {
    size_t score = std::max(word.size(), c.size()) - std::min(word.size(), c.size());
    for (size_t i = 0; i < std::min(word.size(), c.size()); ++i) score += word[i] != c[i];
    if (score < best_score) best_score = score, best = c;
  }
  return best;
}

bool is_data_key(const std::string& key) { return key.rfind("data.", 0) == 0; }

// Applies `key: value` to a config, rewording the config's own error (which has the reason and
// the did-you-mean) so that it names the sweep file and section.
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

void check_data_option(const std::string& option, const std::string& value, const std::string& where) {
  if (std::find(kDataKeys.begin(), kDataKeys.end(), option) == kDataKeys.end())
    fail("{}: unknown data option '{}' (did you mean '{}'?); options: {}", where, option,
         closest_of(option, kDataKeys), fmt::join(kDataKeys, ", "));
  if (option == "task") return;
  if (option == "input") {  // task text: the file whose bytes become the dataset
    if (value.empty()) fail("{}: data option 'input' is empty; give the text file", where);
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
  if (ec == std::errc::result_out_of_range || v > max || v < 0 || (v == 0 && option != "seed"))
    fail("{}: invalid value '{}' for data option '{}': expected an integer in [{}, {}]", where, value, option,
         option == "seed" ? 0 : 1, max);
}

// A data block of task text: `rmt generate text --input FILE [--split S] [--bytes N]`; the
// algorithmic tasks' options are refused as `rmt generate text` refuses them.
bool is_text_data(const std::map<std::string, std::string>& data, const std::string& where) {
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

// Resolves a data block to the task it generates (fails like `rmt generate` would).
TaskOptions resolve_data_task(const std::map<std::string, std::string>& data, const std::string& where) {
  auto get = [&](const char* k) -> std::optional<int> {
    auto it = data.find(k);
    if (it == data.end()) return std::nullopt;
    check_data_option(k, it->second, where);  // so the conversion below cannot fail
    return int(std::stoll(it->second));
  };
  auto task = data.find("task");
  if (task == data.end()) fail("{}: data: 'task' is required (e.g. task: copy)", where);
  if (is_text_data(data, where)) return TaskOptions{};  // no algorithmic task to resolve
  try {
    return resolve_task(task->second, get("length"), get("symbols"), get("pairs"));
  } catch (const Error& e) {
    fail("{}: data: {}", where, e.what());
  }
}

int task_seq_len(const TaskOptions& t) {
  return task_stacked(t) ? task_len_x(t) + task_len_y(t) - 1 : task_len_x(t);
}

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

// ---- derive expressions: a tiny recursive-descent parser ------------------------------------
// Integers are 64-bit and every operation is checked: an overflow or a division by zero is an
// error naming the expression, never a wrapped value or a SIGFPE. Nesting (parentheses and unary
// minus) is limited so that a hostile expression cannot overflow the stack.
constexpr int kMaxExpressionDepth = 64;

struct ExprParser {
  const std::string& s;
  const std::map<std::string, long long>& vars;
  const std::string& origin;
  bool syntax_only = false;  // arithmetic errors are ignored (values are placeholders)
  size_t i = 0;
  int depth = 0;

  void skip() { while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i; }
  [[noreturn]] void error(const std::string& what, const std::string& context = "") {
    std::string shown = s.size() > 80 ? s.substr(0, 80) + "..." : s;
    fail("{}: {} in expression '{}' at column {}{}", origin, what, shown, i + 1, context);
  }
  // An arithmetic error at the operator that caused it; 0 when only the syntax is checked.
  long long arithmetic_error(const std::string& what, size_t at) {
    if (syntax_only) return 0;
    i = at;
    std::string values;
    for (const auto& [k, v] : vars) values += fmt::format(", {} = {}", k, v);
    error(what, " (with" + values.substr(1) + ")");
  }
  long long apply(char op, long long a, long long b, size_t at) {
    long long r = 0;
    switch (op) {
      case '+':
        if (__builtin_add_overflow(a, b, &r)) return arithmetic_error("integer overflow in '+'", at);
        return r;
      case '-':
        if (__builtin_sub_overflow(a, b, &r)) return arithmetic_error("integer overflow in '-'", at);
        return r;
      case '*':
        if (__builtin_mul_overflow(a, b, &r)) return arithmetic_error("integer overflow in '*'", at);
        return r;
      default:  // '/': integer division, truncating toward zero
        if (b == 0) return arithmetic_error("division by zero", at);
        if (a == std::numeric_limits<long long>::min() && b == -1)
          return arithmetic_error("integer overflow in '/'", at);
        return a / b;
    }
  }
  void enter() {
    if (++depth > kMaxExpressionDepth)
      error(fmt::format("nesting deeper than {} levels", kMaxExpressionDepth));
  }
  long long expr() {
    enter();
    long long v = term();
    for (skip(); i < s.size() && (s[i] == '+' || s[i] == '-'); skip()) {
      size_t at = i;
      char op = s[i++];
      long long r = term();
      v = apply(op, v, r, at);
    }
    --depth;
    return v;
  }
  long long term() {
    long long v = factor();
    for (skip(); i < s.size() && (s[i] == '*' || s[i] == '/'); skip()) {
      size_t at = i;
      char op = s[i++];
      long long r = factor();
      v = apply(op, v, r, at);
    }
    return v;
  }
  long long factor() {
    skip();
    if (i >= s.size()) error("unexpected end");
    if (s[i] == '(') {
      ++i;
      long long v = expr();
      skip();
      if (i >= s.size() || s[i] != ')') error("missing ')'");
      ++i;
      return v;
    }
    if (s[i] == '-') {
      size_t at = i++;
      enter();
      long long v = factor();
      --depth;
      return apply('-', 0, v, at);
    }
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      size_t start = i;
      long long v = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        if (__builtin_mul_overflow(v, 10LL, &v) || __builtin_add_overflow(v, (long long)(s[i] - '0'), &v)) {
          i = start;
          error("integer literal too large (the limit is 9223372036854775807)");
        }
        ++i;
      }
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_') {
      size_t start = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      std::string name = s.substr(start, i - start);
      auto it = vars.find(name);
      if (it == vars.end()) {
        std::vector<std::string> names;
        for (const auto& [k, v] : vars) names.push_back(k);
        i = start;
        if (name.size() > 40) name = name.substr(0, 40) + "...";
        error(fmt::format("unknown name '{}' (known: {})", name, fmt::join(names, ", ")));
      }
      return it->second;
    }
    if (std::isprint(static_cast<unsigned char>(s[i]))) error(fmt::format("unexpected '{}'", s[i]));
    error(fmt::format("unexpected byte 0x{:02x}", static_cast<unsigned char>(s[i])));
  }
  long long parse_all() {
    long long v = expr();
    skip();
    if (i != s.size()) {
      if (s[i] == ')') error("unmatched ')'");
      if (std::isprint(static_cast<unsigned char>(s[i]))) error(fmt::format("unexpected '{}'", s[i]));
      error(fmt::format("unexpected byte 0x{:02x}", static_cast<unsigned char>(s[i])));
    }
    return v;
  }
};

// The value of one dotted key in a config, as its YAML text (via to_yaml, the one place that
// knows how each key prints).
std::string config_value(const Config& config, const std::string& key) {
  YAML::Node root = YAML::Load(to_yaml(config));
  size_t dot = key.find('.');
  YAML::Node node = dot == std::string::npos ? root[key] : root[key.substr(0, dot)][key.substr(dot + 1)];
  return node.IsScalar() ? node.Scalar() : "";
}

// Short names for the RUN_ID prefix; other keys use their last component.
std::string short_name(const std::string& key) {
  static const std::map<std::string, std::string> names = {
      {"segments", "seg"}, {"model.num_mem_tokens", "mem"}, {"model.mem_len", "cache"},
      {"train.seed", "seed"}, {"bptt", "bptt"}, {"train.lr", "lr"}, {"model.n_layer", "layers"}};
  auto it = names.find(key);
  if (it != names.end()) return it->second;
  return key.substr(key.rfind('.') + 1);
}

std::string id_safe(const std::string& text) {
  std::string out;
  for (char ch : text) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' ? ch : '_';
  return out;
}

// Last non-empty line of a file (a failed run's error message).
std::string last_line(const fs::path& path) {
  if (!fs::exists(path)) return "";
  std::string text = read_file(path), last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    size_t cr = line.rfind('\r');  // progress lines on a tty overwrite themselves
    if (cr != std::string::npos) line = line.substr(cr + 1);
    if (line.find_first_not_of(" \t") != std::string::npos) last = line;
  }
  return last;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

std::string json_number(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  if (j[key].is_number_float()) return fmt::format("{:.6g}", j[key].get<double>());
  return j[key].dump();
}

}  // namespace

std::string generate_flag(const std::string& data_option) {
  std::string flag = "--" + data_option;  // max_root -> --max-root
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

long long eval_expression(const std::string& expr, const std::map<std::string, long long>& vars,
                          const std::string& origin) {
  ExprParser p{expr, vars, origin};
  return p.parse_all();
}

void check_expression(const std::string& expr, const std::vector<std::string>& names, const std::string& origin) {
  std::map<std::string, long long> vars;
  for (const auto& name : names) vars[name] = 1;
  ExprParser p{expr, vars, origin};
  p.syntax_only = true;
  p.parse_all();
}

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
  const std::vector<std::string> sections = {"data", "base", "grid", "derive"};
  std::set<std::string> seen_sections;
  for (const auto& entry : root) {
    std::string key = key_of(entry.first, path);
    if (std::find(sections.begin(), sections.end(), key) == sections.end())
      fail("{}: unknown section '{}' (did you mean '{}'?); sections: data, base, grid, derive", path,
           key, closest_of(key, sections));
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
          resolve_data_task(d, where);
        } else {
          Config probe = spec.base;
          apply_value(probe, key, text, where);
        }
        values.push_back(text);
      }
      grid_keys.insert(key);
      any_task_grid |= key == "data.task";
      grid.emplace_back(key, values);
    }
    spec.grids.push_back(grid);
  }
  if (!any_task_grid) resolve_data_task(data, path);
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
  return spec;
}

SweepSpec load_sweep(const std::string& path) {
  if (!fs::exists(path)) fail("sweep file {} does not exist", path);
  return parse_sweep(read_file(path), path);
}

SweepPlan plan_sweep(const SweepSpec& spec, const std::string& runs_dir, int threads,
                     const std::string& device) {
  if (!device.empty())
    for (const auto& grid : spec.grids)
      for (const auto& entry : grid)
        if (entry.first == "device")
          fail("{}: grid.device gives the runs their devices; --device {} would give them all the "
               "same one: leave out one of the two", spec.path, device);
  SweepPlan plan;
  plan.spec = spec;
  plan.sweep_dir = fs::path(runs_dir) / spec.name;
  // Columns: every grid key of any block, then the derived keys.
  auto add_column = [&](const std::string& key) {
    if (std::find(plan.columns.begin(), plan.columns.end(), key) == plan.columns.end()) plan.columns.push_back(key);
  };
  bool data_varies = false;
  for (const auto& grid : spec.grids)
    for (const auto& [key, values] : grid) add_column(key), data_varies |= is_data_key(key);
  for (const auto& [key, expr] : spec.derive) add_column(key);

  std::set<std::string> seen_ids;
  for (const auto& grid : spec.grids) {
    // Cartesian product, the first grid key varying slowest.
    std::vector<size_t> index(grid.size(), 0);
    while (true) {
      std::map<std::string, std::string> data(spec.data.begin(), spec.data.end());
      Config config = spec.base;
      std::string where = spec.path + ": grid point";
      for (size_t k = 0; k < grid.size(); ++k) {
        const auto& [key, values] = grid[k];
        where += fmt::format(" {}={}", key, values[index[k]]);
        if (is_data_key(key)) data[key.substr(5)] = values[index[k]];
        else apply_value(config, key, values[index[k]], spec.path + ": grid." + key);
      }
      // The dataset of this point and its segment lengths.
      TaskOptions task = resolve_data_task(data, where);
      const bool text = is_text_data(data, where);
      if (text) task.name = "text";
      SweepDataset dataset;
      dataset.dir = (plan.sweep_dir / "data").string();
      if (data_varies) {
        std::string sub = task.name;
        for (const auto& [k, v] : data)
          if (k != "task") sub += "-" + k + id_safe(v);
        dataset.dir = (plan.sweep_dir / "data" / sub).string();
      }
      dataset.generate_args = {"generate", data["task"], "--out", dataset.dir};
      for (const auto& [k, v] : data)
        if (k != "task") dataset.generate_args.insert(dataset.generate_args.end(), {generate_flag(k), v});
      config.data = dataset.dir;
      // A language model (task text) reads segments of segment_length: one segment a step.
      if (text && !is_lm(config))
        fail("{}: data task text trains a language model: set segment_length (base: or grid:), the "
             "positions per segment of each stream", where);
      if (!text && is_lm(config))
        fail("{}: segment_length applies to language models on data task text, not task {}; leave it out",
             where, task.name);
      const int seq_len = text ? config.segment_length : task_seq_len(task);
      if (!text && config.segments > seq_len)
        fail("{}: segments {} is more than the {} input positions of task {}", where, config.segments,
             seq_len, task.name);
      const int segment_length = text ? config.segment_length : segment_lengths(seq_len, config.segments)[0];
      const std::map<std::string, long long> vars = {
          {"segment_length", segment_length}, {"seq_len", seq_len}, {"segments", text ? 1 : config.segments}};
      for (const auto& [key, expr] : spec.derive) {
        long long v = eval_expression(expr, vars, spec.path + ": derive." + key);
        apply_value(config, key, std::to_string(v), fmt::format("{} (derive.{} = {})", where, key, v));
      }
      if (!device.empty()) apply_value(config, "device", device, "--device " + device);
      try {
        validate(config);
      } catch (const Error& e) {
        fail("{}: {}", where, e.what());
      }
      resolve_kind(config.model);  // what prepare_run does, so that RUN_ID names what runs

      // RUN_ID: readable prefix + hash of what the run computes (threads, a cpu device left out).
      config.train.threads = threads;
      std::string hash = sha256_hex(identity_yaml(config)).substr(0, 8);
      std::string id = config.model.kind;
      for (const auto& key : plan.columns) {
        if (key == "model.kind" || key == "data.task") continue;
        if (is_data_key(key) && !data.count(key.substr(5))) continue;
        std::string value = is_data_key(key) ? data[key.substr(5)] : config_value(config, key);
        // Memory sizes the kind does not use are 0 after resolve_kind: leave them out of the name.
        if ((key == "model.num_mem_tokens" || key == "model.mem_len") && value == "0") continue;
        id += "-" + short_name(key) + id_safe(value);
      }
      if (data_varies) id = task.name + "-" + id;
      id += "-" + hash;
      if (seen_ids.insert(id).second) {  // e.g. baseline x two memory sizes is one run
        SweepRun run;
        run.run_id = id;
        run.config = config;
        run.segment_length = segment_length;
        run.dir = plan.sweep_dir / id;
        run.data_options = data;
        plan.runs.push_back(run);
        bool have = false;
        for (const auto& d : plan.datasets) have |= d.dir == dataset.dir;
        if (!have) plan.datasets.push_back(dataset);
      }
      // next grid point
      size_t k = grid.size();
      while (k > 0 && ++index[k - 1] == grid[k - 1].second.size()) index[--k] = 0;
      if (k == 0) break;
    }
  }
  return plan;
}

RunState run_state(const SweepRun& run) {
  if (fs::exists(run.dir / "results.json")) return RunState::done;
  if (fs::exists(run.dir / "sweep_error.txt")) return RunState::failed;
  if (fs::exists(run.dir / "state.safetensors")) return RunState::resumable;
  return RunState::pending;
}

const char* run_state_name(RunState s) {
  switch (s) {
    case RunState::done: return "done";
    case RunState::failed: return "failed";
    case RunState::resumable: return "resumable";
    default: return "pending";
  }
}

static fs::path config_file(const SweepPlan& plan, const SweepRun& run) {
  return plan.sweep_dir / "configs" / (run.run_id + ".yaml");
}

std::vector<std::string> train_args(const SweepPlan& plan, const SweepRun& run) {
  // A run that has started (config.yaml is its first file) resumes from its own saved config:
  // that is the text train compares against, and it keeps the thread count the run started
  // with. Without a checkpoint yet, `train --resume` restarts it from step 0.
  if (fs::exists(run.dir / "config.yaml"))
    return {"train", "--config", (run.dir / "config.yaml").string(), "--out", run.dir.string(), "--resume"};
  return {"train", "--config", config_file(plan, run).string(), "--out", run.dir.string()};
}

std::string shell_quote(const std::string& word) {
  bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || std::string("/._-=+:,@").find(ch) != std::string::npos;
  });
  if (plain) return word;
  std::string out = "'";
  for (char ch : word) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

static std::string command_line(const std::string& binary, const std::vector<std::string>& args) {
  std::string line = shell_quote(binary);
  for (const auto& a : args) line += " " + shell_quote(a);
  return line;
}

// Removes the temp files (NAME.tmp.PID) that writers killed mid-write left in dir, whatever
// NAME is; a live process's temp file is left alone (remove_stale_temp_files).
static void remove_stale_temps(const fs::path& dir, bool quiet) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string file = it->path().filename().string();
    size_t tmp = file.rfind(".tmp.");
    if (tmp != std::string::npos && tmp > 0) names.push_back(file.substr(0, tmp));
  }
  if (names.empty()) return;
  for (const fs::path& p : remove_stale_temp_files(dir, names))
    if (!quiet) fmt::print(stderr, "sweep: removed {}, left by a write that was killed mid-way\n", p.string());
}

// Runs `binary args...` to completion with output into log; returns the exit status.
static int run_and_wait(const std::string& binary, const std::vector<std::string>& args, const fs::path& log);

void prepare_sweep_files(const SweepPlan& plan, const SweepOptions& options) {
  for (const auto& d : plan.datasets) {
    if (fs::exists(fs::path(d.dir) / "meta.yaml")) continue;  // meta.yaml is written last
    if (!options.quiet) fmt::print(stderr, "sweep: generating {}\n", command_line("rmt", d.generate_args));
    std::vector<std::string> args = d.generate_args;
    args.push_back("--force");  // a directory without meta.yaml is an interrupted generation
    fs::create_directories(d.dir);
    remove_stale_temps(d.dir, options.quiet);
    fs::path log = fs::path(d.dir) / "generate.log";
    if (run_and_wait(options.rmt_binary, args, log) != 0)
      fail("generating {} failed: {}", d.dir, last_line(log));
  }
  fs::create_directories(plan.sweep_dir / "configs");
  for (const auto& run : plan.runs) {
    fs::path path = config_file(plan, run);
    std::string text = to_yaml(run.config);
    if (!fs::exists(path) || read_file(path) != text) write_file_atomic(path, text);
  }
}

std::string results_csv_text(const SweepPlan& plan) {
  // Columns: the grid and derived keys, the keys every table needs, then the metrics.
  std::vector<std::string> config_cols = plan.columns;
  for (const char* k : {"model.kind", "segments", "model.num_mem_tokens", "model.mem_len", "bptt", "train.seed"})
    if (std::find(config_cols.begin(), config_cols.end(), k) == config_cols.end()) config_cols.push_back(k);
  // Sweeps whose runs stop when solved: the target, for the tables' solve counts (other sweeps'
  // files stay as they were).
  bool any_target = false;
  for (const auto& run : plan.runs) any_target = any_target || run.config.train.target > 0;
  if (any_target && std::find(config_cols.begin(), config_cols.end(), "train.target") == config_cols.end())
    config_cols.push_back("train.target");
  // Language models (a sweep over text) add bpc after loss; other sweeps' files stay as they were.
  bool any_lm = false;
  for (const auto& run : plan.runs) any_lm = any_lm || is_lm(run.config);
  std::vector<std::string> metrics = {"acc_teacher_forced", "acc_free_running", "solve_rate",
                                      "solve_rate_teacher_forced", "loss"};
  if (any_lm) metrics.push_back("bpc");
  std::vector<std::string> tail = {"segment_length"};
  tail.insert(tail.end(), metrics.begin(), metrics.end());
  for (const char* k : {"run_id", "status", "steps", "end_reason", "solved_step", "wall_time_s", "git_commit", "threads", "error"})
    tail.push_back(k);
  std::vector<std::string> header = config_cols;
  header.insert(header.end(), tail.begin(), tail.end());
  std::string out;
  for (size_t i = 0; i < header.size(); ++i) out += (i ? "," : "") + csv_field(header[i]);
  out += "\n";
  for (const auto& run : plan.runs) {
    RunState state = run_state(run);
    if (state != RunState::done && state != RunState::failed) continue;
    std::vector<std::string> row;
    for (const auto& key : config_cols)
      if (key == "segments" && is_lm(run.config)) row.push_back("1");  // one segment a step
      else if (!is_data_key(key)) row.push_back(config_value(run.config, key));
      else if (auto it = run.data_options.find(key.substr(5)); it != run.data_options.end()) row.push_back(it->second);
      else row.push_back("");
    json r;
    std::string error;
    if (state == RunState::done) {
      r = json::parse(read_file(run.dir / "results.json"), nullptr, false);
      if (r.is_discarded()) r = json::object();
    } else {
      error = read_file(run.dir / "sweep_error.txt");
      while (!error.empty() && (error.back() == '\n' || error.back() == '\r')) error.pop_back();
    }
    row.push_back(std::to_string(run.segment_length));
    for (const std::string& k : metrics) row.push_back(json_number(r, k.c_str()));
    row.push_back(run.run_id);
    row.push_back(state == RunState::done ? "done" : "failed");
    row.push_back(json_number(r, "steps"));
    // results.json written before the stopping rule: a done run went to its max_steps
    row.push_back(state != RunState::done ? ""
                  : r.contains("end_reason") && r["end_reason"].is_string() ? r["end_reason"].get<std::string>()
                                                                             : "max_steps");
    row.push_back(json_number(r, "solved_step"));
    row.push_back(r.contains("wall_time_s") ? fmt::format("{:.1f}", r["wall_time_s"].get<double>()) : "");
    row.push_back(r.contains("git_commit") ? r["git_commit"].get<std::string>() : "");
    row.push_back(json_number(r, "threads"));
    row.push_back(error);
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csv_field(row[i]);
    out += "\n";
  }
  return out;
}

void write_results_csv(const SweepPlan& plan) {
  fs::create_directories(plan.sweep_dir);
  write_file_atomic(plan.sweep_dir / "results.csv", results_csv_text(plan));
}

// ---- subprocesses -----------------------------------------------------------------------------

static pid_t spawn(const std::string& binary, const std::vector<std::string>& args, const fs::path& log) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) fail("fork failed: {}", std::strerror(errno));
  if (pid == 0) {
    // A killed sweep takes its runs with it: otherwise an orphaned run would keep writing into
    // a directory that the next sweep resumes.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    std::vector<char*> argv;
    std::string b = binary;
    argv.push_back(b.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(binary.c_str(), argv.data());
    std::fprintf(stderr, "rmt sweep: cannot run %s: %s\n", binary.c_str(), std::strerror(errno));
    _exit(127);
  }
  return pid;
}

static int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

static int run_and_wait(const std::string& binary, const std::vector<std::string>& args, const fs::path& log) {
  pid_t pid = spawn(binary, args, log);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return exit_code(status);
}

// "step 1200 val 0.873" from the tail of a run's metrics.jsonl.
static std::string run_progress(const SweepRun& run) {
  fs::path path = run.dir / "metrics.jsonl";
  if (!fs::exists(path)) return "starting";
  std::string text = read_file(path);
  int64_t step = 0;
  std::string val = "-";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    step = std::max(step, j.value("step", int64_t(0)));
    if (j.contains("val_acc_teacher_forced")) val = fmt::format("{:.3f}", j["val_acc_teacher_forced"].get<double>());
  }
  return fmt::format("step {}/{} val {}", step, run.config.train.max_steps, val);
}

// `rmt train` holds its run directory's lock while it runs. A sweep killed a moment ago takes
// its runs with it, but a run's SIGKILL may still be on its way: wait a few seconds for such a
// run to die. A run that is still in use then (another train in that directory) fails with
// train's own message, and the sweep records it.
static void wait_for_run_directory(const fs::path& dir) {
  auto start = std::chrono::steady_clock::now();
  DirectoryLock lock;
  while (!lock.try_lock(dir) && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

int run_sweep(const SweepPlan& plan, const SweepOptions& options) {
  // A device this build lacks would fail every run on it: refuse it once, before anything runs.
  std::set<std::string> checked;
  for (const auto& run : plan.runs) {
    if (run_state(run) == RunState::done || !checked.insert(run.config.device).second) continue;
    try {
      backend_by_name(run.config.device);
    } catch (const Error& e) {
      fail("{} (sweep {}, run {} and any other on that device)", e.what(), plan.spec.name, run.run_id);
    }
  }
  fs::create_directories(plan.sweep_dir);
  // One sweep per directory at a time; the lock dies with the process (even on SIGKILL).
  // A sweep killed with SIGKILL leaves the file but not the lock: the next sweep just takes it.
  fs::path lock_path = plan.sweep_dir / ".lock";
  int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) fail("cannot open the sweep's lock file {}: {}", lock_path.string(), std::strerror(errno));
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    close(lock_fd);
    if (err == EWOULDBLOCK)
      fail("{}: another `rmt sweep` is running in this directory (it holds {}); wait for it to "
           "end, or stop it", plan.sweep_dir.string(), lock_path.string());
    fail("cannot lock {}: {}", lock_path.string(), std::strerror(err));
  }
  // Holding the lock, this sweep owns the files only sweeps write: what a killed one left
  // half-written goes (run directories are cleaned as their runs start).
  remove_stale_temps(plan.sweep_dir, options.quiet);
  remove_stale_temps(plan.sweep_dir / "configs", options.quiet);

  prepare_sweep_files(plan, options);
  std::vector<size_t> queue;  // runs still to do, in grid order
  int done = 0, failed = 0;
  for (size_t i = 0; i < plan.runs.size(); ++i) {
    RunState s = run_state(plan.runs[i]);
    if (s == RunState::done) ++done;
    else queue.push_back(i);  // failed runs are retried
  }
  write_results_csv(plan);
  if (!options.quiet)
    fmt::print(stderr, "sweep {}: {} runs, {} done, {} to run, {} at a time, {} threads each\n",
               plan.spec.name, plan.runs.size(), done, queue.size(), options.jobs,
               plan.runs.empty() ? 0 : plan.runs[0].config.train.threads);

  std::map<pid_t, size_t> running;
  size_t next = 0;
  auto last_report = std::chrono::steady_clock::now() - std::chrono::hours(1);
  const bool tty = isatty(2);
  while (next < queue.size() || !running.empty()) {
    while (next < queue.size() && int(running.size()) < options.jobs) {
      const SweepRun& run = plan.runs[queue[next++]];
      fs::create_directories(run.dir);
      wait_for_run_directory(run.dir);
      remove_stale_temps(run.dir, options.quiet);  // sweep_error.txt's (train cleans its own too)
      fs::remove(run.dir / "sweep_error.txt");
      auto args = train_args(plan, run);
      append_line(run.dir / "train.log", "$ " + command_line("rmt", args));
      running[spawn(options.rmt_binary, args, run.dir / "train.log")] = size_t(&run - plan.runs.data());
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const SweepRun& run = plan.runs[running[pid]];
      running.erase(pid);
      const int code = exit_code(status);
      const bool ok = code == 0 && fs::exists(run.dir / "results.json");
      std::string why;
      if (ok) {
        ++done;
      } else {
        ++failed;
        if (WIFSIGNALED(status)) {
          // Killed from outside (OOM killer, kill -9): its log ends in a progress line, which
          // would read as the reason.
          why = fmt::format("rmt train was killed by signal {} ({}) at {}; the next sweep resumes it",
                            WTERMSIG(status), strsignal(WTERMSIG(status)), run_progress(run));
        } else if (code == 0) {
          why = "rmt train exited without writing results.json";
        } else {
          why = last_line(run.dir / "train.log");
          if (why.empty()) why = fmt::format("rmt train exited with status {}", code);
        }
        write_file_atomic(run.dir / "sweep_error.txt", why + "\n");
      }
      write_results_csv(plan);
      if (!options.quiet)
        fmt::print(stderr, "{}sweep: {} {}{}\n", tty ? "\r\033[K" : "", run.run_id,
                   ok ? "done" : "FAILED: ", why);
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (!options.quiet && now - last_report >= std::chrono::seconds(tty ? 1 : 30)) {
      last_report = now;
      std::string line = fmt::format("sweep: {} done, {} failed, {} running, {} pending", done, failed,
                                     running.size(), queue.size() - next);
      for (const auto& [p, i] : running) line += fmt::format(" | {}: {}", plan.runs[i].run_id, run_progress(plan.runs[i]));
      if (tty) fmt::print(stderr, "\r\033[K{}", line);
      else fmt::print(stderr, "{}\n", line);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a finished run's slot refills soon
  }
  if (!options.quiet)
    fmt::print(stderr, "{}sweep {}: {} done, {} failed; results in {}\n", tty ? "\r\033[K" : "", plan.spec.name,
               done, failed, (plan.sweep_dir / "results.csv").string());
  close(lock_fd);
  return failed;
}

std::vector<std::string> pending_commands(const SweepPlan& plan, const SweepOptions& options,
                                          const std::string& threads) {
  std::vector<std::string> out;
  for (const auto& run : plan.runs) {
    if (run_state(run) == RunState::done) continue;
    std::vector<std::string> args = train_args(plan, run);
    std::string line = command_line(options.rmt_binary, args);
    // A started run (train_args resumes it) keeps the thread count in its saved config.
    if (std::find(args.begin(), args.end(), "--resume") == args.end()) line += " --set train.threads=" + threads;
    out.push_back(line);
  }
  return out;
}

// ---- SLURM ------------------------------------------------------------------------------------

static bool all_digits(const std::string& s, size_t max_digits = 9) {
  return !s.empty() && s.size() <= max_digits &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

static std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = s.find(sep, start)) != std::string::npos; start = at + 1) parts.push_back(s.substr(start, at - start));
  parts.push_back(s.substr(start));
  return parts;
}

// sbatch's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (or UNLIMITED / INFINITE). The
// leading field may be large (90 minutes, 48 hours); the ones after it are clock fields.
static bool slurm_time_ok(const std::string& t) {
  std::string upper = t;
  for (char& ch : upper) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  if (upper == "UNLIMITED" || upper == "INFINITE") return true;
  std::vector<std::string> days = split(t, '-');
  if (days.size() > 2) return false;
  std::vector<std::string> clock = split(days.back(), ':');
  if (clock.size() > 3) return false;
  for (const auto& f : clock)
    if (!all_digits(f)) return false;
  if (days.size() == 2) {
    if (!all_digits(days[0]) || std::stol(clock[0]) >= 24) return false;  // D-H...: H is an hour of the day
    for (size_t k = 1; k < clock.size(); ++k)
      if (std::stol(clock[k]) >= 60) return false;
    return true;
  }
  for (size_t k = 1; k < clock.size(); ++k)
    if (std::stol(clock[k]) >= 60) return false;
  return true;
}

static bool slurm_name_ok(const std::string& s, bool list) {
  if (s.empty()) return false;
  for (const std::string& part : list ? split(s, ',') : std::vector<std::string>{s})
    if (part.empty() || !std::all_of(part.begin(), part.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.';
        }))
      return false;
  return true;
}

// A value as it appears in a one-line message: control characters (a newline) escaped.
static std::string printable(const std::string& s) {
  std::string out;
  for (char ch : s)
    if (ch == '\n') out += "\\n";
    else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) out += fmt::format("\\x{:02x}", static_cast<unsigned char>(ch));
    else out += ch;
  return out;
}

void check_slurm_option(const std::string& option, const std::string& v) {
  // Every value goes into an `#SBATCH --KEY=VALUE` line: besides its format, none may hold a
  // space or a newline (which would end the line and start a shell command). An empty value is
  // malformed like any other: sbatch would not read `--mem=`, and dropping it would run the job
  // with the cluster's default instead of what was asked.
  if (option == "--time") {
    if (!slurm_time_ok(v))
      fail("--time '{}' is not a SLURM time limit; give minutes (90), H:MM:SS (12:00:00) or "
           "D-HH[:MM[:SS]] (2-00:00:00), with minutes and seconds below 60", printable(v));
  } else if (option == "--mem") {
    std::string digits = v;
    if (!digits.empty() && std::string("KMGTkmgt").find(digits.back()) != std::string::npos) digits.pop_back();
    if (!all_digits(digits, 12))
      fail("--mem '{}' is not a SLURM memory size; give a whole number with an optional K, M, G "
           "or T suffix, e.g. 4G or 4000M (no suffix: megabytes)", printable(v));
  } else if (option == "--gpus") {
    size_t colon = v.rfind(':');
    std::string count = colon == std::string::npos ? v : v.substr(colon + 1);
    bool type_ok = colon == std::string::npos || slurm_name_ok(v.substr(0, colon), false);
    if (!type_ok || !all_digits(count) || std::stol(count) < 1)
      fail("--gpus '{}' is not a SLURM GPU count; give N or TYPE:N with N at least 1, e.g. 1 or a100:2 "
           "(leave --gpus out for none)", printable(v));
  } else if (option == "--partition") {
    if (!slurm_name_ok(v, true))
      fail("--partition '{}' is not a SLURM partition name (letters, digits, _ - and .; a comma-separated "
           "list for several; leave --partition out for the cluster's default)", printable(v));
  } else if (option == "--account") {
    if (!slurm_name_ok(v, false))
      fail("--account '{}' is not a SLURM account name (letters, digits, _ - and .; leave --account "
           "out for your default)", printable(v));
  } else {
    fail("internal: '{}' is not a SLURM option rmt sweep knows", option);
  }
}

void check_slurm_options(const SlurmOptions& o) {
  if (o.cpus_per_task < 1 || o.cpus_per_task > kMaxThreads)
    fail("--cpus-per-task must be from 1 to {} (got {}): each run trains with that many threads",
         kMaxThreads, o.cpus_per_task);
  check_slurm_option("--time", o.time);
  // The others are optional: empty here is "not given" (the command line checks a given one).
  for (const auto& [option, value] : {std::pair{"--mem", &o.mem}, std::pair{"--gpus", &o.gpus},
                                      std::pair{"--partition", &o.partition}, std::pair{"--account", &o.account}})
    if (!value->empty()) check_slurm_option(option, *value);
}

std::string slurm_script(const SweepPlan& plan, const SweepOptions& options, const SlurmOptions& slurm) {
  check_slurm_options(slurm);
  // The array task's own cores: sbatch sets SLURM_CPUS_PER_TASK from --cpus-per-task, and the
  // script's eval expands it inside each command.
  std::vector<std::string> commands = pending_commands(plan, options, "$SLURM_CPUS_PER_TASK");
  std::vector<std::string> run_dirs;
  for (const auto& run : plan.runs)
    if (run_state(run) != RunState::done) run_dirs.push_back(run.dir.string());
  // Absolute: sbatch resolves a relative --output against the directory it is called from.
  const std::string log_dir = fs::absolute(plan.sweep_dir).lexically_normal().string();
  std::string s;
  s += "#!/bin/bash\n";
  s += fmt::format("# SLURM job array for sweep {} ({} runs). Submit with: sbatch {}\n", plan.spec.name,
                   commands.size(), (plan.sweep_dir / "sweep.slurm").string());
  s += "# Each task runs one `rmt train` with one thread per core of its allocation (--cpus-per-task).\n";
  s += "# A run cut off by --time resumes from its last checkpoint: emit and submit again.\n";
  s += "# Afterwards `rmt sweep " + plan.spec.path + " --collect` writes results.csv (each finished run once).\n";
  s += fmt::format("#SBATCH --job-name=rmt-{}\n", plan.spec.name);
  s += fmt::format("#SBATCH --array=0-{}\n", commands.empty() ? 0 : commands.size() - 1);
  s += fmt::format("#SBATCH --output={}/slurm-%A_%a.log\n", log_dir);
  s += fmt::format("#SBATCH --cpus-per-task={}\n", slurm.cpus_per_task);
  s += fmt::format("#SBATCH --time={}\n", slurm.time);
  if (!slurm.mem.empty()) s += fmt::format("#SBATCH --mem={}\n", slurm.mem);
  if (!slurm.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", slurm.partition);
  if (!slurm.account.empty()) s += fmt::format("#SBATCH --account={}\n", slurm.account);
  if (!slurm.gpus.empty()) s += fmt::format("#SBATCH --gpus={}\n", slurm.gpus);
  s += "\nset -euo pipefail\n";
  s += ": \"${SLURM_CPUS_PER_TASK:?is not set: submit this script with sbatch, which sets it from --cpus-per-task}\"\n";
  s += "cd " + shell_quote(fs::current_path().string()) + "\n";
  s += "COMMANDS=(\n";
  for (const auto& c : commands) s += "  " + shell_quote(c) + "\n";
  s += ")\n";
  s += "RUN_DIRS=(\n";
  for (const auto& d : run_dirs) s += "  " + shell_quote(d) + "\n";
  s += ")\n";
  s += "task=$SLURM_ARRAY_TASK_ID\n";
  s += "log=" + shell_quote(log_dir) + "/slurm-${SLURM_ARRAY_JOB_ID}_${task}.log\n";
  s += "rm -f \"${RUN_DIRS[$task]}/sweep_error.txt\"\n";
  s += "status=0\n";
  s += "eval \"${COMMANDS[$task]}\" || status=$?\n";
  s += "if [ \"$status\" -ne 0 ]; then\n";
  s += "  # Recorded for `rmt sweep --collect` (a failed row in results.csv); the next emit retries it.\n";
  s += "  mkdir -p \"${RUN_DIRS[$task]}\"\n";
  s += "  why=$(tail -n 1 \"$log\" 2>/dev/null || true)\n";
  s += "  printf '%s (SLURM task %s_%s, exit status %s; log %s)\\n' \"${why:-rmt train failed}\" \\\n";
  s += "    \"$SLURM_ARRAY_JOB_ID\" \"$task\" \"$status\" \"$log\" > \"${RUN_DIRS[$task]}/sweep_error.txt\"\n";
  s += "  exit \"$status\"\n";
  s += "fi\n";
  return s;
}

}  // namespace rmt
