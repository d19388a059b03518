// The attention measures of the reproduction (attention_readings.h): each a share per sample,
// counted segment by segment, and the choice of layer and head per run.
#include "lib/experiments/attention_readings.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "lib/core/error.h"

namespace rmt {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// A source token counts as covered by the write memory when some slot gives it this much of its
// attention: above an even spread over the segment's keys in every setting measured (1/8 in
// Figure 8's: 2 read slots, 4 tokens, 2 write slots), so that a slot attending to everything
// alike covers nothing, and within reach of a slot that mixes the 4 tokens of a segment (1/4 each).
constexpr float kCoverShare = 0.2f;

std::optional<AttentionBlock> find_block(const std::vector<AttentionBlock>& blocks, const std::string& name) {
  for (const AttentionBlock& b : blocks)
    if (b.name == name) return b;
  return std::nullopt;
}

// The column of the largest value in row[begin, end) (the first of equals).
int argmax(const float* row, int begin, int end) { return int(std::max_element(row + begin, row + end) - row); }

// One segment's view for the measures: its blocks and where its rows lie in the sample.
struct SegmentView {
  const SegmentAttention& sa;
  const float* map;  // [q, klen] of the layer and head
  std::optional<AttentionBlock> read_q, tokens_q, write_q, cache_k, read_k, tokens_k;
  bool last = false;
  const float* row(int r) const { return map + int64_t(r) * sa.klen; }
  int tokens() const { return tokens_q->end - tokens_q->begin; }
  int position(int t) const { return sa.first_position + t; }  // of token row t
  bool source_only(const SampleLayout& l) const { return sa.first_position + tokens() <= l.source_length; }
};

SegmentView segment_view(const AttentionMaps& maps, size_t s, int layer, int head) {
  const SegmentAttention& sa = maps.segments[s];
  SegmentView v{sa, maps.map(int(s), layer, head), find_block(sa.query_blocks, "read memory"),
                find_block(sa.query_blocks, "tokens"), find_block(sa.query_blocks, "write memory"),
                find_block(sa.key_blocks, "cache"), find_block(sa.key_blocks, "read memory"),
                find_block(sa.key_blocks, "tokens")};
  v.last = s + 1 == maps.segments.size();
  return v;
}

using SegmentMeasure = void (*)(const SegmentView&, const SampleLayout&, double& hits, int& counted);

void write_order(const SegmentView& v, const SampleLayout& l, bool reversed, double& hits, int& counted) {
  if (!v.write_q || v.last || !v.source_only(l)) return;
  const int m = v.write_q->end - v.write_q->begin, Ts = v.tokens();
  if (m != Ts) return;
  for (int i = 0; i < m; ++i) {
    const int strongest = argmax(v.row(v.write_q->begin + i), 0, v.sa.klen);
    hits += strongest == v.tokens_k->begin + (reversed ? Ts - 1 - i : i);
  }
  counted += m;
}
void write_in_order(const SegmentView& v, const SampleLayout& l, double& h, int& c) { write_order(v, l, false, h, c); }
void write_reversed(const SegmentView& v, const SampleLayout& l, double& h, int& c) { write_order(v, l, true, h, c); }

void read_order(const SegmentView& v, const SampleLayout& l, bool reversed, double& hits, int& counted) {
  if (!v.read_k) return;
  const int m = v.read_k->end - v.read_k->begin;
  std::vector<int> answer_rows;
  for (int t = 0; t < v.tokens(); ++t)
    if (v.position(t) >= l.answer_begin) answer_rows.push_back(v.tokens_q->begin + t);
  if (int(answer_rows.size()) != m) return;
  for (int j = 0; j < m; ++j) {
    const int slot = argmax(v.row(answer_rows[size_t(j)]), v.read_k->begin, v.read_k->end) - v.read_k->begin;
    hits += slot == (reversed ? m - 1 - j : j);
  }
  counted += m;
}
void read_in_order(const SegmentView& v, const SampleLayout& l, double& h, int& c) { read_order(v, l, false, h, c); }
void read_reversed(const SegmentView& v, const SampleLayout& l, double& h, int& c) { read_order(v, l, true, h, c); }

// The first segment's read memory is the learned initial memory, and the last segment's write
// memory is never read: neither says whether the model passes its memory on.
bool rewrites(const SegmentView& v) { return v.write_q && v.read_k && v.sa.segment > 0 && !v.last; }

void rewrite_mass(const SegmentView& v, const SampleLayout&, double& hits, int& counted) {
  if (!rewrites(v)) return;
  for (int r = v.write_q->begin; r < v.write_q->end; ++r) {
    const float* row = v.row(r);
    for (int c = v.read_k->begin; c < v.read_k->end; ++c) hits += row[c];
    ++counted;
  }
}

void rewrite_argmax(const SegmentView& v, const SampleLayout&, double& hits, int& counted) {
  if (!rewrites(v)) return;
  for (int r = v.write_q->begin; r < v.write_q->end; ++r) {
    const int strongest = argmax(v.row(r), 0, v.sa.klen);
    hits += strongest >= v.read_k->begin && strongest < v.read_k->end;
    ++counted;
  }
}

void source_coverage(const SegmentView& v, const SampleLayout& l, double& hits, int& counted) {
  if (!v.write_q || v.last || !v.source_only(l)) return;
  for (int t = 0; t < v.tokens(); ++t) {
    bool covered = false;
    for (int r = v.write_q->begin; r < v.write_q->end; ++r) covered |= v.row(r)[v.tokens_k->begin + t] >= kCoverShare;
    hits += covered;
    ++counted;
  }
}

// The label of input position p: its symbol, as the token rows of its segment name it.
const std::string& position_label(const AttentionMaps& maps, int p) {
  for (const SegmentAttention& sa : maps.segments) {
    const std::optional<AttentionBlock> tokens = find_block(sa.query_blocks, "tokens");
    if (p >= sa.first_position && p < sa.first_position + (tokens->end - tokens->begin))
      return sa.query_labels[size_t(tokens->begin + p - sa.first_position)];
  }
  throw std::logic_error(fmt::format("attention measures: position {} is in no segment", p));
}

// The input position each cache column was cached from: a model without memory rows caches the
// last `mem_len` token rows before the segment (lib/core/engine.cpp); empty for one with memory.
std::vector<int> cache_positions(const SegmentView& v, const AttentionMaps& maps) {
  if (!v.cache_k || maps.memory_tokens > 0) return {};
  const int mlen = v.cache_k->end - v.cache_k->begin;
  std::vector<int> positions;
  for (int c = 0; c < mlen; ++c) {
    const int p = v.sa.first_position - mlen + c;
    // The cache's labels say what each cached row was: a position of another symbol would be a
    // misreading of the engine's cache, never a measure of the model.
    if (p < 0 || v.sa.key_labels[size_t(v.cache_k->begin + c)] != position_label(maps, p))
      throw std::logic_error(fmt::format("attention measures: cache column {} of segment {} is not input position {}",
                                         c, v.sa.segment, p));
    positions.push_back(p);
  }
  return positions;
}

// The input positions that hold answer k's source symbol: its place in the source and, on copy,
// the earlier answers that repeat it.
std::set<int> positions_of_symbol(const SampleLayout& l, int k) {
  std::set<int> at = {l.source_of(k)};
  for (int a = 0; a < k; ++a)
    if (l.source_of(a) == l.source_of(k) && l.answer_begin + 1 + a < l.positions) at.insert(l.answer_begin + 1 + a);
  return at;
}

struct CacheReads {
  std::vector<int> answer_rows, answers, strongest;  // query row, answer index, strongest cache column
};

CacheReads cache_reads(const SegmentView& v, const SampleLayout& l) {
  CacheReads out;
  if (!v.cache_k) return out;
  for (int t = 0; t < v.tokens(); ++t) {
    if (v.position(t) < l.answer_begin) continue;
    const int r = v.tokens_q->begin + t;
    out.answer_rows.push_back(r);
    out.answers.push_back(v.position(t) - l.answer_begin);
    out.strongest.push_back(argmax(v.row(r), v.cache_k->begin, v.cache_k->end) - v.cache_k->begin);
  }
  return out;
}

void shared_cache_reads(const SegmentView& v, const SampleLayout& l, double& hits, int& counted) {
  const CacheReads reads = cache_reads(v, l);
  std::set<int> seen;
  for (int column : reads.strongest) hits += !seen.insert(column).second;
  counted += int(reads.strongest.size());
}

// How much the answer rows attend to the cache: the rule that picks shared_cache_reads' head.
void answer_cache_mass(const SegmentView& v, const SampleLayout& l, double& hits, int& counted) {
  const CacheReads reads = cache_reads(v, l);
  for (int r : reads.answer_rows) {
    for (int c = v.cache_k->begin; c < v.cache_k->end; ++c) hits += v.row(r)[c];
    ++counted;
  }
}

// The head rule of a measure pooled over every layer and head rather than read at one.
constexpr const char* kEveryHead = "every layer and head";

struct MeasureEntry {
  std::string name;
  SegmentMeasure measure;      // nullptr: cache_source_reads, which needs the maps' cache layout
  const char* head_rule;       // "" = its own highest mean; kEveryHead; else the measure whose mean picks it
  const char* definition;      // one sentence, as the report and docs/reproduction.md give it
};

const std::vector<MeasureEntry>& measure_table() {
  static const std::vector<MeasureEntry> table = {
      {"write_in_order", write_in_order, "",
       "share of write slots i whose strongest column is token i, on segments of source tokens only with one slot a token"},
      {"write_reversed", write_reversed, "",
       "share of write slots i whose strongest column is token Ts-1-i (reversed), on the same segments"},
      {"read_in_order", read_in_order, "",
       "share of answer rows j (of a segment with one answer row a read slot) whose strongest read slot is r_j"},
      {"read_reversed", read_reversed, "", "share of answer rows j whose strongest read slot is r_(m-1-j) (reversed)"},
      {"rewrite_mass", rewrite_mass, kEveryHead,
       "the write slots' attention on the read memory (share of the row), on every segment but the first and the "
       "last, over every layer and head"},
      {"rewrite_argmax", rewrite_argmax, kEveryHead,
       "share of write slots whose strongest column is a read slot, on every segment but the first and the last, "
       "over every layer and head"},
      {"source_coverage", source_coverage, "",
       "share of a source segment's tokens that get at least 0.2 of some write slot's attention"},
      {"cache_source_reads", nullptr, "",
       "share of answer rows whose strongest cache column holds the symbol they answer, among rows whose symbol is cached"},
      {"shared_cache_reads", shared_cache_reads, "answer_cache_mass",
       "share of answer rows whose strongest cache column is that of an earlier answer row of the segment (at the "
       "layer and head whose answer rows attend most to the cache)"},
  };
  return table;
}

const MeasureEntry& entry_of(const std::string& name) {
  for (const MeasureEntry& e : measure_table())
    if (e.name == name) return e;
  fail("unknown attention measure '{}'", name);
}

}  // namespace

SampleLayout sample_layout(const DatasetMeta& meta) {
  if ((meta.kind != "copy" && meta.kind != "reverse") || !meta.stacked)
    fail("the attention measures read copy and reverse samples (source, <go>, answer); the task is {}", meta.task);
  SampleLayout l;
  l.reverse = meta.kind == "reverse";
  l.source_length = meta.len_x;
  l.positions = meta.input_length;
  l.answer_begin = meta.input_length - meta.answer_size;
  return l;
}

int MeasureTally::total_counted() const {
  int n = 0;
  for (int c : counted) n += c;
  return n;
}

double MeasureTally::value() const {
  double h = 0;
  for (double x : hits) h += x;
  const int n = total_counted();
  return n > 0 ? h / n : kNaN;
}

double MeasureTally::segment_value(size_t s) const {
  return s < counted.size() && counted[s] > 0 ? hits[s] / counted[s] : kNaN;
}

void MeasureTally::add(const MeasureTally& other) {
  if (hits.size() < other.hits.size()) hits.resize(other.hits.size()), counted.resize(other.hits.size());
  for (size_t s = 0; s < other.hits.size(); ++s) hits[s] += other.hits[s], counted[s] += other.counted[s];
}

const std::vector<std::string>& attention_measure_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const MeasureEntry& e : measure_table()) n.push_back(e.name);
    return n;
  }();
  return names;
}

std::string attention_measure_definition(const std::string& name) { return entry_of(name).definition; }

bool is_attention_measure(const std::string& name) {
  const auto& n = attention_measure_names();
  return std::find(n.begin(), n.end(), name) != n.end();
}

MeasureTally tally_measure(const std::string& name, const AttentionMaps& maps, const SampleLayout& layout,
                           int layer, int head) {
  MeasureTally t;
  t.hits.assign(maps.segments.size(), 0);
  t.counted.assign(maps.segments.size(), 0);
  for (size_t s = 0; s < maps.segments.size(); ++s) {
    const SegmentView v = segment_view(maps, s, layer, head);
    if (name == "answer_cache_mass") {
      answer_cache_mass(v, layout, t.hits[s], t.counted[s]);
    } else if (name == "cache_source_reads") {
      const std::vector<int> at = cache_positions(v, maps);
      if (at.empty()) continue;
      const CacheReads reads = cache_reads(v, layout);
      for (size_t i = 0; i < reads.answers.size(); ++i) {
        const std::set<int> wanted = positions_of_symbol(layout, reads.answers[i]);
        if (std::none_of(at.begin(), at.end(), [&](int p) { return wanted.count(p) > 0; })) continue;
        t.hits[s] += wanted.count(at[size_t(reads.strongest[i])]) > 0;
        ++t.counted[s];
      }
    } else {
      entry_of(name).measure(v, layout, t.hits[s], t.counted[s]);
    }
  }
  return t;
}

std::vector<RunMeasure> measure_run(const std::vector<AttentionMaps>& samples, const SampleLayout& layout,
                                    const std::vector<std::string>& names) {
  std::vector<RunMeasure> out;
  if (samples.empty()) return out;
  const int L = samples[0].layers, H = samples[0].heads;
  // Each name's tally per layer and head and sample, [L * H][samples].
  auto tallies_of = [&](const std::string& name) {
    std::vector<std::vector<MeasureTally>> t(size_t(L * H));
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h)
        for (const AttentionMaps& maps : samples) t[size_t(l * H + h)].push_back(tally_measure(name, maps, layout, l, h));
    return t;
  };
  // The mean over the samples where it is defined; NaN where none.
  auto sample_mean = [](const std::vector<MeasureTally>& ts) {
    double sum = 0;
    int n = 0;
    for (const MeasureTally& t : ts)
      if (t.total_counted() > 0) sum += t.value(), ++n;
    return n > 0 ? sum / n : kNaN;
  };
  for (const std::string& name : names) {
    const MeasureEntry& entry = entry_of(name);
    const auto tallies = tallies_of(name);
    RunMeasure m;
    m.name = name;
    std::vector<MeasureTally> chosen;  // per sample
    if (std::string(entry.head_rule) == kEveryHead) {
      m.layer = m.head = -1;
      for (size_t k = 0; k < samples.size(); ++k) {
        chosen.emplace_back();
        for (const auto& per_head : tallies) chosen.back().add(per_head[k]);
      }
    } else {
      const auto rule = *entry.head_rule ? tallies_of(entry.head_rule) : tallies;
      double best = -1;
      for (int lh = 0; lh < L * H; ++lh) {
        const double v = sample_mean(rule[size_t(lh)]);
        if (std::isfinite(v) && v > best) best = v, m.layer = lh / H, m.head = lh % H;
      }
      chosen = tallies[size_t(m.layer * H + m.head)];
    }
    std::vector<double> values;
    MeasureTally pooled;
    for (const MeasureTally& t : chosen) {
      pooled.add(t);
      if (t.total_counted() > 0) values.push_back(t.value());
    }
    m.defined = !values.empty();
    m.samples = int(values.size());
    for (double v : values) m.mean += v / double(values.size());
    if (values.size() > 1) {
      double ss = 0;
      for (double v : values) ss += (v - m.mean) * (v - m.mean);
      m.sd = std::sqrt(ss / double(values.size() - 1));
    }
    for (size_t s = 0; s < pooled.hits.size(); ++s) m.per_segment.push_back(pooled.segment_value(s));
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace rmt
