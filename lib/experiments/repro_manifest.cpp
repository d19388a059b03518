// The reproduction manifest (experiments/reproduce/reproduce.yaml): read strictly, every error
// naming the file, the item and the key.
#include "lib/experiments/reproduce.h"

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
    if (!fs::is_regular_file(p)) bad(where, fmt::format("{} is not a file", p.string()));
    return p.string();
  }
};

Claim read_claim(const ManifestReader& r, const YAML::Node& node, const std::string& where) {
  r.only_keys(node, where, {"text", "model", "segments", "min", "max", "above", "metric"});
  Claim c;
  c.text = r.text(node["text"], where + ".text");
  c.model = r.kind(node["model"], where + ".model");
  c.segments = r.integers(node["segments"], where + ".segments", 1, 100000);
  if (node["min"]) c.min = r.number(node["min"], where + ".min");
  if (node["max"]) c.max = r.number(node["max"], where + ".max");
  if (node["above"]) c.above = r.kind(node["above"], where + ".above");
  if (node["metric"]) c.metric = r.text(node["metric"], where + ".metric");
  if (!c.min && !c.max && c.above.empty()) r.bad(where, "a claim needs min, max or above");
  if (c.min && c.max && *c.min > *c.max)
    r.bad(where, fmt::format("min {} is above max {}: no value can hold", *c.min, *c.max));
  return c;
}

RunPick read_pick(const ManifestReader& r, const YAML::Node& node, const std::string& where) {
  r.only_keys(node, where, {"model", "segments", "seed", "sample", "segment"});
  RunPick p;
  p.model = r.kind(node["model"], where + ".model");
  p.segments = r.integer(node["segments"], where + ".segments", 1, 100000);
  if (node["seed"]) p.seed = r.integer(node["seed"], where + ".seed", 0, 1 << 30);
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
  r.only_keys(root, "top level", {"paper", "notes", "items"});
  ReproManifest m;
  m.path = path;
  m.paper_file = r.file(root["paper"], "paper");
  if (root["notes"]) m.notes = r.text(root["notes"], "notes");
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
    if (n["notes"]) it.notes = r.text(n["notes"], w + ".notes");
    if (it.kind == "sweep") {
      r.only_keys(n, w, {"kind", "title", "paper_says", "notes", "sweep", "paper_section", "metrics", "claims"});
      it.sweep = r.file(n["sweep"], w + ".sweep");
      if (n["paper_section"]) it.paper_section = r.text(n["paper_section"], w + ".paper_section");
      if (!n["metrics"] || !n["metrics"].IsSequence() || n["metrics"].size() == 0)
        r.bad(w + ".metrics", "expected a non-empty list (acc_teacher_forced, acc_free_running, solve_rate, solve_rate_teacher_forced, loss)");
      for (size_t i = 0; i < n["metrics"].size(); ++i) {
        std::string metric = r.text(n["metrics"][i], fmt::format("{}.metrics[{}]", w, i));
        static const std::vector<std::string> ok = {"acc_teacher_forced", "acc_free_running", "solve_rate",
                                                     "solve_rate_teacher_forced", "loss"};
        if (std::find(ok.begin(), ok.end(), metric) == ok.end())
          r.bad(w + ".metrics", fmt::format("unknown metric '{}' (metrics: {})", metric, fmt::join(ok, ", ")));
        it.metrics.push_back(metric);
      }
      if (n["claims"]) {
        if (!n["claims"].IsSequence()) r.bad(w + ".claims", "expected a list");
        for (size_t i = 0; i < n["claims"].size(); ++i)
          it.claims.push_back(read_claim(r, n["claims"][i], fmt::format("{}.claims[{}]", w, i)));
      }
      for (auto& claim : it.claims) {
        if (claim.metric.empty()) claim.metric = it.metrics.front();
        if (std::find(it.metrics.begin(), it.metrics.end(), claim.metric) == it.metrics.end())
          r.bad(w + ".claims", fmt::format("claim '{}' uses metric {}, which is not in the item's metrics", claim.text,
                                           claim.metric));
      }
    } else if (it.kind == "attention" || it.kind == "length") {
      std::vector<std::string> keys = {"kind", "title", "paper_says", "notes", "from", "runs"};
      if (it.kind == "length") keys.insert(keys.end(), {"lengths", "claims"});
      r.only_keys(n, w, keys);
      it.from = r.text(n["from"], w + ".from");
      const ReproItem* from = m.find(it.from);
      if (!from || from->kind != "sweep")
        r.bad(w + ".from", fmt::format("'{}' is not a sweep item given before this one", it.from));
      it.all_runs = it.kind == "length" && n["runs"] && n["runs"].IsScalar() && n["runs"].Scalar() == "all";
      if (!it.all_runs && (!n["runs"] || !n["runs"].IsSequence() || n["runs"].size() == 0))
        r.bad(w + ".runs", it.kind == "length" ? "expected a non-empty list, or all (every run of the sweep)"
                                                : "expected a non-empty list");
      for (size_t i = 0; !it.all_runs && i < n["runs"].size(); ++i)
        it.runs.push_back(read_pick(r, n["runs"][i], fmt::format("{}.runs[{}]", w, i)));
      if (it.kind == "length") it.lengths = r.integers(n["lengths"], w + ".lengths", 1, 100000);
      if (it.kind == "length" && n["claims"]) {  // on the evaluated segments' teacher-forced accuracy
        if (!n["claims"].IsSequence()) r.bad(w + ".claims", "expected a list");
        for (size_t i = 0; i < n["claims"].size(); ++i) {
          it.claims.push_back(read_claim(r, n["claims"][i], fmt::format("{}.claims[{}]", w, i)));
          if (it.claims.back().metric.empty()) it.claims.back().metric = "acc_teacher_forced";
          if (it.claims.back().metric != "acc_teacher_forced")
            r.bad(fmt::format("{}.claims[{}]", w, i), "a length item's claims are on acc_teacher_forced");
        }
      }
    } else if (it.kind == "lm") {
      r.only_keys(n, w, {"kind", "title", "paper_says", "notes", "sweep", "claims"});
      it.sweep = r.file(n["sweep"], w + ".sweep");
      if (n["claims"]) {
        if (!n["claims"].IsSequence()) r.bad(w + ".claims", "expected a list");
        for (size_t i = 0; i < n["claims"].size(); ++i)
          it.lm_claims.push_back(read_lm_claim(r, n["claims"][i], fmt::format("{}.claims[{}]", w, i)));
      }
    } else {
      r.bad(w + ".kind", fmt::format("unknown kind '{}' (kinds: sweep, attention, length, lm)", it.kind));
    }
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
  return m;
}

}  // namespace rmt
