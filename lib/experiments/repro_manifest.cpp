// The reproduction manifest (experiments/reproduce/reproduce.yaml): read strictly, every error
// naming the file, the item and the key. Each kind's part is read by its own function (item_reader).
#include "lib/experiments/repro_manifest.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/experiments/attention_readings.h"
#include "lib/experiments/repro_readings.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

struct ManifestReader {
  std::string path;

  [[noreturn]] void bad(const std::string& where, const std::string& what) const {
    fail("{}: {}: {}", path, where, what);
  }
  void only_keys(const YAML::Node& node, const std::string& where, const std::vector<std::string>& keys) const {
    if (!node.IsMap()) bad(where, "expected a map");
    for (const auto& kv : node) {
      const std::string key = kv.first.as<std::string>();
      if (std::find(keys.begin(), keys.end(), key) == keys.end())
        bad(where, fmt::format("unknown key '{}' (keys: {})", key, fmt::join(keys, ", ")));
    }
  }
  std::string text(const YAML::Node& node, const std::string& where) const {
    if (!node || !node.IsScalar()) bad(where, "expected a text");
    return node.as<std::string>();
  }
  double number(const YAML::Node& node, const std::string& where) const {
    double v = 0;
    try {
      if (!node || !node.IsScalar()) throw YAML::Exception(YAML::Mark(), "");
      v = node.as<double>();
    } catch (const YAML::Exception&) {
      bad(where, "expected a number");
    }
    if (!std::isfinite(v)) bad(where, fmt::format("expected a finite number (got {})", node.Scalar()));
    return v;
  }
  int integer(const YAML::Node& node, const std::string& where, int lo, int hi) const {
    int v = 0;
    try {
      if (!node || !node.IsScalar()) throw YAML::Exception(YAML::Mark(), "");
      v = node.as<int>();
    } catch (const YAML::Exception&) {
      bad(where, "expected an integer");
    }
    if (v < lo || v > hi) bad(where, fmt::format("must be in {}..{} (got {})", lo, hi, v));
    return v;
  }
  std::vector<int> integers(const YAML::Node& node, const std::string& where, int lo, int hi) const {
    if (!node || !node.IsSequence() || node.size() == 0) bad(where, "expected a non-empty list of integers");
    std::vector<int> out;
    for (size_t i = 0; i < node.size(); ++i) out.push_back(integer(node[i], fmt::format("{}[{}]", where, i), lo, hi));
    return out;
  }
  std::string kind(const YAML::Node& node, const std::string& where) const {
    std::string k = text(node, where);
    if (!find_model_kind(k)) bad(where, fmt::format("unknown model kind '{}' (kinds: {})", k, model_kind_list()));
    return k;
  }
  std::string file(const YAML::Node& node, const std::string& where) const {
    fs::path p = text(node, where);
    if (p.is_relative()) p = (fs::path(path).parent_path() / p).lexically_normal();
    if (const std::string problem = not_a_regular_file(p); !problem.empty())
      bad(where, fs::exists(fs::symlink_status(p)) ? fmt::format("{}: {}", p.string(), problem)
                                                   : fmt::format("{} is not a file", p.string()));
    return p.string();
  }
};

Claim read_claim(const ManifestReader& r, const YAML::Node& node, const std::string& where) {
  r.only_keys(node, where, {"text", "model", "segments", "paper", "min", "max", "above", "metric"});
  Claim c;
  c.text = r.text(node["text"], where + ".text");
  c.model = r.kind(node["model"], where + ".model");
  c.segments = r.integers(node["segments"], where + ".segments", 1, 100000);
  if (node["min"]) c.min = r.number(node["min"], where + ".min");
  if (node["max"]) c.max = r.number(node["max"], where + ".max");
  if (node["above"]) c.above = r.kind(node["above"], where + ".above");
  if (node["metric"]) c.metric = r.text(node["metric"], where + ".metric");
  if (const YAML::Node paper = node["paper"]) {
    if (paper.IsSequence()) {
      for (size_t i = 0; i < paper.size(); ++i) c.paper.push_back(r.number(paper[i], fmt::format("{}.paper[{}]", where, i)));
      if (c.paper.size() != c.segments.size())
        r.bad(where + ".paper", fmt::format("{} values for {} segment counts (give one per segment count, or one)",
                                            c.paper.size(), c.segments.size()));
    } else {
      c.paper.assign(c.segments.size(), r.number(paper, where + ".paper"));
    }
    if (c.min || c.max || !c.above.empty())
      r.bad(where, "a claim with the paper's value is checked within the tolerance: leave out min, max and above");
  }
  if (!c.min && !c.max && c.above.empty() && c.paper.empty()) r.bad(where, "a claim needs paper, min, max or above");
  if (c.min && c.max && *c.min > *c.max)
    r.bad(where, fmt::format("min {} is above max {}: no value can hold", *c.min, *c.max));
  return c;
}

RunPick read_pick(const ManifestReader& r, const YAML::Node& node, const std::string& where) {
  r.only_keys(node, where, {"model", "segments", "seed", "sample", "segment"});
  RunPick p;
  p.model = r.kind(node["model"], where + ".model");
  p.segments = r.integer(node["segments"], where + ".segments", 1, 100000);
  if (node["seed"]) p.seed = r.integer(node["seed"], where + ".seed", 0, 1 << 30), p.seed_given = true;
  if (node["sample"]) p.sample = r.integer(node["sample"], where + ".sample", 0, 1 << 30);
  if (node["segment"]) p.segment = r.integer(node["segment"], where + ".segment", 0, 100000);
  return p;
}

LmSelector read_selector(const ManifestReader& r, const YAML::Node& node, const std::string& where) {
  if (!node || !node.IsMap()) r.bad(where, "expected a map {model, cache, memory, bptt} naming runs");
  r.only_keys(node, where, {"model", "cache", "memory", "bptt"});
  LmSelector sel;
  sel.model = r.kind(node["model"], where + ".model");
  if (node["cache"]) sel.cache = r.integer(node["cache"], where + ".cache", 0, 1 << 20);
  if (node["memory"]) sel.memory = r.integer(node["memory"], where + ".memory", 0, 1 << 20);
  if (node["bptt"]) sel.bptt = r.integer(node["bptt"], where + ".bptt", 0, 1 << 20);
  return sel;
}

LmClaim read_lm_claim(const ManifestReader& r, const YAML::Node& node, const std::string& where) {
  r.only_keys(node, where, {"text", "run", "below", "margin"});
  LmClaim c;
  c.text = r.text(node["text"], where + ".text");
  c.run = read_selector(r, node["run"], where + ".run");
  c.below = read_selector(r, node["below"], where + ".below");
  if (node["margin"]) c.margin = r.number(node["margin"], where + ".margin");
  return c;
}

// A claim's bound that no measured value can fail says nothing: an accuracy lies in [0, 1], so
// `min:` at or below 0 and `max:` at or above 1 hold on every run (a claim with both, min at 0,
// is refused too: its min is the one that cannot fail).
void check_bound_can_fail(const ManifestReader& r, const Claim& c, const std::string& where) {
  static const std::vector<std::string> accuracies = {"acc_teacher_forced", "acc_free_running", "exact_match",
                                                       "solve_rate", "solve_rate_teacher_forced"};
  if (std::find(accuracies.begin(), accuracies.end(), c.metric) == accuracies.end()) return;
  if (c.min && *c.min <= 0)
    r.bad(where + ".min", fmt::format("claim '{}': min {} on {} can never fail (an accuracy is at least 0)", c.text,
                                      *c.min, c.metric));
  if (c.max && *c.max >= 1)
    r.bad(where + ".max", fmt::format("claim '{}': max {} on {} can never fail (an accuracy is at most 1)", c.text,
                                      *c.max, c.metric));
}

std::vector<Claim> read_claims(const ManifestReader& r, const YAML::Node& node, const std::string& where) {
  std::vector<Claim> claims;
  if (!node) return claims;
  if (!node.IsSequence()) r.bad(where, "expected a list");
  for (size_t i = 0; i < node.size(); ++i) claims.push_back(read_claim(r, node[i], fmt::format("{}[{}]", where, i)));
  return claims;
}

// The sweep item an attention or length item reads its runs from.
std::string read_from(const ManifestReader& r, const YAML::Node& n, const std::string& w, const ReproManifest& m) {
  const std::string from = r.text(n["from"], w + ".from");
  const ReproItem* item = m.find(from);
  if (!item || !std::holds_alternative<SweepItem>(item->part))
    r.bad(w + ".from", fmt::format("'{}' is not a sweep item given before this one", from));
  return from;
}

std::vector<RunPick> read_picks(const ManifestReader& r, const YAML::Node& node, const std::string& where,
                                const std::string& expected) {
  if (!node || !node.IsSequence() || node.size() == 0) r.bad(where, expected);
  std::vector<RunPick> picks;
  for (size_t i = 0; i < node.size(); ++i) picks.push_back(read_pick(r, node[i], fmt::format("{}[{}]", where, i)));
  return picks;
}

void read_sweep_item(const ManifestReader& r, const YAML::Node& n, const std::string& w, const ReproManifest&,
                     ReproItem& it) {
  SweepItem s;
  it.sweep = r.file(n["sweep"], w + ".sweep");
  if (n["paper_section"]) s.paper_section = r.text(n["paper_section"], w + ".paper_section");
  if (!n["metrics"] || !n["metrics"].IsSequence() || n["metrics"].size() == 0)
    r.bad(w + ".metrics", "expected a non-empty list (acc_teacher_forced, acc_free_running, exact_match, solve_rate, "
                           "solve_rate_teacher_forced, loss)");
  for (size_t i = 0; i < n["metrics"].size(); ++i) {
    std::string metric = r.text(n["metrics"][i], fmt::format("{}.metrics[{}]", w, i));
    static const std::vector<std::string> ok = {"acc_teacher_forced", "acc_free_running", "exact_match",
                                                 "solve_rate", "solve_rate_teacher_forced", "loss"};
    if (std::find(ok.begin(), ok.end(), metric) == ok.end())
      r.bad(w + ".metrics", fmt::format("unknown metric '{}' (metrics: {})", metric, fmt::join(ok, ", ")));
    s.metrics.push_back(metric);
  }
  s.claims = read_claims(r, n["claims"], w + ".claims");
  for (size_t i = 0; i < s.claims.size(); ++i) {
    Claim& claim = s.claims[i];
    if (claim.metric.empty()) claim.metric = s.metrics.front();
    if (std::find(s.metrics.begin(), s.metrics.end(), claim.metric) == s.metrics.end())
      r.bad(w + ".claims", fmt::format("claim '{}' uses metric {}, which is not in the item's metrics", claim.text,
                                       claim.metric));
    check_bound_can_fail(r, claim, fmt::format("{}.claims[{}]", w, i));
  }
  it.part = std::move(s);
}

void read_lm_item(const ManifestReader& r, const YAML::Node& n, const std::string& w, const ReproManifest&,
                  ReproItem& it) {
  LmItem lm;
  it.sweep = r.file(n["sweep"], w + ".sweep");
  if (n["claims"]) {
    if (!n["claims"].IsSequence()) r.bad(w + ".claims", "expected a list");
    for (size_t i = 0; i < n["claims"].size(); ++i)
      lm.claims.push_back(read_lm_claim(r, n["claims"][i], fmt::format("{}.claims[{}]", w, i)));
  }
  it.part = std::move(lm);
}

void read_attention_item(const ManifestReader& r, const YAML::Node& n, const std::string& w,
                         const ReproManifest& m, ReproItem& it) {
  AttentionItem a;
  it.from = read_from(r, n, w, m);
  a.runs = read_picks(r, n["runs"], w + ".runs", "expected a non-empty list");
  for (size_t i = 0; i < a.runs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (a.runs[i].model == a.runs[j].model && a.runs[i].segments == a.runs[j].segments)
        r.bad(fmt::format("{}.runs[{}]", w, i), fmt::format("{} at {} segments is also runs[{}]: a cell is measured "
                                                            "over every seed once", a.runs[i].model, a.runs[i].segments, j));
  if (n["samples"]) a.samples = r.integer(n["samples"], w + ".samples", 1, 1000000);
  if (n["measures"]) {
    if (!n["measures"].IsSequence() || n["measures"].size() == 0)
      r.bad(w + ".measures", fmt::format("expected a non-empty list ({})", fmt::join(attention_measure_names(), ", ")));
    for (size_t i = 0; i < n["measures"].size(); ++i) {
      const std::string measure = r.text(n["measures"][i], fmt::format("{}.measures[{}]", w, i));
      if (!is_attention_measure(measure))
        r.bad(w + ".measures", fmt::format("unknown measure '{}' (measures: {})", measure,
                                           fmt::join(attention_measure_names(), ", ")));
      a.measures.push_back(measure);
    }
  } else {
    a.measures = attention_measure_names();
  }
  a.claims = read_claims(r, n["claims"], w + ".claims");
  for (size_t i = 0; i < a.claims.size(); ++i) {
    Claim& c = a.claims[i];
    const std::string where = fmt::format("{}.claims[{}]", w, i);
    if (c.metric.empty()) c.metric = a.measures.front();
    if (std::find(a.measures.begin(), a.measures.end(), c.metric) == a.measures.end())
      r.bad(where, fmt::format("claim '{}' is on {}, which is not in the item's measures", c.text, c.metric));
    if (!c.paper.empty())
      r.bad(where, "the paper gives no numbers for its attention maps: an attention claim is the project's own bound "
                   "(min, max or above)");
  }
  it.part = std::move(a);
}

void read_length_item(const ManifestReader& r, const YAML::Node& n, const std::string& w, const ReproManifest& m,
                      ReproItem& it) {
  LengthItem l;
  it.from = read_from(r, n, w, m);
  l.all_runs = n["runs"] && n["runs"].IsScalar() && n["runs"].Scalar() == "all";
  if (!l.all_runs) l.runs = read_picks(r, n["runs"], w + ".runs", "expected a non-empty list, or all (every run of the sweep)");
  l.lengths = r.integers(n["lengths"], w + ".lengths", 1, 100000);
  l.claims = read_claims(r, n["claims"], w + ".claims");
  for (size_t i = 0; i < l.claims.size(); ++i) {
    if (l.claims[i].metric.empty()) l.claims[i].metric = "acc_teacher_forced";
    if (l.claims[i].metric != "acc_teacher_forced")
      r.bad(fmt::format("{}.claims[{}]", w, i), "a length item's claims are on acc_teacher_forced");
    check_bound_can_fail(r, l.claims[i], fmt::format("{}.claims[{}]", w, i));
  }
  it.part = std::move(l);
}

void read_bench_item(const ManifestReader& r, const YAML::Node& n, const std::string& w, const ReproManifest&,
                     ReproItem& it) {
  BenchItem b;
  b.bench = r.text(n["bench"], w + ".bench");
  if (b.bench != "diagonal") r.bad(w + ".bench", fmt::format("unknown benchmark '{}' (benchmarks: diagonal)", b.bench));
  b.threads = r.integers(n["threads"], w + ".threads", 1, 1024);
  if (n["layers"]) b.layers = r.integer(n["layers"], w + ".layers", 1, 64);
  if (n["segments"]) b.segments = r.integer(n["segments"], w + ".segments", 1, 1 << 20);
  if (n["batch"]) b.batch = r.integer(n["batch"], w + ".batch", 1, 4096);
  if (n["reps"]) b.reps = r.integer(n["reps"], w + ".reps", 1, 1000);
  if (n["min_speedup"]) b.min_speedup = r.number(n["min_speedup"], w + ".min_speedup");
  // A speed-up (a ratio of two rates) is above 0: a bound at or below 0 can never fail.
  if (b.min_speedup <= 0)
    r.bad(w + ".min_speedup", fmt::format("{} can never fail (a speed-up is above 0)", b.min_speedup));
  if (!it.beyond_the_paper) r.bad(w, "a bench item measures rmt, not the paper: it needs beyond_the_paper: true");
  it.part = std::move(b);
}

// Each kind: the keys of its part, and how it is read.
struct ItemReader {
  std::string kind;
  std::vector<std::string> keys;
  void (*read)(const ManifestReader&, const YAML::Node&, const std::string&, const ReproManifest&, ReproItem&);
};

const ItemReader* item_reader(const std::string& kind) {
  static const std::vector<ItemReader> readers = {
      {"sweep", {"sweep", "paper_section", "metrics", "claims"}, read_sweep_item},
      {"attention", {"from", "runs", "samples", "measures", "claims"}, read_attention_item},
      {"length", {"from", "runs", "lengths", "claims"}, read_length_item},
      {"lm", {"sweep", "claims"}, read_lm_item},
      {"bench", {"bench", "threads", "layers", "segments", "batch", "reps", "min_speedup"}, read_bench_item},
  };
  for (const ItemReader& reader : readers)
    if (reader.kind == kind) return &reader;
  return nullptr;
}

// A reading that cites a value of the paper ("the paper's 0.28") cites one the item gives: one of its
// claims' paper values or a number in its paper_says. A typed paper value cannot drift then.
void check_paper_citations(const ManifestReader& r, const ReproItem& it, const std::vector<Claim>& claims) {
  const std::string cite = "the paper's ";
  for (size_t pos = it.notes.find(cite); pos != std::string::npos; pos = it.notes.find(cite, pos + 1)) {
    size_t end = pos + cite.size();
    while (end < it.notes.size() && (std::isdigit(static_cast<unsigned char>(it.notes[end])) || it.notes[end] == '.')) ++end;
    std::string number = it.notes.substr(pos + cite.size(), end - pos - cite.size());
    while (!number.empty() && number.back() == '.') number.pop_back();  // the sentence's full stop
    // A measured value (0.28), not a count of the paper's setup (its 100000 training samples).
    if (number.empty() || !std::isdigit(static_cast<unsigned char>(number[0])) || number.find('.') == std::string::npos)
      continue;
    const double v = std::strtod(number.c_str(), nullptr);
    bool given = false;
    for (const Claim& c : claims)
      for (double paper : c.paper) given = given || std::fabs(paper - v) < 0.0005;
    const std::string& says = it.paper_says;
    for (size_t at = says.find(number); at != std::string::npos && !given; at = says.find(number, at + 1)) {
      const bool starts = at == 0 || (!std::isdigit(static_cast<unsigned char>(says[at - 1])) && says[at - 1] != '.');
      const size_t after = at + number.size();
      const bool ends = after == says.size() || !std::isdigit(static_cast<unsigned char>(says[after]));
      given = starts && ends;
    }
    if (!given)
      r.bad("items." + it.name + ".notes",
            fmt::format("cites \"the paper's {}\", which none of the item's checks (paper:) nor its paper_says gives",
                        number));
  }
}

}  // namespace

const ReproItem* ReproManifest::find(const std::string& name) const {
  for (const auto& item : items)
    if (item.name == name) return &item;
  return nullptr;
}

static ReproManifest read_manifest(const std::string& path);

ReproManifest load_manifest(const std::string& path) {
  try {
    return read_manifest(path);
  } catch (const YAML::Exception& e) {  // e.g. a key that is a list: not the manifest's shape
    fail("{}: not a valid manifest: {}", path, e.what());
  }
}

static ReproManifest read_manifest(const std::string& path) {
  ManifestReader r{path};
  YAML::Node root;
  try {
    root = YAML::Load(read_file(path));
  } catch (const YAML::Exception& e) {
    fail("{}: not valid YAML: {}", path, e.what());
  }
  r.only_keys(root, "top level", {"paper", "tolerance", "notes", "items"});
  ReproManifest m;
  m.path = path;
  m.paper_file = r.file(root["paper"], "paper");
  if (root["notes"]) m.notes = r.text(root["notes"], "notes");
  if (root["tolerance"]) {
    m.tolerance = r.number(root["tolerance"], "tolerance");
    if (m.tolerance < 0 || m.tolerance >= 1) r.bad("tolerance", fmt::format("must be in [0, 1) (got {})", m.tolerance));
  }
  const YAML::Node items = root["items"];
  if (!items || !items.IsMap() || items.size() == 0) r.bad("items", "expected a non-empty map of items");
  for (const auto& kv : items) {
    ReproItem it;
    it.name = kv.first.as<std::string>();
    const std::string w = "items." + it.name;
    // The name becomes a directory under --out: a plain name, never a path.
    const bool plain = !it.name.empty() && it.name.size() <= 100 &&
                       std::all_of(it.name.begin(), it.name.end(), [](char ch) {
                         return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
                       });
    if (!plain)
      r.bad(w, "an item name is a plain name of letters, digits, '_' and '-' (it names the item's "
               "directory under --out)");
    if (m.find(it.name)) r.bad(w, "given twice");
    const YAML::Node n = kv.second;
    if (!n.IsMap()) r.bad(w, "expected a map");
    it.kind = r.text(n["kind"], w + ".kind");
    it.title = r.text(n["title"], w + ".title");
    it.paper_says = r.text(n["paper_says"], w + ".paper_says");
    if (n["notes"]) {
      it.notes = r.text(n["notes"], w + ".notes");
      check_reading(it.notes, fmt::format("{}: {}.notes", path, w));
    }
    if (n["outside_records"]) {
      it.outside_records = r.text(n["outside_records"], w + ".outside_records");
      // It tells of runs outside the committed records, so there is no data to fill a placeholder
      // from: one there would be printed as it is typed.
      if (const size_t at = it.outside_records.find("{{"); at != std::string::npos) {
        const size_t end = it.outside_records.find("}}", at);
        const std::string placeholder = it.outside_records.substr(at, end == std::string::npos ? 40 : end + 2 - at);
        r.bad(w + ".outside_records",
              fmt::format("{}: a placeholder is filled from the item's results, which outside_records is not about; "
                          "give the number in the text, or move the sentence to notes", placeholder));
      }
    }
    if (n["beyond_the_paper"]) {
      const std::string b = r.text(n["beyond_the_paper"], w + ".beyond_the_paper");
      if (b != "true" && b != "false") r.bad(w + ".beyond_the_paper", fmt::format("expected true or false (got {})", b));
      it.beyond_the_paper = b == "true";
    }
    const ItemReader* reader = item_reader(it.kind);
    if (!reader) r.bad(w + ".kind", fmt::format("unknown kind '{}' (kinds: sweep, attention, length, lm, bench)", it.kind));
    std::vector<std::string> keys = {"kind", "title", "paper_says", "notes", "outside_records", "beyond_the_paper"};
    keys.insert(keys.end(), reader->keys.begin(), reader->keys.end());
    r.only_keys(n, w, keys);
    reader->read(r, n, w, m, it);
    // A sweep's runs go to a directory named after its file (sweep_plan.cpp): two items whose
    // sweeps share a file name would train into, and report, each other's runs.
    for (const ReproItem& other : m.items)
      if (!it.sweep.empty() && !other.sweep.empty() &&
          fs::path(it.sweep).stem() == fs::path(other.sweep).stem())
        r.bad(w + ".sweep", fmt::format("{} has the file name of items.{}.sweep ({}); their runs would share one "
                                        "directory, {}/ under --runs-dir: rename one",
                                        it.sweep, other.name, other.sweep, fs::path(it.sweep).stem().string()));
    m.items.push_back(std::move(it));
  }
  // The paper's values are checked within the tolerance, stated once for every item.
  for (const ReproItem& it : m.items) {
    std::vector<Claim> claims;
    if (const auto* s = std::get_if<SweepItem>(&it.part)) claims = s->claims;
    if (const auto* l = std::get_if<LengthItem>(&it.part)) claims = l->claims;
    check_paper_citations(r, it, claims);
    for (const Claim& c : claims) {
      if (c.paper.empty()) continue;
      if (it.beyond_the_paper)
        r.bad("items." + it.name, fmt::format("claim '{}' gives the paper's value, but the item is beyond the paper", c.text));
      if (!root["tolerance"])
        r.bad("items." + it.name, fmt::format("claim '{}' gives the paper's value: the top level needs tolerance "
                                              "(how far a measured mean may lie from it)", c.text));
    }
  }
  return m;
}

}  // namespace rmt
