// An item's reading with its numbers computed from the data (repro_readings.h).
#include "lib/experiments/repro_readings.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lib/core/error.h"
#include "lib/experiments/repro_templates.h"

namespace rmt {

namespace {

// One placeholder: its name and its key=value pairs.
struct Placeholder {
  std::string name, text;  // text: as written, for errors
  std::map<std::string, std::string> keys;
};

// Each placeholder's keys: those it needs, then those it may take.
struct PlaceholderKeys {
  std::string name;
  std::vector<std::string> needed, optional;
};

const std::vector<PlaceholderKeys>& placeholder_keys() {
  static const std::vector<PlaceholderKeys> keys = {
      {"test", {"model", "segments"}, {"seed", "metric", "digits"}},
      {"test_mean", {"model", "segments"}, {"metric", "digits"}},
      {"test_range", {"model"}, {"segments", "metric", "digits"}},
      {"solved", {}, {"model", "segments"}},
      {"ended", {"reason"}, {"model", "segments"}},
      {"solved_steps", {}, {"model", "segments"}},
      {"median_solved_step", {}, {"model", "segments"}},
      {"val_range", {"model", "segments"}, {"seed", "from", "to", "stage", "digits"}},
      {"val_at", {"model", "segments", "seed", "step"}, {"stage", "digits"}},
      {"val_slope", {"model", "segments", "seed", "last"}, {"stage"}},
  };
  return keys;
}

// Reads one placeholder's inside ("test model=xl segments=9"), checking its keys.
Placeholder parse_placeholder(const std::string& inside, const std::string& where) {
  Placeholder p;
  p.text = "{{" + inside + "}}";
  std::istringstream words(inside);
  words >> p.name;
  const auto known = std::find_if(placeholder_keys().begin(), placeholder_keys().end(),
                                  [&](const PlaceholderKeys& k) { return k.name == p.name; });
  if (known == placeholder_keys().end()) {
    std::vector<std::string> names;
    for (const auto& k : placeholder_keys()) names.push_back(k.name);
    fail("{}: unknown placeholder {} (placeholders: {})", where, p.text, fmt::join(names, ", "));
  }
  for (std::string word; words >> word;) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size())
      fail("{}: {}: '{}' is not key=value", where, p.text, word);
    const std::string key = word.substr(0, eq);
    const bool takes = std::count(known->needed.begin(), known->needed.end(), key) +
                           std::count(known->optional.begin(), known->optional.end(), key) > 0;
    if (!takes) {
      std::vector<std::string> all = known->needed;
      all.insert(all.end(), known->optional.begin(), known->optional.end());
      fail("{}: {}: unknown key '{}' ({} takes: {})", where, p.text, key, p.name, fmt::join(all, ", "));
    }
    if (p.keys.count(key)) fail("{}: {}: key '{}' given twice", where, p.text, key);
    p.keys[key] = word.substr(eq + 1);
  }
  for (const std::string& key : known->needed)
    if (!p.keys.count(key)) fail("{}: {}: {} needs {}=", where, p.text, p.name, key);
  // The end reasons a run can have (training_run.cpp): any other would count no run.
  static const std::vector<std::string> reasons = {"solved", "max_steps", "unmastered"};
  if (p.keys.count("reason") && std::count(reasons.begin(), reasons.end(), p.keys.at("reason")) == 0)
    fail("{}: {}: reason={} is no end reason (end reasons: {})", where, p.text, p.keys.at("reason"),
         fmt::join(reasons, ", "));
  return p;
}

// Whether `value` is one of the comma-separated `list` ("2,4,6").
bool listed(const std::string& list, const std::string& value) {
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');)
    if (item == value) return true;
  return false;
}

class ReadingFiller {
 public:
  ReadingFiller(const ReadingData& data, std::string where) : data_(data), where_(std::move(where)) {}
  std::string value(const Placeholder& p) const;

 private:
  const ReadingData& data_;
  std::string where_;

  [[noreturn]] void bad(const Placeholder& p, const std::string& what) const { fail("{}: {}: {}", where_, p.text, what); }
  long integer(const Placeholder& p, const std::string& key) const {
    const std::string& text = p.keys.at(key);
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (*end != '\0' || v < 0) bad(p, fmt::format("{}={} is not a non-negative integer", key, text));
    return v;
  }
  int digits(const Placeholder& p) const {
    if (!p.keys.count("digits")) return 2;
    const long d = integer(p, "digits");
    if (d > 6) bad(p, "digits= is at most 6");
    return int(d);
  }
  std::string number(double v, int decimals) const { return fmt::format("{:.{}f}", v, decimals); }
  std::string selection(const Placeholder& p) const;
  // The finished runs (results rows) the placeholder's model, segments and seed select, in seed order.
  std::vector<const std::vector<std::string>*> rows(const Placeholder& p) const;
  size_t column(const Placeholder& p, const std::string& name) const;
  double cell(const Placeholder& p, const std::vector<std::string>& row, const std::string& name) const;
  std::vector<double> test_values(const Placeholder& p) const;
  std::string count_ended(const Placeholder& p, const std::string& reason) const;
  std::vector<long> solved_steps(const Placeholder& p) const;
  // The evaluations of the selected runs' curves, at the stage and in the steps asked for.
  std::vector<std::pair<long, double>> evaluations(const Placeholder& p) const;
};

std::string ReadingFiller::selection(const Placeholder& p) const {
  std::string s;
  for (const char* key : {"model", "segments", "seed"})
    if (p.keys.count(key)) s += fmt::format("{}{}={}", s.empty() ? "" : " ", key, p.keys.at(key));
  return s.empty() ? "the item" : s;
}

size_t ReadingFiller::column(const Placeholder& p, const std::string& name) const {
  if (!data_.results) bad(p, "the item has no results yet");
  const int c = data_.results->column(name);
  if (c < 0) bad(p, fmt::format("the item's results.csv has no column {}", name));
  return size_t(c);
}

double ReadingFiller::cell(const Placeholder& p, const std::vector<std::string>& row, const std::string& name) const {
  const std::string& text = row[column(p, name)];
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v))
    bad(p, fmt::format("column {}: '{}' is not a number", name, text));
  return v;
}

std::vector<const std::vector<std::string>*> ReadingFiller::rows(const Placeholder& p) const {
  const size_t c_kind = column(p, "model.kind"), c_seg = column(p, "segments"), c_seed = column(p, "train.seed");
  const int c_status = data_.results->column("status");
  std::vector<const std::vector<std::string>*> out;
  for (const auto& row : data_.results->rows) {
    if (c_status >= 0 && row[size_t(c_status)] != "done") continue;
    if (p.keys.count("model") && !listed(p.keys.at("model"), row[c_kind])) continue;
    if (p.keys.count("segments") && !listed(p.keys.at("segments"), row[c_seg])) continue;
    if (p.keys.count("seed") && row[c_seed] != p.keys.at("seed")) continue;
    out.push_back(&row);
  }
  if (out.empty()) bad(p, fmt::format("no finished run of {}", selection(p)));
  std::stable_sort(out.begin(), out.end(), [&](const auto* a, const auto* b) {
    return std::strtol((*a)[c_seed].c_str(), nullptr, 10) < std::strtol((*b)[c_seed].c_str(), nullptr, 10);
  });
  return out;
}

std::vector<double> ReadingFiller::test_values(const Placeholder& p) const {
  const std::string metric = p.keys.count("metric") ? p.keys.at("metric") : data_.first_metric;
  std::vector<double> values;
  for (const auto* row : rows(p)) values.push_back(cell(p, *row, metric));
  return values;
}

std::string ReadingFiller::count_ended(const Placeholder& p, const std::string& reason) const {
  const size_t c_end = column(p, "end_reason");
  const auto selected = rows(p);
  const long n = std::count_if(selected.begin(), selected.end(), [&](const auto* row) { return (*row)[c_end] == reason; });
  return fmt::format("{} of {}", n, selected.size());
}

std::vector<long> ReadingFiller::solved_steps(const Placeholder& p) const {
  const size_t c_end = column(p, "end_reason");
  std::vector<long> steps;
  for (const auto* row : rows(p))
    if ((*row)[c_end] == "solved") steps.push_back(long(cell(p, *row, "solved_step")));
  if (steps.empty()) bad(p, fmt::format("no run of {} met the stopping rule", selection(p)));
  return steps;
}

std::vector<std::pair<long, double>> ReadingFiller::evaluations(const Placeholder& p) const {
  const std::string& model = p.keys.at("model");
  const long segments = integer(p, "segments");
  const long stage = p.keys.count("stage") ? integer(p, "stage") : segments;
  const long from = p.keys.count("from") ? integer(p, "from") : 0;
  const long to = p.keys.count("to") ? integer(p, "to") : -1;
  std::vector<std::pair<long, double>> out;
  int runs = 0;
  for (const LearningCurve& curve : data_.curves) {
    if (curve.kind != model || curve.segments != segments) continue;
    if (p.keys.count("seed") && curve.seed != uint64_t(integer(p, "seed"))) continue;
    ++runs;
    for (const CurvePoint& point : curve.points)
      if (point.val_segments == stage && point.step >= from && (to < 0 || point.step <= to))
        out.push_back({long(point.step), point.val_acc});
  }
  if (runs == 0) bad(p, fmt::format("no learning curve of {}", selection(p)));
  if (out.empty()) bad(p, fmt::format("no evaluation of {} at {} segments in the steps asked for", selection(p), stage));
  return out;
}

std::string ReadingFiller::value(const Placeholder& p) const {
  const std::string& name = p.name;
  if (name == "test") {
    std::vector<std::string> parts;
    for (double v : test_values(p)) parts.push_back(number(v, digits(p)));
    return fmt::format("{}", fmt::join(parts, " / "));
  }
  if (name == "test_mean") {
    const std::vector<double> v = test_values(p);
    double sum = 0;
    for (double x : v) sum += x;
    return number(sum / double(v.size()), digits(p));
  }
  if (name == "test_range") {
    const std::vector<double> v = test_values(p);
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    const std::string a = number(*lo, digits(p)), b = number(*hi, digits(p));
    return a == b ? a : a + "-" + b;
  }
  if (name == "solved") return count_ended(p, "solved");
  if (name == "ended") return count_ended(p, p.keys.at("reason"));
  if (name == "solved_steps") {
    const std::vector<long> steps = solved_steps(p);
    return fmt::format("{}", fmt::join(steps, " / "));
  }
  if (name == "median_solved_step") {
    std::vector<long> steps = solved_steps(p);
    std::sort(steps.begin(), steps.end());
    const size_t n = steps.size();
    const double median = n % 2 ? double(steps[n / 2]) : 0.5 * double(steps[n / 2 - 1] + steps[n / 2]);
    return fmt::format("{}", median);
  }
  if (name == "val_range") {
    double lo = 1e300, hi = -1e300;
    for (const auto& [step, acc] : evaluations(p)) lo = std::min(lo, acc), hi = std::max(hi, acc);
    const std::string a = number(lo, digits(p)), b = number(hi, digits(p));
    return a == b ? a : a + "-" + b;
  }
  if (name == "val_at") {
    const long step = integer(p, "step");
    for (const auto& [s, acc] : evaluations(p))
      if (s == step) return number(acc, digits(p));
    bad(p, fmt::format("no evaluation of {} at step {}", selection(p), step));
  }
  // val_slope: least squares over the last evaluations, per 10000 steps.
  std::vector<std::pair<long, double>> e = evaluations(p);
  std::sort(e.begin(), e.end());
  const long last = integer(p, "last");
  if (last < 2) bad(p, "last= needs at least 2 evaluations");
  if (long(e.size()) < last) bad(p, fmt::format("{} has {} evaluations, not {}", selection(p), e.size(), last));
  e.erase(e.begin(), e.end() - last);
  double mx = 0, my = 0;
  for (const auto& [s, acc] : e) mx += double(s), my += acc;
  mx /= double(last), my /= double(last);
  double sxy = 0, sxx = 0;
  for (const auto& [s, acc] : e) sxy += (double(s) - mx) * (acc - my), sxx += (double(s) - mx) * (double(s) - mx);
  const double slope = sxx > 0 ? sxy / sxx * 10000 : 0;
  const std::string text = fmt::format("{:+.3f}", slope);
  return text == "-0.000" ? "+0.000" : text;
}

}  // namespace

std::string fill_reading(const std::string& text, const ReadingData& data, const std::string& where) {
  const ReadingFiller filler(data, where);
  return replace_placeholders(text, where,
                              [&](const std::string& inner) { return filler.value(parse_placeholder(inner, where)); });
}

void check_reading_scope(const std::string& text, const ReadingScope& scope, const std::string& where) {
  replace_placeholders(text, where, [&](const std::string& inner) {
    const Placeholder p = parse_placeholder(inner, where);
    const std::pair<const char*, const std::set<std::string>*> keys[] = {
        {"model", &scope.models}, {"segments", &scope.segments}, {"seed", &scope.seeds}, {"metric", &scope.metrics}};
    for (const auto& [key, has] : keys) {
      if (!p.keys.count(key) || has->empty()) continue;
      std::istringstream values(p.keys.at(key));
      for (std::string value; std::getline(values, value, ',');) {
        if (has->count(value)) continue;
        std::vector<std::string> listed(has->begin(), has->end());
        const bool numbers = std::string(key) == "segments" || std::string(key) == "seed";
        if (numbers)  // in numeric order: the shorter first
          std::stable_sort(listed.begin(), listed.end(),
                           [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
        fail("{}: {}: {}={} names nothing of the item (its {}: {})", where, p.text, key, value,
             std::string(key) == "segments" ? "segment counts" : std::string(key) + "s", fmt::join(listed, ", "));
      }
    }
    return std::string();
  });
}

void check_reading(const std::string& text, const std::string& where) {
  replace_placeholders(text, where, [&](const std::string& inner) {
    parse_placeholder(inner, where);
    return std::string();
  });
}

}  // namespace rmt
