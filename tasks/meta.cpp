// Reading a dataset's meta: meta.yaml, strictly (or inferred from the authors' file names and
// .npy headers), the values its task implies, and the checks of meta.yaml against them.
#include <algorithm>
#include <cstring>
#include <chrono>
#include <cmath>
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/babilong.h"
#include "tasks/dataset_check.h"
#include "tasks/task_kind.h"
#include "tasks/text.h"

namespace rmt {

namespace fs = std::filesystem;

// ---- reading ------------------------------------------------------------------------------

// Shared with check.cpp and text.cpp (tasks/dataset_check.h) up to is_hex64.

const char* dtype_name(NpyDtype d) {
  switch (d) {
    case NpyDtype::int64: return "int64 (<i8)";
    case NpyDtype::int32: return "int32 (<i4)";
    case NpyDtype::uint8: return "uint8 (|u1)";
    case NpyDtype::float32: return "float32 (<f4)";
  }
  return "?";
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); i++) s += fmt::format("{}{}", i ? ", " : "", shape[i]);
  return s + "]";
}

// The header of an .npy file from its first bytes only (the data is never read here).
NpyHeader read_header_only(const std::string& path) {
  require_regular_file(path);  // a FIFO would block the open; say what the path is instead
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path);
  std::string head(1 << 17, '\0');  // a version 1.0 header is at most 65545 bytes
  in.read(head.data(), std::streamsize(head.size()));
  head.resize(size_t(in.gcount()));
  return parse_npy_header(head, path);
}

// What a YAML node is, for messages.
std::string yaml_what(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "nothing";
  if (n.IsScalar()) return fmt::format("'{}'", n.Scalar());
  return n.IsSequence() ? "a list" : "a map";
}

// The entries of map `node` (`where` names it in messages: "" for the top level, "options." ...):
// fails on a key not in `known`, a key given twice, or a key of `required` missing.
std::map<std::string, YAML::Node> meta_map(const YAML::Node& node, const std::string& path, const std::string& where,
                                           const std::vector<std::string>& known,
                                           const std::vector<std::string>& required) {
  if (!node.IsMap())
    fail("{}: {} must be a map, got {}", path, where.empty() ? "the file" : where.substr(0, where.size() - 1),
         yaml_what(node));
  std::map<std::string, YAML::Node> entries;
  for (auto it : node) {
    const std::string key = it.first.IsScalar() ? it.first.Scalar() : yaml_what(it.first);
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      fail("{}: unknown key '{}{}' (known: {})", path, where, key, list.empty() ? "none" : list);
    }
    if (!entries.emplace(key, it.second).second) fail("{}: key '{}{}' appears twice", path, where, key);
  }
  for (const std::string& k : required)
    if (!entries.count(k)) fail("{}: missing key '{}{}'", path, where, k);
  return entries;
}

int64_t meta_int(const YAML::Node& n, const std::string& path, const std::string& key, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
    fail("{}: '{}' must be an integer, got {}", path, key, yaml_what(n));
  if (v < lo || v > hi) fail("{}: '{}' is {}, expected {}..{}", path, key, v, lo, hi);
  return v;
}

std::string meta_string(const YAML::Node& n, const std::string& path, const std::string& key) {
  if (!n.IsScalar()) fail("{}: '{}' must be a string, got {}", path, key, yaml_what(n));
  return n.Scalar();
}

bool meta_bool(const YAML::Node& n, const std::string& path, const std::string& key) {
  bool b = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, b))
    fail("{}: '{}' must be true or false, got {}", path, key, yaml_what(n));
  return b;
}

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::vector<std::pair<std::string, std::string>> meta_sha256_map(const YAML::Node& sums, const std::string& path) {
  if (!sums.IsMap()) fail("{}: 'sha256' must be a map of file names to sums, got {}", path, yaml_what(sums));
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it : sums) {
    const std::string name = meta_string(it.first, path, "sha256 file name");
    const std::string hex = meta_string(it.second, path, "sha256." + name);
    if (!is_hex64(hex)) fail("{}: 'sha256.{}' must be 64 lowercase hex digits, got '{}'", path, name, hex);
    for (auto& [other, _] : out)
      if (other == name) fail("{}: key 'sha256.{}' appears twice", path, name);
    out.push_back({name, hex});
  }
  return out;
}

namespace {

bool is_plain_name(const std::string& s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s)
    if (c == '/' || c == '\\' || c == '\0') return false;
  return true;
}

DatasetMeta meta_from_yaml(const std::string& path) {
  YAML::Node y;
  try {
    y = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    fail("{}: not valid YAML: {}", path, e.what());
  }
  const std::vector<std::string> required = {"task", "kind", "file_prefix", "options", "vocab", "len_x", "len_y",
                                             "input_length", "answer_size", "stacked", "counts", "sha256"};
  std::vector<std::string> known = required;
  for (const char* k : {"rmt_version", "seed", "prng", "source"}) known.push_back(k);  // provenance only
  known.push_back("unscored_targets");  // imported's, only where y marks unscored positions
  auto e = meta_map(y, path, "", known, required);
  DatasetMeta m;
  m.from_meta_yaml = true;
  m.task = meta_string(e["task"], path, "task");
  // The kind first, since it decides which options are known: an edited kind is named as such,
  // never as an unknown option key of the kind it now claims.
  m.kind = meta_string(e["kind"], path, "kind");
  const TaskKindTraits* stated_kind = find_task_kind(m.kind);
  if (!stated_kind) {
    std::vector<std::string> kinds;
    for (const TaskKindTraits& k : task_kinds()) kinds.push_back(k.name);
    fail("{}: kind '{}' is not a task kind (kinds: {}){}", path, m.kind, fmt::join(kinds, ", "),
         did_you_mean(closest_match(m.kind, kinds)));
  }
  // A kind that meta.yaml defines (imported) names its task freely; the others name a preset.
  const bool own_task = stated_kind->defined_by_meta;
  if (own_task && !is_plain_name(m.task)) fail("{}: 'task' must be a plain name, got '{}'", path, m.task);
  std::string tasks_known;
  for (const std::string& n : task_names()) tasks_known += (tasks_known.empty() ? "" : ", ") + n;
  const std::vector<std::string> names = task_names();
  // An imported task's file (it records its source) whose kind was edited to a built-in one.
  if (!own_task && !is_task_name(m.task) && e.count("source"))
    fail("{}: kind '{}' does not match task {}, a task of your own (meta.yaml records its source): its kind is "
         "'imported'", path, m.kind, m.task);
  if (!own_task && std::find(names.begin(), names.end(), m.task) == names.end())
    fail("{}: unknown task '{}' (known: {}; a task of your own is kind imported: `rmt data import`)", path, m.task,
         tasks_known);
  const TaskOptions preset = own_task ? TaskOptions{m.task, stated_kind->name} : resolve_task(m.task);
  const bool base = m.task == preset.kind || own_task;  // copy, reverse, retrieval, sqeq: options are free
  m.file_prefix = meta_string(e["file_prefix"], path, "file_prefix");
  if (!is_plain_name(m.file_prefix))
    fail("{}: 'file_prefix' must be a plain file name part, got '{}'", path, m.file_prefix);

  // options: those of the task's kind (tasks/task_kind.h), all present unless the kind's may be
  // absent (sqeq's range in a meta.yaml written before it existed: the paper's).
  const TaskKindTraits& kind = task_kind(preset.kind);
  std::vector<std::string> option_keys;
  for (const TaskOptionInfo& info : task_option_info())
    if (has_option(kind, info.bit) && in_meta(info)) option_keys.push_back(info.key);
  std::vector<std::string> required_options = kind.options_required ? option_keys : std::vector<std::string>{};
  // Text noise names its file (the text itself is not needed to read or check the dataset).
  const bool text_noise = has_option(kind, kOptNoise) && e["options"].IsMap() && e["options"]["noise"].IsScalar() &&
                          e["options"]["noise"].Scalar() == "text";
  if (text_noise)
    for (const char* k : {"noise_text", "noise_text_sha256"}) option_keys.push_back(k), required_options.push_back(k);
  // kind: imported on a built-in task's file (the kind edited): its options are the task's kind's,
  // which is what to say rather than that they are unknown keys.
  if (own_task && is_task_name(m.task) && e["options"].IsMap())
    for (auto it : e["options"])
      if (it.first.IsScalar() && std::find(option_keys.begin(), option_keys.end(), it.first.Scalar()) == option_keys.end()) {
        const std::string task_kind_name = resolve_task(m.task).kind;
        fail("{}: kind '{}' does not match task {}, whose kind is '{}': options.{} is an option of kind {}, not of {}",
             path, m.kind, m.task, task_kind_name, it.first.Scalar(), task_kind_name, m.kind);
      }
  auto o = meta_map(e["options"], path, "options.", option_keys, required_options);
  m.length = preset.length;
  m.symbols = preset.symbols;
  m.pairs = preset.pairs;
  // A base task's options define it and must be in range; a preset's are compared by the checker.
  for (const TaskOptionInfo& info : task_option_info()) {
    if (!has_option(kind, info.bit) || !in_meta(info)) continue;
    const std::string key = std::string("options.") + info.key;
    const bool in_range = base && !(info.traits & kKindChecksMeta);  // else the kind checks it, saying why
    if (info.meta_text) {
      if (o.count(info.key)) m.*info.meta_text = meta_string(o[info.key], path, key);
    } else if (o.count(info.key)) {
      m.*info.meta_value = int(meta_int(o[info.key], path, key, in_range ? info.lo : INT32_MIN, in_range ? info.hi : INT32_MAX));
    } else if (info.fallback) {
      m.*info.meta_value = *info.fallback;
    }
  }
  if (text_noise) {
    m.noise_text = meta_string(o["noise_text"], path, "options.noise_text");
    m.noise_text_sha256 = meta_string(o["noise_text_sha256"], path, "options.noise_text_sha256");
    if (!is_hex64(m.noise_text_sha256))
      fail("{}: 'options.noise_text_sha256' must be 64 lowercase hex digits, got '{}'", path, m.noise_text_sha256);
  }

  // vocab: ids 0..n-1, each once, to symbols.
  const YAML::Node& vocab = e["vocab"];
  if (!vocab.IsMap() || vocab.size() == 0)
    fail("{}: 'vocab' must be a map of ids 0, 1, ... to symbols, got {}", path, yaml_what(vocab));
  m.vocab.assign(vocab.size(), "");
  std::vector<bool> seen(vocab.size(), false);
  for (auto it : vocab) {
    int64_t id = -1;
    if (!it.first.IsScalar() || !YAML::convert<int64_t>::decode(it.first, id) || id < 0 ||
        id >= int64_t(vocab.size()) || seen[size_t(id)])
      fail("{}: 'vocab' must map each id 0..{} once, found key {}", path, vocab.size() - 1, yaml_what(it.first));
    seen[size_t(id)] = true;
    m.vocab[size_t(id)] = meta_string(it.second, path, fmt::format("vocab.{}", id));
  }
  m.len_x = int(meta_int(e["len_x"], path, "len_x", INT32_MIN, INT32_MAX));
  m.len_y = int(meta_int(e["len_y"], path, "len_y", INT32_MIN, INT32_MAX));
  m.input_length = int(meta_int(e["input_length"], path, "input_length", INT32_MIN, INT32_MAX));
  m.answer_size = int(meta_int(e["answer_size"], path, "answer_size", INT32_MIN, INT32_MAX));
  m.stacked = meta_bool(e["stacked"], path, "stacked");
  if (e.count("unscored_targets")) {
    if (!stated_kind->has_unscored_targets)
      fail("{}: 'unscored_targets' is a key of imported datasets (rmt data import); kind {} implies whether y "
           "holds unscored positions", path, m.kind);
    m.unscored_targets = meta_bool(e["unscored_targets"], path, "unscored_targets");
  }
  if (e.count("seed")) {
    uint64_t seed = 0;
    if (!e["seed"].IsScalar() || !YAML::convert<uint64_t>::decode(e["seed"], seed))
      fail("{}: 'seed' must be an integer in 0..2^64-1, got {}", path, yaml_what(e["seed"]));
    m.seed = seed;
  }
  if (e.count("rmt_version")) meta_string(e["rmt_version"], path, "rmt_version");
  if (e.count("prng")) meta_string(e["prng"], path, "prng");
  auto c = meta_map(e["counts"], path, "counts.", {"train", "val", "test"}, {"train", "val", "test"});
  for (int k = 0; k < 3; k++)
    m.counts[k] = meta_int(c[kSplits[k]], path, std::string("counts.") + kSplits[k], 0, INT64_MAX);
  m.sha256 = meta_sha256_map(e["sha256"], path);
  if (e.count("source")) {  // imported: where the arrays came from (not needed to read the dataset)
    auto src = meta_map(e["source"], path, "source.", {"dir", "sha256"}, {"dir", "sha256"});
    meta_string(src["dir"], path, "source.dir");
    meta_sha256_map(src["sha256"], path);
  }
  // The options' joint constraints, once every value they may involve is read (imported: all of them).
  if (kind.check_meta_options) {
    try {
      kind.check_meta_options(task_of_meta(m));
    } catch (const Error& err) {
      fail("{}: {}", path, err.what());
    }
  }
  return m;
}

// The authors' directories hold only {task}_{split}_{X|y}.npy: the prefix names the task
// (copy, copy120, reverse120, retrieval, sqeq_cd ...) and, where the task leaves it open, the
// X header gives the length (copy/reverse) or the number of pairs (retrieval).
DatasetMeta meta_from_file_names(const std::string& dir) {
  std::set<std::string> prefixes;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    for (const char* split : kSplits) {
      const std::string tail = fmt::format("_{}_X.npy", split);
      if (f.size() > tail.size() && f.compare(f.size() - tail.size(), tail.size(), tail) == 0)
        prefixes.insert(f.substr(0, f.size() - tail.size()));
    }
  }
  if (ec) fail("cannot read dataset directory {}: {}", dir, ec.message());
  if (prefixes.empty()) fail("{}: no meta.yaml and no {{task}}_{{split}}_X.npy files", dir);
  if (prefixes.size() > 1)
    fail("{}: no meta.yaml and files of several tasks ('{}', '{}'...)", dir, *prefixes.begin(), *std::next(prefixes.begin()));
  DatasetMeta m;
  m.file_prefix = m.task = *prefixes.begin();
  const std::string& p = m.file_prefix;
  auto starts = [&](const char* s) { return p.rfind(s, 0) == 0; };
  std::string expected;
  for (const TaskKindTraits& k : task_kinds()) {
    if (!starts(k.name)) continue;
    if (!k.authors_layout)
      fail("{}: no meta.yaml, but the files are of the task {}, whose options and vocabulary only meta.yaml "
           "records", dir, k.name);
    if (m.kind.empty()) m.kind = k.name;
  }
  for (const TaskKindTraits& k : task_kinds())
    if (k.authors_layout) expected += fmt::format("{}{}*", expected.empty() ? "" : ", ", k.name);
  if (m.kind.empty())
    fail("{}: cannot infer the task from file prefix '{}' (expected {}); a task of your own: "
         "`rmt data import {} --out NEW_DIR` writes it in rmt's layout", dir, p, expected, dir);
  const TaskKindTraits& kind = task_kind(m.kind);
  if (is_task_name(p) && p != m.kind) {
    // copy120 ...: the preset fixes everything (docs/paper.md §1).
    const TaskOptions t = resolve_task(p);
    m.length = t.length;
    m.symbols = t.symbols;
  } else if (kind.options_from_columns) {
    std::string x_path;
    for (const char* split : kSplits)
      if (fs::exists(dataset_file(dir, p, split, "X"))) {
        x_path = dataset_file(dir, p, split, "X");
        break;
      }
    const NpyHeader hx = read_header_only(x_path);
    if (hx.shape.size() != 2)
      fail("{}: shape is {}, expected [N, columns] (2-D); the task's size is read from it", x_path, shape_text(hx.shape));
    kind.options_from_columns(m, hx.shape[1], x_path);
  }
  for (const TaskOptionInfo& info : task_option_info())  // the paper's values of what it leaves open
    if (has_option(kind, info.bit) && info.fallback) m.*info.meta_value = *info.fallback;
  m.from_meta_yaml = false;
  DatasetMeta implied = implied_meta(m);
  implied.from_meta_yaml = false;
  return implied;
}

}  // namespace

TaskOptions task_of_meta(const DatasetMeta& meta) {
  const TaskKindTraits* stated_kind = find_task_kind(meta.kind);
  TaskOptions t;
  if (stated_kind && stated_kind->defined_by_meta) {  // imported: everything is meta's own
    t = TaskOptions{meta.task, meta.kind};
  } else if (!is_task_name(meta.task)) {  // the authors' sqeq_cd ...
    TaskOptions authors{meta.task, meta.kind};
    for (const TaskOptionInfo& info : task_option_info())
      if (info.value && info.meta_value) authors.*info.value = meta.*info.meta_value;
    return authors;
  } else {
    t = resolve_task(meta.task);     // the kind is the task's, whatever meta.yaml says
    if (t.name != t.kind) return t;  // a preset (copy120 ...): its own values
  }
  const TaskKindTraits& kind = task_kind(t.kind);
  for (const TaskOptionInfo& info : task_option_info()) {
    if (!has_option(kind, info.bit) || !in_meta(info)) continue;
    if (info.text) t.*info.text = meta.*info.meta_text;
    else t.*info.value = meta.*info.meta_value;
  }
  if (kind.finish_from_meta) kind.finish_from_meta(t, meta);
  return t;
}

DatasetMeta implied_meta(const DatasetMeta& raw) {
  const TaskOptions t = task_of_meta(raw);
  DatasetMeta m = raw;
  m.kind = t.kind;
  for (const TaskOptionInfo& info : task_option_info()) {
    if (info.value && info.meta_value) m.*info.meta_value = t.*info.value;
    if (info.text && info.meta_text) m.*info.meta_text = t.*info.text;
  }
  m.noise_text = t.noise_text;  // beside noise where it is text (not an option of its own)
  m.noise_text_sha256 = t.noise_text_sha256;
  m.vocab = task_vocab(t);
  m.len_x = task_len_x(t);
  m.len_y = task_len_y(t);
  m.stacked = task_stacked(t);
  m.unscored_targets = task_unscored_targets(t);
  m.input_length = m.stacked ? m.len_x + m.len_y - 1 : m.len_x;
  m.answer_size = task_answer_size(t);
  return m;
}

void check_meta_values(const std::string& dir, const DatasetMeta& raw, const DatasetMeta& implied, Violations& v) {
  if (!raw.from_meta_yaml) return;
  const std::string path = (fs::path(dir) / "meta.yaml").string();
  auto differs = [&](const std::string& key, const std::string& got, const std::string& want) {
    if (got != want) v.add(fmt::format("{}: {} is {}, but task {} implies {}", path, key, got, raw.task, want));
  };
  auto num = [](int64_t x) { return fmt::format("{}", x); };
  auto str = [](const std::string& s) { return fmt::format("'{}'", s); };
  differs("kind", str(raw.kind), str(implied.kind));
  differs("file_prefix", str(raw.file_prefix), str(raw.task));
  // A preset fixes its options (a base task's are what meta.yaml says, so they agree).
  if (const TaskKindTraits* kind = find_task_kind(implied.kind))
    for (const TaskOptionInfo& info : task_option_info())
      if (has_option(*kind, info.bit) && info.value)
        differs(std::string("options.") + info.key, num(raw.*info.meta_value), num(implied.*info.meta_value));
  if (implied.noise == "text" && raw.vocab.size() == implied.vocab.size()) {
    const std::vector<std::string> noise(raw.vocab.begin() + kBabiFirstNoise, raw.vocab.end());
    const std::string problem = babilong_noise_vocab_problem(noise);
    if (!problem.empty()) v.add(fmt::format("{}: {}", path, problem));
  }
  if (raw.vocab.size() != implied.vocab.size()) {
    differs("the vocab size", num(int64_t(raw.vocab.size())), num(int64_t(implied.vocab.size())));
  } else {
    for (size_t i = 0; i < raw.vocab.size(); i++)
      if (raw.vocab[i] != implied.vocab[i]) {
        differs(fmt::format("vocab.{}", i), str(raw.vocab[i]), str(implied.vocab[i]));
        break;  // one is enough to say the vocabularies disagree
      }
  }
  differs("len_x", num(raw.len_x), num(implied.len_x));
  differs("len_y", num(raw.len_y), num(implied.len_y));
  differs("input_length", num(raw.input_length), num(implied.input_length));
  differs("answer_size", num(raw.answer_size), num(implied.answer_size));
  differs("stacked", raw.stacked ? "true" : "false", implied.stacked ? "true" : "false");
  // sha256: one entry for each of the six files, no other.
  std::vector<std::string> files;
  for (const char* split : kSplits)
    for (const char* which : {"X", "y"}) files.push_back(fs::path(dataset_file(dir, raw.file_prefix, split, which)).filename().string());
  for (const std::string& f : files) {
    bool found = false;
    for (auto& [name, _] : raw.sha256) found = found || name == f;
    if (!found) v.add(fmt::format("{}: sha256 has no entry for {}", path, f));
  }
  for (auto& [name, _] : raw.sha256)
    if (std::find(files.begin(), files.end(), name) == files.end())
      v.add(fmt::format("{}: sha256 names '{}', which is not a file of this dataset", path, name));
}

// The header of one [N, cols] int64 array; returns N or -1 after adding a violation.

void fail_no_dataset_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir, ec))
    fail("dataset directory {} is a file, not a directory; give the directory rmt generate wrote "
         "(it holds meta.yaml and the split files)", dir);
  fail("dataset directory {} does not exist", dir);
}

DatasetMeta read_dataset_meta(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail_no_dataset_dir(dir);
  const fs::path path = fs::path(dir) / "meta.yaml";
  if (fs::exists(path, ec)) {
    require_regular_file(path);
    return meta_from_yaml(path.string());
  }
  return meta_from_file_names(dir);
}

DatasetMeta load_dataset_meta(const std::string& dir) {
  const CheckResult r = check_task_dataset(dir);
  if (!r.ok) fail("{}", invalid_dataset_message(dir, r.violations));
  return implied_meta(read_dataset_meta(dir));
}

std::string invalid_dataset_message(const std::string& dir, const std::vector<std::string>& violations) {
  std::string text = fmt::format("{} is not a valid dataset:", dir);
  for (const std::string& v : violations) text += "\n  " + v;
  return text;
}


}  // namespace rmt
