#include "lib/run/config.h"

#include <algorithm>
#include <cstdint>
#include <cctype>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "lib/core/backend.h"
#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/core/model.h"  // kMaxThreads
#include "lib/core/model_kind.h"
#include "lib/files/io.h"
#include "lib/run/config_family.h"

namespace rmt {

namespace {

// One entry per config key. This table is the only place that knows the keys: parsing, --set,
// to_yaml, validate and config_keys all walk it, so adding a key is one line here.
struct KeyDescriptor {
  std::string path;     // dotted path, e.g. "model.n_layer"
  std::string allowed;  // what a valid value looks like, for error messages
  // Stores the YAML value into the config; false when it has the wrong type or is out of range.
  std::function<bool(Config&, const YAML::Node&)> parse;
  // Whether the value currently in the config is allowed (validate() for configs built in code).
  std::function<bool(const Config&)> in_range;
  // The value as YAML scalar text that parses back to exactly the same value.
  std::function<std::string(const Config&)> to_text;
  // Whether to_yaml writes the key (keys that do not apply to a run are left out, so that adding
  // one changes neither the resolved configs nor the run ids of the others). Null: always.
  std::function<bool(const Config&)> written;
};

// `key`, written by to_yaml only when `when` holds.
KeyDescriptor written_when(KeyDescriptor key, std::function<bool(const Config&)> when) {
  key.written = std::move(when);
  return key;
}

// A config field accessor usable on both Config& and const Config&.
#define FIELD(member) [](auto& c) -> auto& { return c.member; }

template <typename Access>
using FieldType = std::remove_reference_t<decltype(std::declval<Access>()(std::declval<Config&>()))>;

// The scalar text of a node, or nullopt when it is null, a mapping or a sequence.
std::optional<std::string> scalar_text(const YAML::Node& node) {
  if (!node.IsScalar()) return std::nullopt;
  return node.Scalar();
}

template <typename T>
bool parse_integer(const YAML::Node& node, T& out) {
  auto text = scalar_text(node);
  if (!text || text->empty()) return false;
  const char* begin = text->data();
  const char* end = begin + text->size();
  if (*begin == '+') ++begin;  // from_chars rejects '+', YAML allows it
  auto [ptr, ec] = std::from_chars(begin, end, out);
  return ec == std::errc() && ptr == end;
}

template <typename T>
bool at_least(T value, long long min) {
  if constexpr (std::is_signed_v<T>) return value >= min;
  else return min <= 0 || value >= static_cast<unsigned long long>(min);
}

// An integer key in min..max (max: the field type's largest value unless a key's meaning bounds
// it lower).
template <typename Access>
KeyDescriptor integer_key(std::string path, Access field, long long min,
                          FieldType<Access> max = std::numeric_limits<FieldType<Access>>::max()) {
  using T = FieldType<Access>;
  KeyDescriptor key;
  key.path = std::move(path);
  key.allowed = fmt::format("{} (at most {})", min == 0 ? "a non-negative integer" : fmt::format("an integer >= {}", min),
                            max);
  key.parse = [field, min, max](Config& c, const YAML::Node& node) {
    T value{};
    if (!parse_integer(node, value) || !at_least(value, min) || value > max) return false;
    field(c) = value;
    return true;
  };
  key.in_range = [field, min, max](const Config& c) { return at_least(field(c), min) && field(c) <= max; };
  key.to_text = [field](const Config& c) { return fmt::format("{}", field(c)); };
  return key;
}

// Bounds of a real-valued key; inclusive or not, or absent.
struct Bound {
  double value = 0;
  bool inclusive = true;
  bool present = false;
};
Bound at_or_above(double v) { return {v, true, true}; }
Bound above(double v) { return {v, false, true}; }
Bound below(double v) { return {v, false, true}; }
Bound at_or_below(double v) { return {v, true, true}; }
Bound no_bound() { return {}; }

bool within(double v, Bound lo, Bound hi) {
  if (!std::isfinite(v)) return false;
  if (lo.present && (lo.inclusive ? v < lo.value : v <= lo.value)) return false;
  if (hi.present && (hi.inclusive ? v > hi.value : v >= hi.value)) return false;
  return true;
}

std::string describe_range(Bound lo, Bound hi) {
  if (lo.present && hi.present)
    return fmt::format("a number in {}{}, {}{}", lo.inclusive ? '[' : '(', lo.value, hi.value,
                       hi.inclusive ? ']' : ')');
  if (lo.present) return fmt::format("a number {} {}", lo.inclusive ? ">=" : ">", lo.value);
  if (hi.present) return fmt::format("a number {} {}", hi.inclusive ? "<=" : "<", hi.value);
  return "a finite number";
}

// Shortest text that reads back as the same double, always with a '.' so YAML 1.1 readers
// (PyYAML) also see a float: 1e-06 -> 1.0e-06, 3 -> 3.0.
std::string double_text(double v) {
  std::string text = fmt::format("{}", v);
  if (text.find_first_of(".n") != std::string::npos) return text;  // has '.', or inf/nan
  size_t exponent = text.find('e');
  if (exponent == std::string::npos) return text + ".0";
  return text.insert(exponent, ".0");
}

template <typename Access>
KeyDescriptor real_key(std::string path, Access field, Bound lo, Bound hi) {
  KeyDescriptor key;
  key.path = std::move(path);
  key.allowed = describe_range(lo, hi);
  key.parse = [field, lo, hi](Config& c, const YAML::Node& node) {
    auto text = scalar_text(node);
    if (!text || text->empty()) return false;
    // from_chars: correctly rounded and locale-independent; it must consume the whole text.
    const char* begin = text->data();
    const char* end = begin + text->size();
    if (*begin == '+') ++begin;
    double value = 0;
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end || !within(value, lo, hi)) return false;
    field(c) = value;
    return true;
  };
  key.in_range = [field, lo, hi](const Config& c) { return within(field(c), lo, hi); };
  key.to_text = [field](const Config& c) { return double_text(field(c)); };
  return key;
}

template <typename Access>
KeyDescriptor bool_key(std::string path, Access field) {
  KeyDescriptor key;
  key.path = std::move(path);
  key.allowed = "true or false";
  key.parse = [field](Config& c, const YAML::Node& node) {
    auto text = scalar_text(node);
    if (!text) return false;
    if (*text == "true" || *text == "True" || *text == "TRUE") field(c) = true;
    else if (*text == "false" || *text == "False" || *text == "FALSE") field(c) = false;
    else return false;
    return true;
  };
  key.in_range = [](const Config&) { return true; };
  key.to_text = [field](const Config& c) { return std::string(field(c) ? "true" : "false"); };
  return key;
}

// Quotes a string unless it reads back unchanged as a plain YAML scalar.
std::string yaml_string(const std::string& s) {
  bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '/' || ch == '.' ||
           ch == '-';
  });
  if (plain && s[0] != '-' && s != "null" && s != "Null" && s != "NULL") return s;
  YAML::Emitter out;
  out << YAML::DoubleQuoted << s;
  return out.c_str();
}

// Whether s is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF):
// yaml-cpp's emitter decodes what it writes, so other bytes would not survive to_yaml.
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (n < 0 || i + size_t(n) >= s.size()) return false;  // a bad lead byte, or cut short
    uint32_t cp = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k <= n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + size_t(k)]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += size_t(n) + 1;
  }
  return true;
}

template <typename Access>
KeyDescriptor string_key(std::string path, Access field) {
  KeyDescriptor key;
  key.path = std::move(path);
  key.allowed = "a string (UTF-8)";
  key.parse = [field](Config& c, const YAML::Node& node) {
    auto text = scalar_text(node);
    if (!text || !valid_utf8(*text)) return false;
    field(c) = *text;
    return true;
  };
  key.in_range = [](const Config&) { return true; };
  key.to_text = [field](const Config& c) { return yaml_string(field(c)); };
  return key;
}

template <typename Access>
KeyDescriptor choice_key(std::string path, Access field, std::vector<std::string> choices) {
  KeyDescriptor key;
  key.path = std::move(path);
  key.allowed = "one of " + fmt::format("{}", fmt::join(choices, "|"));
  auto is_choice = [choices](const std::string& s) {
    return std::find(choices.begin(), choices.end(), s) != choices.end();
  };
  key.parse = [field, is_choice](Config& c, const YAML::Node& node) {
    auto text = scalar_text(node);
    if (!text || !is_choice(*text)) return false;
    field(c) = *text;
    return true;
  };
  key.in_range = [field, is_choice](const Config& c) { return is_choice(field(c)); };
  key.to_text = [field](const Config& c) { return field(c); };
  return key;
}

KeyDescriptor bptt_key() {
  KeyDescriptor key;
  key.path = "bptt";
  key.allowed = "'all' or a non-negative integer";
  key.parse = [](Config& c, const YAML::Node& node) {
    auto text = scalar_text(node);
    if (text && *text == "all") {
      c.bptt = -1;
      return true;
    }
    int segments = 0;
    if (!parse_integer(node, segments) || segments < 0) return false;
    c.bptt = segments;
    return true;
  };
  key.in_range = [](const Config& c) { return c.bptt >= -1; };
  key.to_text = [](const Config& c) { return bptt_to_string(c.bptt); };
  return key;
}

// A backend's name: checked against this build's backends only where one is used, so a config
// for another machine (cuda, from a CPU-only login node) can still be written and emitted.
KeyDescriptor device_key() {
  KeyDescriptor key;
  key.path = "device";
  key.allowed = fmt::format("a device name ({} in this build; cuda where rmt is built with CUDA)",
                            known_devices());
  auto is_name = [](const std::string& s) {
    return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char ch) {
      return std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) ||
             ch == '-' || ch == '_';
    });
  };
  key.parse = [is_name](Config& c, const YAML::Node& node) {
    auto text = scalar_text(node);
    if (!text || !is_name(*text)) return false;
    c.device = *text;
    return true;
  };
  key.in_range = [is_name](const Config& c) { return is_name(c.device); };
  key.to_text = [](const Config& c) { return c.device; };
  return key;
}

// segment_length: 0 is "not a language model" (the default, never written), but a value given
// must be >= 1: `--set segment_length=0` on a text dataset was accepted here and then told to
// set segment_length.
KeyDescriptor segment_length_key() {
  KeyDescriptor key = written_when(integer_key("segment_length", FIELD(segment_length), 1),
                                   [](const Config& c) { return config_family(c).has_key("segment_length"); });
  key.in_range = [](const Config& c) { return c.segment_length >= 0; };
  return key;
}

const std::vector<KeyDescriptor>& key_table() {
  static const std::vector<KeyDescriptor> table = {
      string_key("data", FIELD(data)),
      written_when(integer_key("segments", FIELD(segments), 1),
                   [](const Config& c) { return config_family(c).has_key("segments"); }),
      segment_length_key(),
      bptt_key(),
      bool_key("bptt_recompute", FIELD(bptt_recompute)),
      device_key(),
      choice_key("model.kind", FIELD(model.kind), model_kind_names()),
      integer_key("model.n_layer", FIELD(model.n_layer), 1),
      integer_key("model.n_head", FIELD(model.n_head), 1),
      integer_key("model.d_head", FIELD(model.d_head), 1),
      integer_key("model.d_model", FIELD(model.d_model), 1),
      integer_key("model.d_inner", FIELD(model.d_inner), 1),
      real_key("model.dropout", FIELD(model.dropout), at_or_above(0), below(1)),
      real_key("model.dropatt", FIELD(model.dropatt), at_or_above(0), below(1)),
      integer_key("model.mem_len", FIELD(model.mem_len), 0),
      integer_key("model.num_mem_tokens", FIELD(model.num_mem_tokens), 0),
      // armt only; written only for armt, so that the run ids of the other kinds do not change
      written_when(integer_key("model.d_mem", FIELD(model.d_mem), 1, 4096),
                   [](const Config& c) { return kind_has_assoc(c.model.kind); }),
      // deltanet and gated_deltanet only, written only for them (the other kinds' run ids stay)
      written_when(integer_key("model.expand_v", FIELD(model.expand_v), 0, 64),
                   [](const Config& c) { return kind_has_mixer_state(c.model.kind); }),
      written_when(integer_key("model.short_conv", FIELD(model.short_conv), 0, 64),
                   [](const Config& c) { return kind_has_mixer_state(c.model.kind); }),
      written_when(integer_key("model.delta_chunk", FIELD(model.delta_chunk), 0, 1024),
                   [](const Config& c) { return kind_has_mixer_state(c.model.kind); }),
      bool_key("model.read_mem_from_cache", FIELD(model.read_mem_from_cache)),
      choice_key("model.mem_init", FIELD(model.mem_init), {"original", "normal"}),
      integer_key("model.n_token", FIELD(model.n_token), 0),
      integer_key("train.batch_size", FIELD(train.batch_size), 1),
      real_key("train.lr", FIELD(train.lr), above(0), no_bound()),
      choice_key("train.schedule", FIELD(train.schedule), {"plateau", "cosine", "constant"}),
      integer_key("train.warmup_steps", FIELD(train.warmup_steps), 0),
      real_key("train.clip", FIELD(train.clip), at_or_above(0), no_bound()),  // 0 = no clipping
      integer_key("train.max_steps", FIELD(train.max_steps), 1),
      integer_key("train.eval_every", FIELD(train.eval_every), 1),
      integer_key("train.patience", FIELD(train.patience), 0),
      real_key("train.factor", FIELD(train.factor), above(0), below(1)),
      real_key("train.min_lr", FIELD(train.min_lr), at_or_above(0), no_bound()),
      integer_key("train.log_every", FIELD(train.log_every), 1),
      integer_key("train.eval_samples", FIELD(train.eval_samples), 0),
      integer_key("train.seed", FIELD(train.seed), 0),
      integer_key("train.threads", FIELD(train.threads), 0, kMaxThreads),
      // Each stage is walked by the memory estimate and listed in results.json: a bound keeps a
      // typo (2147483647) from hanging before training starts; no curriculum needs more stages
      // than it has segments to grow (the paper's largest, copy360, has 18).
      integer_key("train.curriculum", FIELD(train.curriculum), 1, kMaxCurriculumStages),
      // written only when used, so that the run ids of configs without them do not change
      written_when(choice_key("train.curriculum_advance", FIELD(train.curriculum_advance), {"fixed", "mastery"}),
                   [](const Config& c) { return c.train.curriculum_advance != "fixed"; }),
      written_when(bool_key("train.stop_unmastered", FIELD(train.stop_unmastered)),
                   [](const Config& c) { return c.train.stop_unmastered; }),
      written_when(real_key("train.target", FIELD(train.target), at_or_above(0), at_or_below(1)),
                   [](const Config& c) { return c.train.target > 0; }),
      written_when(integer_key("train.target_evals", FIELD(train.target_evals), 1),
                   [](const Config& c) { return c.train.target > 0; }),
      written_when(real_key("train.adam_beta2", FIELD(train.adam_beta2), above(0), below(1)),
                   [](const Config& c) { return c.train.adam_beta2 != TrainConfig().adam_beta2; }),
      written_when(real_key("train.weight_decay", FIELD(train.weight_decay), at_or_above(0), no_bound()),
                   [](const Config& c) { return c.train.weight_decay > 0; }),
  };
  return table;
}

#undef FIELD

std::string section_of(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

std::string leaf_of(const std::string& path) { return path.substr(path.rfind('.') + 1); }

bool is_section(const std::string& path) {
  for (const auto& key : key_table())
    if (section_of(key.path) == path) return true;
  return false;
}

std::string first_key_in(const std::string& section) {
  for (const auto& key : key_table())
    if (section_of(key.path) == section) return key.path;
  return section;
}

const KeyDescriptor* find_key(const std::string& path) {
  for (const auto& key : key_table())
    if (key.path == path) return &key;
  return nullptr;
}

// The valid key or section closest to `path` ("" when none is close). A key put in the wrong
// section is named by its last component (`n_layer` at the top level means `model.n_layer`,
// `train: {mem_len}` means `model.mem_len`), exactly or with a typo when the whole path is
// not close to anything.
std::string closest_key(const std::string& path) {
  // The names other training tools give these keys (PyTorch, Hugging Face, nanoGPT): too far
  // from ours for a typo's edit distance, but what a researcher coming from them writes.
  static const std::vector<std::pair<std::string, std::string>> other_tools_names = {
      {"learning_rate", "train.lr"},         {"lr_scheduler", "train.schedule"},
      {"scheduler", "train.schedule"},       {"max_iters", "train.max_steps"},
      {"num_steps", "train.max_steps"},      {"grad_clip", "train.clip"},
      {"max_grad_norm", "train.clip"},       {"num_layers", "model.n_layer"},
      {"n_layers", "model.n_layer"},         {"num_heads", "model.n_head"},
      {"n_heads", "model.n_head"},           {"d_ff", "model.d_inner"},
      {"dim_feedforward", "model.d_inner"},  {"mem_tokens", "model.num_mem_tokens"},
      {"vocab_size", "model.n_token"},       {"num_segments", "segments"}};
  for (const auto& [name, key] : other_tools_names)
    if (leaf_of(path) == name) return key;
  std::vector<std::string> candidates = config_keys();
  for (const auto& key : key_table()) {
    std::string section = section_of(key.path);
    if (!section.empty() && std::find(candidates.begin(), candidates.end(), section) == candidates.end())
      candidates.push_back(section);
  }
  std::vector<std::string> leaves;
  for (const auto& candidate : candidates) leaves.push_back(leaf_of(candidate));
  const auto by_leaf = [&](const std::string& leaf) {
    auto it = std::find(leaves.begin(), leaves.end(), leaf);
    return it == leaves.end() ? std::string() : candidates[size_t(it - leaves.begin())];
  };
  if (std::string moved = by_leaf(leaf_of(path)); !moved.empty()) return moved;
  if (std::string near = closest_match(path, candidates); !near.empty()) return near;
  return by_leaf(closest_match(leaf_of(path), leaves));
}

[[noreturn]] void fail_unknown_key(const std::string& origin, const std::string& path) {
  fail("{}: unknown key '{}'{}", origin, path, did_you_mean(closest_key(path)));
}

std::string describe_value(const YAML::Node& node) {
  if (node.IsMap()) return "(a mapping)";
  if (node.IsSequence()) return "(a list)";
  if (node.IsNull()) return "(empty)";
  return "'" + node.Scalar() + "'";
}

void set_key(Config& config, const std::string& path, const YAML::Node& value,
             const std::string& origin) {
  if (is_section(path))
    fail("{}: '{}' is a section, not a value; set one of its keys, e.g. '{}'", origin, path,
         first_key_in(path));
  const KeyDescriptor* key = find_key(path);
  if (!key) fail_unknown_key(origin, path);
  if (!key->parse(config, value))
    fail("{}: invalid value {} for '{}': expected {}", origin, describe_value(value), path,
         key->allowed);
}

// Applies one YAML mapping whose keys live under `prefix` ("" or "model.").
void apply_mapping(Config& config, const YAML::Node& mapping, const std::string& prefix,
                   const std::string& origin, std::set<std::string>& seen) {
  for (const auto& entry : mapping) {
    if (!entry.first.IsScalar())
      fail("{}: keys must be plain names, got {} under '{}'", origin, describe_value(entry.first),
           prefix.empty() ? "the top level" : prefix.substr(0, prefix.size() - 1));
    std::string path = prefix + entry.first.Scalar();
    if (!seen.insert(path).second) fail("{}: key '{}' is given twice", origin, path);
    const YAML::Node& value = entry.second;
    if (is_section(path)) {
      if (value.IsNull()) continue;  // "model:" with nothing under it keeps the defaults
      if (!value.IsMap())
        fail("{}: '{}' must be a mapping of keys such as '{}', got {}", origin, path,
             first_key_in(path), describe_value(value));
      apply_mapping(config, value, path + ".", origin, seen);
    } else {
      set_key(config, path, value, origin);
    }
  }
}

}  // namespace

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const auto& key : key_table()) keys.push_back(key.path);
  return keys;
}

std::string bptt_to_string(int bptt) { return bptt < 0 ? "all" : std::to_string(bptt); }

Config parse_config(const std::string& yaml_text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {  // ParserException, and yaml-cpp's recursion limit
    fail("{}: malformed YAML at line {}, column {}: {}", origin, e.mark.line + 1,
         e.mark.column + 1, e.msg);
  }
  Config config;
  if (root.IsNull()) return config;  // an empty file: all defaults
  if (!root.IsMap()) fail("{}: expected a mapping of config keys, got {}", origin, describe_value(root));
  std::set<std::string> seen;
  apply_mapping(config, root, "", origin, seen);
  return config;
}

Config load_config(const std::string& path) { return parse_config(read_file(path), path); }

void apply_override(Config& config, const std::string& assignment) {
  const std::string origin = "--set " + assignment;
  size_t equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0)
    fail("{}: expected key=value, e.g. model.kind=xl", origin);
  std::string path = assignment.substr(0, equals);
  path.erase(path.find_last_not_of(" \t") + 1);  // "model.kind = xl" is fine too
  path.erase(0, path.find_first_not_of(" \t"));
  if (path.empty()) fail("{}: expected key=value, e.g. model.kind=xl", origin);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(equals + 1));
  } catch (const YAML::Exception& e) {
    fail("{}: malformed value: {}", origin, e.msg);
  }
  set_key(config, path, value, origin);
}

// The curriculum and stopping keys (lib/run/curriculum.h); after the family's checks, which
// name the keys a language model must leave out.
static void validate_curriculum(const Config& config) {
  const TrainConfig& tc = config.train;
  if (tc.curriculum_advance == "mastery") {
    if (tc.curriculum < 2)
      fail("invalid config: train.curriculum_advance mastery needs train.curriculum >= 2 stages "
           "(got {}): it decides when a stage ends", tc.curriculum);
    if (tc.target <= 0)
      fail("invalid config: train.curriculum_advance mastery needs train.target, the validation "
           "accuracy that ends a stage, e.g. --set train.target=0.99");
  }
  if (tc.stop_unmastered && tc.curriculum_advance != "mastery")
    fail("invalid config: train.stop_unmastered needs train.curriculum_advance mastery: it ends a run "
         "whose stage ran out of steps before it was mastered");
  if (tc.target_evals != TrainConfig().target_evals && tc.target <= 0)
    fail("invalid config: train.target_evals {} without train.target: set the target accuracy "
         "it counts evaluations of, e.g. --set train.target=0.99", tc.target_evals);
}

void validate(const Config& config) {
  for (const auto& key : key_table())
    if (!key.in_range(config))
      fail("invalid config: {} = {}: expected {}", key.path, key.to_text(config), key.allowed);
  const ModelConfig& model = config.model;
  const ModelKindTraits& kind = traits_of(model.kind);  // a known kind: checked above
  if (kind.has_cache && model.mem_len <= 0)
    fail("invalid config: model.kind {} needs model.mem_len > 0 (got {})", kind.name, model.mem_len);
  if (kind.has_memory && model.num_mem_tokens <= 0)
    fail("invalid config: model.kind {} needs model.num_mem_tokens > 0 (got {})", kind.name,
         model.num_mem_tokens);
  if (model.dropatt > 0) fail("invalid config: model.dropatt > 0 is not supported yet (got {})", model.dropatt);
  validate_associative_memory_keys(config);  // armt: lib/run/config_kind_checks.cpp
  if (config.segments < 1) fail("invalid config: segments must be >= 1 (got {})", config.segments);
  config_family(config).validate(config);  // a language model's own rules (lib/run/config_family.cpp)
  validate_curriculum(config);
}

void resolve_kind(ModelConfig& model) {
  const std::optional<ModelKind> kind = find_model_kind(model.kind);
  if (!kind) return;  // an unknown kind is refused where the model is built
  if (!traits_of(*kind).has_memory) model.num_mem_tokens = 0;
  if (!traits_of(*kind).has_cache) model.mem_len = 0;
  if (!traits_of(*kind).has_assoc) model.d_mem = ModelConfig().d_mem;  // (not written: config.yaml unchanged)
  if (traits_of(*kind).has_mixer_state()) {
    model.expand_v = resolved_expand_v(model);  // the kind's default written out
  } else {
    model.expand_v = ModelConfig().expand_v, model.short_conv = ModelConfig().short_conv;
    model.delta_chunk = ModelConfig().delta_chunk;
  }
}

namespace {

// to_yaml of the keys `keep` admits.
std::string yaml_of(const Config& config, const std::function<bool(const KeyDescriptor&)>& keep) {
  std::string out;
  std::string current_section;
  for (const auto& key : key_table()) {
    if (!keep(key) || (key.written && !key.written(config))) continue;
    std::string section = section_of(key.path);
    if (section != current_section) {
      out += section + ":\n";
      current_section = section;
    }
    out += fmt::format("{}{}: {}\n", section.empty() ? "" : "  ", leaf_of(key.path),
                       key.to_text(config));
  }
  return out;
}

}  // namespace

std::string to_yaml(const Config& config) {
  return yaml_of(config, [](const KeyDescriptor&) { return true; });
}

std::string identity_yaml(const Config& config) {
  Config c = config;
  c.train.threads = 0;
  return yaml_of(c, [&](const KeyDescriptor& key) {
    return !(key.path == "device" && c.device == kDefaultDevice);
  });
}

std::string first_config_difference(const std::string& saved, const std::string& now) {
  Config a, b;
  try {
    a = parse_config(saved, "the saved config");
    b = parse_config(now, "this config");
  } catch (const Error&) {
    return "";
  }
  for (const KeyDescriptor& key : key_table()) {
    const std::string x = key.to_text(a), y = key.to_text(b);
    if (x != y)
      return fmt::format("{} is {} in the saved config but {} in this one", key.path,
                         x.empty() ? "''" : x, y.empty() ? "''" : y);
  }
  return "";
}

bool same_config_text(const std::string& a, const std::string& b) {
  if (a == b) return true;
  try {
    return to_yaml(parse_config(a, "a")) == to_yaml(parse_config(b, "b"));
  } catch (const Error&) {
    return false;
  }
}


}  // namespace rmt
