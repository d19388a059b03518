// Aggregating results.csv (results_table.h): runs pivoted into model x segments over seeds, and
// the paper's rows beside them.
#include "lib/experiments/results_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/core/stats.h"
#include "lib/experiments/results_table_internal.h"

namespace rmt {

namespace {

// A cell that must hold an integer in [min, max]; fails naming the file, line and column.
int int_cell(const CsvTable& csv, size_t r, int c, int min, const std::string& source) {
  const std::string& s = csv.rows[r][size_t(c)];
  int v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < min)
    fail("{}: line {}: {} '{}' is not an integer >= {}", source, csv.row_lines[r], csv.header[size_t(c)], s, min);
  return v;
}

// A metric cell: a finite number; accuracies and rates lie in [0, 1], a loss is >= 0.
double metric_cell(const CsvTable& csv, size_t r, int c, const std::string& source) {
  const std::string& s = csv.rows[r][size_t(c)];
  const std::string& metric = csv.header[size_t(c)];
  double v = 0;
  const char* begin = s.data();
  if (!s.empty() && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v))
    fail("{}: line {}: {} '{}' is not a finite number", source, csv.row_lines[r], metric, s);
  const bool fraction = results_table_internal::metric_is_fraction(metric);
  if (fraction && (v < 0 || v > 1))
    fail("{}: line {}: {} {} is outside [0, 1]", source, csv.row_lines[r], metric, s);
  if ((metric == "loss" || metric == "bpc") && v < 0)
    fail("{}: line {}: {} {} is negative", source, csv.row_lines[r], metric, s);
  return v;
}

const std::vector<std::string>& model_kinds() {
  static const std::vector<std::string> kinds = model_kind_names();  // the paper's order
  return kinds;
}

// How a memory (or cache) size relates to the longest segment, over all runs of a model kind:
// (value, segment length) pairs. "" when no one description holds for all of them.
std::string memory_setting(const std::string& what, const std::vector<std::pair<int, int>>& runs) {
  if (runs.empty()) return "";
  bool constant = true;
  for (const auto& [value, len] : runs) constant = constant && value == runs[0].first;
  if (constant) return fmt::format("{} {}", what, runs[0].first);
  // One ratio for all runs: value = k x len, or value = len / k as derive's integer division gives.
  for (int k = 1; k <= 64; ++k) {
    bool times = true, divided = k > 1;
    for (const auto& [value, len] : runs) {
      times = times && len > 0 && int64_t(value) == int64_t(k) * len;
      divided = divided && len > 0 && value == len / k;
    }
    if (times) return k == 1 ? what + " = seg len" : fmt::format("{} = {} x seg len", what, k);
    if (divided) return fmt::format("{} = seg len/{}", what, k);
  }
  return "";
}

// One run's memory when its kind's runs share no description.
std::string memory_text(const std::string& what, int value, int segment_length) {
  if (segment_length > 0 && value == segment_length) return what + " = seg len";
  if (segment_length > 0 && value == segment_length / 2) return what + " = seg len/2";
  return fmt::format("{} {}", what, value);
}


// A run's target and whether it met it, from the columns a stopping sweep writes (-1: absent).
struct SolveColumns {
  int target = -1, end_reason = -1, solved_step = -1, steps = -1;  // steps: optional
  bool present() const { return target >= 0 && end_reason >= 0 && solved_step >= 0; }
};

// Checks a done row's stopping columns; returns whether the run had a target, and sets `solved`
// and `step` (the solved step) when it met it.
bool read_solve(const CsvTable& csv, size_t r, const SolveColumns& sc, const std::string& source,
                bool& solved, double& step) {
  if (!sc.present()) return false;
  const auto& row = csv.rows[r];
  const std::string &target = row[size_t(sc.target)], &end = row[size_t(sc.end_reason)],
                    &at = row[size_t(sc.solved_step)];
  if (end != "solved" && end != "max_steps" && end != "unmastered")
    fail("{}: line {}: end_reason '{}' is none of solved, max_steps, unmastered", source, csv.row_lines[r], end);
  double t = 0;  // empty: the run had no target (the key is written only when set)
  auto [ptr, ec] = std::from_chars(target.data(), target.data() + target.size(), t);
  if (!target.empty() && (ec != std::errc() || ptr != target.data() + target.size() || !(t >= 0 && t <= 1)))
    fail("{}: line {}: train.target '{}' is not a number in [0, 1]", source, csv.row_lines[r], target);
  solved = end == "solved";
  if (solved) {
    step = int_cell(csv, r, sc.solved_step, 0, source);
    // A run is solved at one of the steps it trained; a later step is a damaged row, which a
    // median of solved steps would take in silently.
    if (sc.steps >= 0 && !row[size_t(sc.steps)].empty() && step > int_cell(csv, r, sc.steps, 0, source))
      fail("{}: line {}: solved_step {} is beyond the run's {} steps", source, csv.row_lines[r], at,
           row[size_t(sc.steps)]);
  } else if (!at.empty())
    fail("{}: line {}: solved_step {} of a run whose end_reason is {}", source, csv.row_lines[r], at, end);
  if (solved && t <= 0)
    fail("{}: line {}: end_reason solved of a run without a target (train.target 0)", source, csv.row_lines[r]);
  return t > 0;
}

// Whether a column says what a run computes (its data, model, recipe), not what it measured or
// where it ran: runs that differ in one are different settings, never seeds of one cell.
bool is_setting_column(const std::string& name) {
  for (const char* prefix : {"data.", "model.", "train."})
    if (name.rfind(prefix, 0) == 0) return name != "train.seed";
  return name == "bptt" || name == "segment_length" || name == "eval_length" || name == "trained_segments" ||
         name == "trained_length" || name == "eval_data";
}

}  // namespace

CsvTable columns_as_multiples(CsvTable csv, const std::string& source) {
  const int c_multiple = csv.column("length_multiple"), c_seg = csv.column("segments");
  if (c_multiple < 0 || c_seg < 0)
    fail("{}: --columns multiple needs the length_multiple and segments columns of a sweep's length_results.csv "
         "(a sweep's eval: block; columns here: {})", source, fmt::join(csv.header, ", "));
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    const std::string& text = csv.rows[r][size_t(c_multiple)];
    int k = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), k);
    if (ec != std::errc() || ptr != text.data() + text.size() || k < 1)
      fail("{}: line {}: length_multiple '{}' is not a whole multiple of the trained length (>= 1); --columns "
           "multiple lines up eval: multiples, not datasets of other lengths", source, csv.row_lines[r], text);
    csv.rows[r][size_t(c_seg)] = text;
  }
  // The evaluated segments' length no longer names a column (a multiple spans several counts).
  if (const int c_len = csv.column("segment_length"); c_len >= 0) {
    csv.header[size_t(c_len)] = "evaluated_segment_length";
  }
  return csv;
}

std::vector<std::string> multiples_by(const CsvTable& csv, std::vector<std::string> by) {
  const int c = csv.column("trained_segments");
  if (c < 0 || std::find(by.begin(), by.end(), "trained_segments") != by.end()) return by;
  std::set<std::string> counts;
  for (const auto& row : csv.rows) counts.insert(row[size_t(c)]);
  if (counts.size() > 1) by.push_back("trained_segments");
  return by;
}

Pivot pivot_results(const CsvTable& csv, const std::string& metric, const std::vector<std::string>& by,
                    const std::string& source) {
  Pivot pivot;
  pivot.metric = metric;
  pivot.source = source;
  auto need = [&](const std::string& name) {
    int c = csv.column(name);
    if (c < 0) fail("{}: no column '{}' (columns: {})", source, name, fmt::join(csv.header, ", "));
    return c;
  };
  const int c_metric = need(metric), c_kind = need("model.kind"), c_seg = need("segments"),
            c_mem = need("model.num_mem_tokens"), c_cache = need("model.mem_len"),
            c_status = need("status"), c_seglen = csv.column("segment_length");
  std::vector<std::string> by_names = by;
  std::vector<int> c_by;
  for (const auto& b : by) c_by.push_back(need(b));
  SolveColumns c_solve;
  c_solve.target = csv.column("train.target");
  c_solve.end_reason = csv.column("end_reason");
  c_solve.solved_step = csv.column("solved_step");
  c_solve.steps = csv.column("steps");

  // Is the memory (and cache) of each kind the same in every run? Then rows say "mem 9";
  // otherwise it follows the segment length and rows say "mem = seg len".
  // Every row's values are checked before any is used: a corrupt row is an error naming its line,
  // never a silently wrong cell.
  const auto& kinds = model_kinds();
  const int c_run_id = csv.column("run_id");
  std::map<std::string, int> line_of_run;  // a run listed twice would count twice
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    const auto& row = csv.rows[r];
    if (c_run_id >= 0 && !row[size_t(c_run_id)].empty()) {
      auto [it, first] = line_of_run.emplace(row[size_t(c_run_id)], csv.row_lines[r]);
      if (!first)
        fail("{}: line {}: run {} is also on line {}; each run is listed once (a copied or merged file?)",
             source, csv.row_lines[r], row[size_t(c_run_id)], it->second);
    }
    if (row[c_status] != "done" && row[c_status] != "failed")
      fail("{}: line {}: status '{}' is neither done nor failed", source, csv.row_lines[r], row[c_status]);
    if (std::find(kinds.begin(), kinds.end(), row[c_kind]) == kinds.end())
      fail("{}: line {}: model.kind '{}' is not one of {}", source, csv.row_lines[r], row[c_kind],
           fmt::join(kinds, ", "));
    int_cell(csv, r, c_seg, 1, source);
    int_cell(csv, r, c_mem, 0, source);
    int_cell(csv, r, c_cache, 0, source);
    if (row[c_status] == "done") {
      if (c_seglen >= 0) int_cell(csv, r, c_seglen, 1, source);
      if (!row[c_metric].empty()) metric_cell(csv, r, c_metric, source);
      bool solved = false;
      double step = 0;
      read_solve(csv, r, c_solve, source, solved, step);
    }
  }
  // One family per table: language-model runs (a bpc value) and algorithmic runs do not share
  // columns, so a file of both is refused rather than half of it dropped.
  if (const int c_bpc = csv.column("bpc"); c_bpc >= 0) {
    int lm = 0, algorithmic = 0;
    size_t first_lm = 0, first_algorithmic = 0;  // rows, for the message
    for (size_t r = 0; r < csv.rows.size(); ++r) {
      const auto& row = csv.rows[r];
      if (row[c_status] != "done") continue;
      const bool is_lm = !row[size_t(c_bpc)].empty();
      if ((is_lm ? lm : algorithmic)++ == 0) (is_lm ? first_lm : first_algorithmic) = r;
    }
    if (lm > 0 && algorithmic > 0) {
      // The first row of the other sort than the file's first finished row.
      const bool other_is_lm = first_lm > first_algorithmic;
      const size_t other = other_is_lm ? first_lm : first_algorithmic;
      fail("{}: mixes {} language-model run(s) (with bpc) and {} algorithmic run(s) (without): line {} is the first "
           "{} (after {} on line {}); table each family from its own results.csv", source, lm, algorithmic,
           csv.row_lines[other], other_is_lm ? "language-model run" : "algorithmic run",
           other_is_lm ? "an algorithmic run" : "a language-model run",
           csv.row_lines[other_is_lm ? first_algorithmic : first_lm]);
    }
  }
  // Each kind's memory and cache, over its finished runs: one description if one holds for all.
  std::map<std::string, std::vector<std::pair<int, int>>> mem_runs, cache_runs;
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    const auto& row = csv.rows[r];
    if (row[c_status] != "done") continue;
    const int seglen = c_seglen >= 0 ? int_cell(csv, r, c_seglen, 1, source) : 0;
    mem_runs[row[c_kind]].push_back({int_cell(csv, r, c_mem, 0, source), seglen});
    cache_runs[row[c_kind]].push_back({int_cell(csv, r, c_cache, 0, source), seglen});
  }
  std::map<std::string, std::string> mem_setting, cache_setting;
  for (const auto& [kind, runs] : mem_runs) mem_setting[kind] = memory_setting("mem", runs);
  for (const auto& [kind, runs] : cache_runs) cache_setting[kind] = memory_setting("cache", runs);

  // A row's label: its kind, memory (as described for its kind) and `by` values.
  auto label_of = [&](size_t r) {
    const auto& row = csv.rows[r];
    const std::string& kind = row[c_kind];
    const int seglen = c_seglen >= 0 ? int_cell(csv, r, c_seglen, 1, source) : 0;
    std::vector<std::string> parts;
    const ModelKindTraits& traits = traits_of(kind);  // a known kind: checked above
    if (traits.has_cache)
      parts.push_back(!cache_setting[kind].empty() ? cache_setting[kind]
                                                   : memory_text("cache", int_cell(csv, r, c_cache, 0, source), seglen));
    if (traits.has_memory)
      parts.push_back(!mem_setting[kind].empty() ? mem_setting[kind]
                                                 : memory_text("mem", int_cell(csv, r, c_mem, 0, source), seglen));
    for (size_t i = 0; i < by_names.size(); ++i) parts.push_back(by_names[i] + " " + row[c_by[i]]);
    std::string label = kind;
    if (!parts.empty()) label += " (" + fmt::format("{}", fmt::join(parts, ", ")) + ")";
    return label;
  };
  // A cell pools seeds of one setting. Runs of one label and segment count that differ in a
  // setting column (a grid over datasets, data.length, a recipe key) are split into rows by that
  // column, as `by` would, so that runs on different data are never averaged as if seeds.
  for (bool split = true; split;) {  // until no cell holds two settings (a split relabels rows)
    split = false;
    std::map<std::pair<std::string, int>, size_t> first_of_cell;
    for (size_t r = 0; r < csv.rows.size() && !split; ++r) {
      const auto& row = csv.rows[r];
      if (row[c_status] != "done" || row[c_metric].empty()) continue;
      const auto [it, first] = first_of_cell.emplace(std::pair{label_of(r), int_cell(csv, r, c_seg, 1, source)}, r);
      if (first) continue;
      for (size_t c = 0; c < csv.header.size(); ++c) {
        const int ci = int(c);
        if (!is_setting_column(csv.header[c]) || ci == c_mem || ci == c_cache ||
            std::find(c_by.begin(), c_by.end(), ci) != c_by.end())
          continue;
        if (row[c] != csv.rows[it->second][c]) by_names.push_back(csv.header[c]), c_by.push_back(ci), split = true;
      }
    }
  }
  pivot.split_by.assign(by_names.begin() + long(by.size()), by_names.end());

  std::map<std::string, std::map<int, std::vector<double>>> values;
  struct Solves {
    int targeted = 0;
    std::vector<double> steps;  // of the runs that met their target
  };
  std::map<std::string, std::map<int, Solves>> solves;
  std::map<std::string, std::string> kind_of_label;
  std::vector<std::string> order;
  std::set<int> segments;
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    const auto& row = csv.rows[r];
    if (row[c_status] != "done") {
      ++pivot.failed;
      continue;
    }
    const std::string& kind = row[c_kind];
    const int seg = int_cell(csv, r, c_seg, 1, source);
    const int seglen = c_seglen >= 0 ? int_cell(csv, r, c_seglen, 1, source) : 0;
    const std::string label = label_of(r);
    if (row[c_metric].empty()) {  // e.g. acc_free_running of a run that did not decode
      ++pivot.without_metric;
      continue;
    }
    if (!values.count(label)) order.push_back(label), kind_of_label[label] = kind;
    values[label][seg].push_back(metric_cell(csv, r, c_metric, source));
    bool solved = false;
    double step = 0;
    if (read_solve(csv, r, c_solve, source, solved, step)) {
      Solves& sv = solves[label][seg];
      ++sv.targeted;
      if (solved) sv.steps.push_back(step);
    }
    segments.insert(seg);
    if (seglen > 0) pivot.segment_length[seg] = seglen;
  }
  // Rows in the paper's order of models, then by label.
  auto rank = [&](const std::string& label) {
    return std::find(kinds.begin(), kinds.end(), kind_of_label[label]) - kinds.begin();
  };
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return rank(a) != rank(b) ? rank(a) < rank(b) : a < b;
  });
  for (const auto& label : order) {
    PivotRow row;
    row.label = label;
    row.kind = kind_of_label[label];
    for (const auto& [seg, xs] : values[label]) {
      Cell c;
      c.n = int(xs.size());
      for (double x : xs) c.mean += x / c.n;
      if (c.n > 1) {
        double ss = 0;
        for (double x : xs) ss += (x - c.mean) * (x - c.mean);
        c.std = std::sqrt(ss / (c.n - 1));
      }
      const Solves& sv = solves[label][seg];
      c.targeted = sv.targeted;
      c.solved = int(sv.steps.size());
      if (!sv.steps.empty()) c.median_solved_step = median(sv.steps);
      row.cells[seg] = c;
    }
    pivot.rows.push_back(row);
  }
  pivot.segments.assign(segments.begin(), segments.end());
  return pivot;
}

void add_paper_rows(Pivot& pivot, const std::string& yaml_text, const std::string& origin,
                    const std::string& section) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    fail("{}: malformed YAML at line {}, column {}: {}", origin, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  // "line N: " for a node, from yaml-cpp's mark (absent for nodes it made up).
  auto at = [&](const YAML::Node& node) {
    return node.Mark().is_null() ? origin : fmt::format("{}: line {}", origin, node.Mark().line + 1);
  };
  auto scalar_key = [&](const YAML::Node& key, const std::string& where) {
    if (!key.IsScalar()) fail("{}: {}: keys must be plain text, got a list or a mapping", at(key), where);
    return key.Scalar();
  };
  // An integer >= 1 (a number of segments, positions or a length).
  auto positive = [&](const YAML::Node& node, const std::string& where, const std::string& what) {
    const std::string text = node.IsScalar() ? node.Scalar() : "";
    int v = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (!node.IsScalar() || text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < 1)
      fail("{}: {}: {} is not {} (an integer >= 1)", at(node), where,
           node.IsScalar() ? "'" + text + "'" : std::string("a list or mapping"), what);
    return v;
  };
  const std::string example = "e.g. quick_copy: {seq_len: 72, rows: {baseline: {1: 1.0}}}";
  if (!root.IsMap()) fail("{}: expected a mapping of sections (sweep names) to {{seq_len: ..., rows: ...}}, {}", origin, example);
  std::vector<std::string> names;
  // optional: assigning to a YAML::Node that refers to a node would overwrite that node.
  std::optional<YAML::Node> found;
  for (const auto& e : root) {
    std::string name = scalar_key(e.first, "section names");
    if (std::find(names.begin(), names.end(), name) != names.end())
      fail("{}: section '{}' is given twice", at(e.first), name);
    names.push_back(name);
    if (name == section) found.emplace(e.second);
  }
  if (!found) fail("{}: no section '{}' (sections: {}); pick one with --paper-section", origin, section, fmt::join(names, ", "));
  const YAML::Node body = *found;
  if (!body.IsMap()) fail("{}: {}: expected a mapping with 'rows:' (and 'seq_len:' or 'segment_lengths:'), {}", at(body), section, example);
  const std::vector<std::string> known = {"task", "seq_len", "segment_lengths", "rows"};
  std::map<std::string, YAML::Node> keys;
  for (const auto& e : body) {
    std::string key = scalar_key(e.first, section);
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail("{}: {}: unknown key '{}' (a section holds {})", at(e.first), section, key, fmt::join(known, ", "));
    if (keys.count(key)) fail("{}: {}: '{}' is given twice", at(e.first), section, key);
    keys.emplace(key, e.second);
  }
  if (!keys.count("rows") || !keys.at("rows").IsMap())
    fail("{}: {}: expected 'rows:' mapping model labels to {{segments: value}}", at(keys.count("rows") ? keys.at("rows") : body), section);
  std::string task;
  if (keys.count("task")) {
    const YAML::Node& t = keys.at("task");
    if (!t.IsScalar() || t.Scalar().empty())
      fail("{}: {}.task: expected the paper's task as text, e.g. task: copy 24", at(t), section);
    task = t.Scalar();
  }
  int seq_len = 0;
  if (keys.count("seq_len")) seq_len = positive(keys.at("seq_len"), section + ".seq_len", "a number of input positions");
  std::map<int, int> lengths;  // explicit ones
  if (keys.count("segment_lengths")) {
    const YAML::Node& m = keys.at("segment_lengths");
    const std::string where = section + ".segment_lengths";
    if (!m.IsMap() || m.size() == 0)
      fail("{}: {}: expected a non-empty mapping {{segments: segment length}}, e.g. {{3: 24, 6: 12}}", at(m), where);
    for (const auto& v : m) {
      scalar_key(v.first, where);
      const int seg = positive(v.first, where, "a number of segments");
      if (lengths.count(seg)) fail("{}: {}: {} segments is given twice", at(v.first), where, seg);
      lengths[seg] = positive(v.second, where, fmt::format("a segment length for {} segments", seg));
    }
  }
  const YAML::Node rows = keys.at("rows");
  const auto& kinds = model_kinds();
  std::vector<PivotRow> paper;
  std::vector<std::tuple<int, YAML::Node, std::string>> counts;  // each cell's segments, where it is
  for (const auto& entry : rows) {
    PivotRow row;
    row.label = scalar_key(entry.first, section + ".rows");
    row.kind = row.label.substr(0, row.label.find(' '));
    row.paper = true;
    const std::string where = fmt::format("{}.rows.{}", section, row.label);
    for (const auto& other : paper)
      if (other.label == row.label) fail("{}: {}: row '{}' is given twice", at(entry.first), section, row.label);
    // The kind decides which measured rows it sits with; the rest says which memory it had.
    if (std::find(kinds.begin(), kinds.end(), row.kind) == kinds.end() ||
        (row.label.size() > row.kind.size() &&
         (row.label.compare(row.kind.size(), 2, " (") != 0 || row.label.back() != ')')))
      fail("{}: {}: a row label is a model kind ({}), then its memory in parentheses, e.g. \"rmt (mem = seg len)\"",
           at(entry.first), where, fmt::join(kinds, ", "));
    if (!entry.second.IsMap() || entry.second.size() == 0)
      fail("{}: {}: expected a non-empty mapping {{segments: value}}, e.g. {{3: 0.95}}", at(entry.second), where);
    for (const auto& v : entry.second) {
      std::string seg_text = scalar_key(v.first, where);
      int seg = 0;
      auto [ptr, ec] = std::from_chars(seg_text.data(), seg_text.data() + seg_text.size(), seg);
      if (seg_text.empty() || ec != std::errc() || ptr != seg_text.data() + seg_text.size() || seg < 1)
        fail("{}: {}: '{}' is not a number of segments (an integer >= 1)", at(v.first), where, seg_text);
      if (row.cells.count(seg)) fail("{}: {}: {} segments is given twice", at(v.first), where, seg);
      std::string value_text = v.second.IsScalar() ? v.second.Scalar() : "";
      double value = 0;
      const char* vb = value_text.data();
      const char* ve = vb + value_text.size();
      if (vb != ve && *vb == '+') ++vb;
      auto [vptr, vec] = std::from_chars(vb, ve, value);
      if (!v.second.IsScalar() || value_text.empty() || vec != std::errc() || vptr != ve || !std::isfinite(value) ||
          value < 0 || value > 1)
        fail("{}: {}: value {} for {} segments is not a number in [0, 1] (an accuracy or solve rate)", at(v.second),
             where, v.second.IsScalar() ? "'" + value_text + "'" : std::string("(a list or mapping)"), seg);
      counts.push_back({seg, v.first, where});
      Cell c;
      c.mean = value;
      c.n = 0;  // the paper's value only: no std, no seed count
      row.cells[seg] = c;
    }
    paper.push_back(row);
  }
  // The paper's own segment length of every count in the rows: given, or split from seq_len as
  // rmt splits (lib/core/model.h segment_lengths: the longest segment is ceil(seq_len / segments)).
  for (const auto& [seg, node, where] : counts) {
    if (lengths.count(seg)) continue;
    if (seq_len == 0)
      fail("{}: {}: {} segments has no segment length: give the section's seq_len (the paper's input "
           "positions) or segment_lengths: {{{}: LENGTH}}", at(node), where, seg, seg);
    if (seg > seq_len)
      fail("{}: {}: {} segments of the paper's {} input positions (seq_len) leave empty segments", at(node), where, seg,
           seq_len);
    lengths[seg] = (seq_len + seg - 1) / seg;
  }
  pivot.paper_task = task;
  pivot.paper_seq_len = seq_len;
  pivot.paper_segment_length = lengths;
  // The paper rows of a kind follow the measured rows of that kind, whatever memory either has
  // (the labels say which); kinds in the paper's order of models.
  std::vector<PivotRow> merged;
  for (const auto& kind : kinds) {
    for (const auto& row : pivot.rows)
      if (!row.paper && row.kind == kind) merged.push_back(row);
    for (const auto& row : paper)
      if (row.kind == kind) merged.push_back(row);
  }
  pivot.rows = merged;
  // Only the measured segment counts are columns: the paper's other ones are not comparable.
}

}  // namespace rmt
