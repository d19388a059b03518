#include "lib/experiments/results_table.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <cmath>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/core/model_kind.h"
#include "lib/experiments/sweep.h"
#include "lib/files/io.h"

namespace rmt {

int CsvTable::column(const std::string& name) const {
  auto it = std::find(header.begin(), header.end(), name);
  return it == header.end() ? -1 : int(it - header.begin());
}

CsvTable parse_csv(const std::string& text, const std::string& origin) {
  std::vector<std::vector<std::string>> records;
  std::vector<int> record_lines;  // the line each record starts on (quoted fields may span lines)
  std::vector<std::string> record;
  std::string field;
  bool quoted = false, after_quote = false, any = false;
  int line = 1, record_line = 1, quote_line = 1;
  auto end_record = [&] {
    record.push_back(field), field.clear();
    records.push_back(record), record.clear();
    record_lines.push_back(record_line);
    any = after_quote = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (ch == '"') quoted = false, after_quote = true;
      else field += ch;
      if (ch == '\n') ++line;
    } else if (ch == ',') {
      record.push_back(field), field.clear(), any = true, after_quote = false;
    } else if (ch == '\n') {
      end_record();
      record_line = ++line;
    } else if (ch == '\r' && (i + 1 == text.size() || text[i + 1] == '\n')) {
      // CRLF line ends
    } else if (after_quote) {
      fail("{}: line {}: unexpected '{}' after a closing quote (a quote inside a quoted field is written \"\")",
           origin, line, ch);
    } else if (ch == '"') {
      if (!field.empty())
        fail("{}: line {}: a quote in the middle of an unquoted field (quote the whole field)", origin, line);
      quoted = true, any = true, quote_line = line;
    } else {
      field += ch, any = true;
    }
  }
  if (quoted) fail("{}: line {}: a quoted field is never closed", origin, quote_line);
  if (any || !field.empty()) end_record();
  if (records.empty()) fail("{}: empty file (expected a results.csv header)", origin);
  CsvTable csv;
  csv.header = records[0];
  for (size_t c = 0; c < csv.header.size(); ++c) {
    if (csv.header[c].empty()) fail("{}: line 1: column {} of the header has no name", origin, c + 1);
    for (size_t d = 0; d < c; ++d)
      if (csv.header[d] == csv.header[c]) fail("{}: line 1: column '{}' appears twice in the header", origin, csv.header[c]);
  }
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != csv.header.size())
      fail("{}: line {} has {} fields, the header has {}", origin, record_lines[r], records[r].size(),
           csv.header.size());
    csv.rows.push_back(records[r]);
    csv.row_lines.push_back(record_lines[r]);
  }
  return csv;
}

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
  const bool fraction = metric.rfind("acc", 0) == 0 || metric.rfind("solve_rate", 0) == 0;
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

// Whether every run of a cell had a target: then the cell says how many met it.
bool solve_counts(const Cell& c) { return c.n > 0 && c.targeted == c.n; }

std::string cell_text(const Cell& c) {
  if (c.n == 0) return "";
  if (!solve_counts(c)) return fmt::format("{:.3f} ± {:.3f} ({})", c.mean, c.std, c.n);
  return fmt::format("{:.3f} ± {:.3f} ({}/{} solved{})", c.mean, c.std, c.solved, c.n,
                     c.median_solved_step ? fmt::format(", median step {:.0f}", *c.median_solved_step) : "");
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

// A run's target and whether it met it, from the columns a stopping sweep writes (-1: absent).
struct SolveColumns {
  int target = -1, end_reason = -1, solved_step = -1;
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
  if (end != "solved" && end != "max_steps")
    fail("{}: line {}: end_reason '{}' is neither solved nor max_steps", source, csv.row_lines[r], end);
  double t = 0;  // empty: the run had no target (the key is written only when set)
  auto [ptr, ec] = std::from_chars(target.data(), target.data() + target.size(), t);
  if (!target.empty() && (ec != std::errc() || ptr != target.data() + target.size() || !(t >= 0 && t <= 1)))
    fail("{}: line {}: train.target '{}' is not a number in [0, 1]", source, csv.row_lines[r], target);
  solved = end == "solved";
  if (solved) step = int_cell(csv, r, sc.solved_step, 0, source);
  else if (!at.empty())
    fail("{}: line {}: solved_step {} of a run that ended at max_steps", source, csv.row_lines[r], at);
  if (solved && t <= 0)
    fail("{}: line {}: end_reason solved of a run without a target (train.target 0)", source, csv.row_lines[r]);
  return t > 0;
}

std::string paper_text(const Cell& c) { return fmt::format("{:.2f}", c.mean); }

// "3 x 24, 6 x 12" for the segment counts in `segments` that `lengths` has.
std::string lengths_text(const std::vector<int>& segments, const std::map<int, int>& lengths) {
  std::vector<std::string> parts;
  for (int s : segments)
    if (auto it = lengths.find(s); it != lengths.end()) parts.push_back(fmt::format("{} x {}", s, it->second));
  return fmt::format("{}", fmt::join(parts, ", "));
}

// The columns where a paper row has a value: their paper segment lengths differ from the measured
// ones (or the measured ones are unknown)? Then columns are named by segments only.
std::vector<int> paper_columns(const Pivot& pivot) {
  std::vector<int> out;
  for (int s : pivot.segments) {
    bool any = false;
    for (const auto& r : pivot.rows) any = any || (r.paper && r.cells.count(s));
    if (any) out.push_back(s);
  }
  return out;
}
bool paper_lengths_differ(const Pivot& pivot) {
  for (int s : paper_columns(pivot)) {
    auto m = pivot.segment_length.find(s);
    auto p = pivot.paper_segment_length.find(s);
    if (m == pivot.segment_length.end() || p == pivot.paper_segment_length.end() || m->second != p->second) return true;
  }
  return false;
}

// {{"measured", "1 x 18, 3 x 6"}, {"paper (copy 24, 72 positions)", "1 x 72, 3 x 24"}}, or {}
// when the paper's segment lengths are the measured ones.
std::vector<std::pair<std::string, std::string>> lengths_parts(const Pivot& pivot) {
  if (!paper_lengths_differ(pivot)) return {};
  std::vector<std::string> about;
  if (!pivot.paper_task.empty()) about.push_back(pivot.paper_task);
  if (pivot.paper_seq_len > 0) about.push_back(fmt::format("{} positions", pivot.paper_seq_len));
  const std::string measured = lengths_text(pivot.segments, pivot.segment_length);
  return {{"measured", measured.empty() ? std::string("(not recorded)") : measured},
          {about.empty() ? std::string("paper") : fmt::format("paper ({})", fmt::join(about, ", ")),
           lengths_text(paper_columns(pivot), pivot.paper_segment_length)}};
}

// "Segment lengths: measured 1 x 18, 3 x 6; paper (copy 24, 72 positions) 1 x 72, 3 x 24." or "".
std::string lengths_note(const Pivot& pivot) {
  const auto parts = lengths_parts(pivot);
  if (parts.empty()) return "";
  return fmt::format("Segment lengths: {} {}; {} {}.", parts[0].first, parts[0].second, parts[1].first,
                     parts[1].second);
}

std::string metric_caption(const std::string& metric) {
  if (metric == "acc_teacher_forced") return "test answer accuracy, teacher-forced";
  if (metric == "acc_free_running") return "test answer accuracy, free-running (greedy decoding)";
  if (metric == "solve_rate") return "test solve rate (whole answer right, greedy decoding)";
  if (metric == "solve_rate_teacher_forced") return "test solve rate, teacher-forced (answer right given the true text before it)";
  if (metric == "bpc") return "test bits per character (language model, every position scored)";
  return "test " + metric;
}

}  // namespace

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
  std::vector<int> c_by;
  for (const auto& b : by) c_by.push_back(need(b));
  SolveColumns c_solve;
  c_solve.target = csv.column("train.target");
  c_solve.end_reason = csv.column("end_reason");
  c_solve.solved_step = csv.column("solved_step");

  // Is the memory (and cache) of each kind the same in every run? Then rows say "mem 9";
  // otherwise it follows the segment length and rows say "mem = seg len".
  // Every row's values are checked before any is used: a corrupt row is an error naming its line,
  // never a silently wrong cell.
  const auto& kinds = model_kinds();
  for (size_t r = 0; r < csv.rows.size(); ++r) {
    const auto& row = csv.rows[r];
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
    for (const auto& row : csv.rows)
      if (row[c_status] == "done") ++(row[size_t(c_bpc)].empty() ? algorithmic : lm);
    if (lm > 0 && algorithmic > 0)
      fail("{}: mixes {} language-model run(s) (with bpc) and {} algorithmic run(s) (without): table "
           "each family from its own results.csv", source, lm, algorithmic);
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
    std::vector<std::string> parts;
    const ModelKindTraits& traits = traits_of(kind);  // a known kind: checked above
    if (traits.has_cache)
      parts.push_back(!cache_setting[kind].empty() ? cache_setting[kind]
                                                   : memory_text("cache", int_cell(csv, r, c_cache, 0, source), seglen));
    if (traits.has_memory)
      parts.push_back(!mem_setting[kind].empty() ? mem_setting[kind]
                                                 : memory_text("mem", int_cell(csv, r, c_mem, 0, source), seglen));
    for (size_t i = 0; i < by.size(); ++i) parts.push_back(by[i] + " " + row[c_by[i]]);
    std::string label = kind;
    if (!parts.empty()) label += " (" + fmt::format("{}", fmt::join(parts, ", ")) + ")";
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

std::string format_pivot(const Pivot& pivot, const std::string& format) {
  std::string out;
  // The paper ran other segment lengths than the measured runs: name columns by segments only,
  // and say both in a note.
  const std::string note = lengths_note(pivot);
  auto column_name = [&](int seg) {
    auto it = pivot.segment_length.find(seg);
    return it == pivot.segment_length.end() || !note.empty() ? fmt::format("{} seg", seg)
                                                              : fmt::format("{} x {}", seg, it->second);
  };
  bool any_paper = false;
  for (const auto& r : pivot.rows) any_paper = any_paper || r.paper;
  auto label_of = [](const PivotRow& r) { return r.paper ? "paper: " + r.label : r.label; };
  auto cell_of = [](const PivotRow& r, int seg) {
    auto it = r.cells.find(seg);
    if (it == r.cells.end()) return std::string();
    return r.paper ? paper_text(it->second) : cell_text(it->second);
  };
  bool any_solve_counts = false;
  for (const auto& r : pivot.rows)
    for (const auto& [seg, c] : r.cells) any_solve_counts = any_solve_counts || (!r.paper && solve_counts(c));
  const std::string caption = fmt::format(
      "{}: mean ± std over seeds ({}){}; columns: {}", metric_caption(pivot.metric),
      any_solve_counts ? "seeds whose validation accuracy met the target / seeds, and the median step they met it at"
                       : "n",
      any_paper ? ", paper rows: the paper's value" : "",
      note.empty() ? "segments x longest segment length" : "number of segments (segment lengths in the note)");
  std::string footnote = pivot.failed ? fmt::format("{} failed run(s) left out.", pivot.failed) : "";
  if (pivot.without_metric)
    footnote += fmt::format("{}{} finished run(s) without a value for {} left out.", footnote.empty() ? "" : " ",
                            pivot.without_metric, pivot.metric);
  if (!note.empty()) footnote = note + (footnote.empty() ? "" : " " + footnote);
  if (format == "md") {
    out += "**" + caption + "** (" + pivot.metric + ", from " + pivot.source + ")\n\n";
    out += "| model |";
    for (int s : pivot.segments) out += " " + column_name(s) + " |";
    out += "\n|---|";
    for (size_t i = 0; i < pivot.segments.size(); ++i) out += "---|";
    out += "\n";
    for (const auto& r : pivot.rows) {
      out += "| " + label_of(r) + " |";
      for (int s : pivot.segments) out += " " + cell_of(r, s) + " |";
      out += "\n";
    }
    if (!footnote.empty()) out += "\n" + footnote + "\n";
  } else if (format == "csv") {
    // One line per cell; a paper cell has the paper's segment length and no std or n.
    out += std::string("model,source,segments,segment_length,mean,std,n") +
           (any_solve_counts ? ",solved,median_solved_step\n" : "\n");
    for (const auto& r : pivot.rows)
      for (const auto& [seg, c] : r.cells) {
        if (std::find(pivot.segments.begin(), pivot.segments.end(), seg) == pivot.segments.end()) continue;
        const auto& lengths = r.paper ? pivot.paper_segment_length : pivot.segment_length;
        const std::string len = lengths.count(seg) ? std::to_string(lengths.at(seg)) : "";
        std::string label = r.label;
        if (label.find_first_of(",\"\n\r") != std::string::npos) {  // RFC 4180 quoting
          std::string quoted = "\"";
          for (char ch : label) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
          label = quoted + "\"";
        }
        if (r.paper)
          out += fmt::format("{},paper,{},{},{:.6g},,", label, seg, len, c.mean);
        else
          out += fmt::format("{},measured,{},{},{:.6g},{:.6g},{}", label, seg, len, c.mean, c.std, c.n);
        if (any_solve_counts)
          out += !solve_counts(c) ? std::string(",,")
                                  : fmt::format(",{},{}", c.solved, c.median_solved_step
                                                                      ? fmt::format("{:.0f}", *c.median_solved_step) : "");
        out += "\n";
      }
  } else if (format == "latex") {
    auto esc = [](std::string s) {
      std::string o;
      for (char ch : s) o += ch == '_' ? std::string("\\_") : ch == '%' ? std::string("\\%") : std::string(1, ch);
      return o;
    };
    out += "\\begin{table}[t]\n\\centering\n\\begin{tabular}{l";
    for (size_t i = 0; i < pivot.segments.size(); ++i) out += "c";
    out += "}\n\\hline\nmodel";
    for (int s : pivot.segments) out += " & " + esc(column_name(s));
    out += " \\\\\n\\hline\n";
    for (const auto& r : pivot.rows) {
      out += esc(label_of(r));
      for (int s : pivot.segments) {
        std::string c = cell_of(r, s);
        size_t pm = c.find("±");
        if (pm != std::string::npos) c.replace(pm, std::string("±").size(), "$\\pm$");
        out += " & " + c;
      }
      out += " \\\\\n";
    }
    out += "\\hline\n\\end{tabular}\n\\caption{" + esc(caption) + (footnote.empty() ? "" : ". " + esc(footnote)) +
           "}\n\\end{table}\n";
  } else {
    fail("unknown table format '{}' (md, csv or latex)", format);
  }
  return out;
}

std::string gnuplot_string(const std::string& s) {
  std::string o = "\"";
  for (char ch : s) o += ch == '"' || ch == '\\' ? std::string("\\") + ch : std::string(1, ch);
  return o + "\"";
}

std::string plot_terminal(const std::string& out) {
  std::string ext = out.size() >= 4 ? out.substr(out.size() - 4) : "";
  if (ext == ".svg") return "set terminal svg size 720,480 dynamic enhanced font 'Helvetica,13'\n";
  if (ext == ".png") return "set terminal pngcairo size 900,600 enhanced font 'Helvetica,12'\n";
  fail("--out {}: the plot file must end in .svg or .png", out);
}

std::string gnuplot_script(const Pivot& pivot, const std::string& out, const std::string& title) {
  const auto& quote = gnuplot_string;
  std::string s = plot_terminal(out);
  s += "set output " + quote(out) + "\n";
  // Where the paper ran other segment lengths, the title says so (as the table's note does).
  std::string quoted_title = quote(title);
  for (const auto& [who, lengths] : lengths_parts(pivot))  // a line each: the plot is narrower than a table
    quoted_title = quoted_title.substr(0, quoted_title.size() - 1) + "\\n" + quote(who + ": " + lengths).substr(1);
  s += "set title " + quoted_title + " noenhanced\n";
  s += "set xlabel 'number of segments'\n";
  s += "set ylabel " + quote(metric_caption(pivot.metric)) + " noenhanced\n";
  // Accuracies and rates lie in [0, 1]; a loss or bpc gets an axis from 0 that fits its values.
  const bool fraction = pivot.metric.rfind("acc", 0) == 0 || pivot.metric.rfind("solve_rate", 0) == 0;
  s += fraction ? "set yrange [0:1.05]\n" : "set yrange [0:*]\n";
  s += "set grid\nset key outside right top noenhanced\n";
  s += "set xtics (";
  for (size_t i = 0; i < pivot.segments.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", pivot.segments[i]);
  s += ")\n";
  if (!pivot.segments.empty())
    s += fmt::format("set xrange [{}:{}]\n", pivot.segments.front() - 0.5, pivot.segments.back() + 0.5);
  // One inline data block per row: segments, mean, std.
  std::vector<std::string> plots;
  std::string data;
  int color = 1;
  std::map<std::string, int> kind_color;  // a paper row takes the colour of its kind's measured rows
  for (size_t i = 0; i < pivot.rows.size(); ++i) {
    const PivotRow& r = pivot.rows[i];
    std::string block = fmt::format("$row{}", i);
    data += block + " << EOD\n";
    for (const auto& [seg, c] : r.cells)
      if (std::find(pivot.segments.begin(), pivot.segments.end(), seg) != pivot.segments.end())
        data += r.paper ? fmt::format("{} {:.6g}\n", seg, c.mean) : fmt::format("{} {:.6g} {:.6g}\n", seg, c.mean, c.std);
    data += "EOD\n";
    if (r.paper)
      plots.push_back(fmt::format("{} using 1:2 with linespoints dashtype 2 pointtype 6 linecolor {} title {}",
                                  block, kind_color.emplace(r.kind, color).second ? color++ : kind_color[r.kind],
                                  quote("paper: " + r.label)));
    else
      plots.push_back(fmt::format("{} using 1:2:3 with yerrorlines linewidth 2 pointtype 7 linecolor {} title {}",
                                  block, kind_color[r.kind] = color++, quote(r.label)));
  }
  if (plots.empty()) fail("nothing to plot: no finished runs with a value for {}", pivot.metric);
  s += data;
  s += "plot " + fmt::format("{}", fmt::join(plots, ", \\\n     ")) + "\n";
  return s;
}

void draw_plot(const std::string& script, const std::string& out) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    fail("gnuplot is not installed; install it with `sudo apt-get install gnuplot-nox` (or `make deps`), "
         "or use `rmt table` for the numbers");
  const std::filesystem::path gp = std::filesystem::path(out).concat(".gp");
  if (gp.has_parent_path()) create_directories_or_fail(gp.parent_path());
  // gnuplot writes the picture while it draws: into a temporary file beside `out`, renamed over
  // it once gnuplot succeeded, so a failed or killed plot never leaves a half-written figure
  // (nor truncates the previous one), as every other file rmt writes (write_file_atomic).
  const std::filesystem::path tmp = std::filesystem::path(out).concat(".tmp.plot");
  // The script's `set output` line naming `out` (quoted as its writer quotes: "..." or '...')
  // now names the temporary file.
  std::string text = script;
  bool found = false;
  for (size_t line = 0; line < text.size(); line = text.find('\n', line) + 1) {
    const size_t end = std::min(text.find('\n', line), text.size());
    if (text.compare(line, 11, "set output ") == 0 && text.substr(line, end - line).find(out) != std::string::npos) {
      text.replace(line, end - line, "set output " + gnuplot_string(tmp.string()));
      found = true;
      break;
    }
    if (end == text.size()) break;
  }
  if (!found) fail("the plot script does not write {} (no `set output` line naming it)", out);
  write_file_atomic(gp, text);
  const std::string cmd = "gnuplot " + shell_quote(gp.string()) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string output;
  char buf[4096];
  size_t n;
  while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int status = p ? pclose(p) : -1;
  std::error_code ec;
  if (status != 0 || !std::filesystem::is_regular_file(tmp)) {
    std::filesystem::remove(tmp, ec);
    fail("gnuplot failed on {}: {}", gp.string(), output);
  }
  std::filesystem::rename(tmp, out, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    fail("cannot rename {} to {}: {}", tmp.string(), out, ec.message());
  }
  std::filesystem::remove(gp, ec);
}

}  // namespace rmt
