// The attention measures of `rmt reproduce` (lib/experiments/attention_readings.h) on maps built by
// hand, where the answer is known: an identity write map writes in order, a reversed one in
// reverse, write slots that attend only to the read memory rewrite it, and so on.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lib/experiments/attention_readings.h"
#include "tests/cli.h"

using namespace rmt;

namespace {

// Copy of 4 symbols: input a b c d <go> a b c d a b c (12 positions), the answer from position 4.
const std::vector<std::string> kInput = {"a", "b", "c", "d", "<go>", "a", "b", "c", "d", "a", "b", "c"};
SampleLayout copy4() {
  SampleLayout l;
  l.source_length = 4, l.answer_begin = 4, l.positions = 12;
  return l;
}

// An RMT segment of `Ts` tokens from `first` with `m` memory slots: rows and keys [read, tokens, write].
SegmentAttention rmt_segment(int s, int first, int Ts, int m, int layers, int heads) {
  SegmentAttention sa;
  sa.segment = s, sa.first_position = first;
  sa.q = sa.klen = 2 * m + Ts;
  sa.query_blocks = {{"read memory", 0, m}, {"tokens", m, m + Ts}, {"write memory", m + Ts, 2 * m + Ts}};
  sa.key_blocks = sa.query_blocks;
  for (int i = 0; i < m; ++i) sa.query_labels.push_back("r" + std::to_string(i));
  for (int t = 0; t < Ts; ++t) sa.query_labels.push_back(kInput[size_t(first + t)]);
  for (int i = 0; i < m; ++i) sa.query_labels.push_back("w" + std::to_string(i));
  sa.key_labels = sa.query_labels;
  sa.mask.assign(size_t(sa.q * sa.klen), 0);
  sa.prob.assign(size_t(layers * heads * sa.q * sa.klen), 0.f);
  return sa;
}

// A Tr-XL segment of `Ts` tokens from `first` with the `mlen` token rows before it cached.
SegmentAttention xl_segment(int s, int first, int Ts, int mlen, int layers, int heads) {
  SegmentAttention sa;
  sa.segment = s, sa.first_position = first;
  sa.q = Ts, sa.klen = mlen + Ts;
  sa.query_blocks = {{"tokens", 0, Ts}};
  if (mlen > 0) sa.key_blocks.push_back({"cache", 0, mlen});
  sa.key_blocks.push_back({"tokens", mlen, mlen + Ts});
  for (int c = 0; c < mlen; ++c) sa.key_labels.push_back(kInput[size_t(first - mlen + c)]);
  for (int t = 0; t < Ts; ++t) sa.query_labels.push_back(kInput[size_t(first + t)]);
  sa.key_labels.insert(sa.key_labels.end(), sa.query_labels.begin(), sa.query_labels.end());
  sa.mask.assign(size_t(sa.q * sa.klen), 0);
  sa.prob.assign(size_t(layers * heads * sa.q * sa.klen), 0.f);
  return sa;
}

// Three segments of 4 (RMT with 4 memory slots, or Tr-XL with a cache of 4), every probability 0.
AttentionMaps maps_of(const std::string& kind, int layers = 1, int heads = 1, int memory = 4) {
  AttentionMaps maps;
  maps.kind = kind;
  maps.layers = layers, maps.heads = heads;
  maps.memory_tokens = kind == "rmt" ? memory : 0;
  maps.mem_len = kind == "xl" ? 4 : 0;
  maps.seg_len = {4, 4, 4};
  for (int s = 0; s < 3; ++s)
    maps.segments.push_back(kind == "rmt" ? rmt_segment(s, 4 * s, 4, memory, layers, heads)
                                          : xl_segment(s, 4 * s, 4, s == 0 ? 0 : 4, layers, heads));
  return maps;
}

// Probability p at (row, column) of segment s's map at layer, head.
void put(AttentionMaps& maps, int s, int row, int column, float p, int layer = 0, int head = 0) {
  SegmentAttention& sa = maps.segments[size_t(s)];
  sa.prob[size_t((int64_t(layer) * maps.heads + head) * sa.q * sa.klen + int64_t(row) * sa.klen + column)] = p;
}

double measure(const std::string& name, const AttentionMaps& maps, int layer = 0, int head = 0) {
  return tally_measure(name, maps, copy4(), layer, head).value();
}

}  // namespace

TEST_CASE("attention measures: write order on an identity and on a reversed write map") {
  // Segment 0 (the source, a b c d): write slot i (row 8 + i) attends to token i (key 4 + i).
  AttentionMaps in_order = maps_of("rmt"), reversed = maps_of("rmt");
  for (int i = 0; i < 4; ++i) {
    put(in_order, 0, 8 + i, 4 + i, 1.f);
    put(reversed, 0, 8 + i, 4 + 3 - i, 1.f);
  }
  CHECK(measure("write_in_order", in_order) == 1.0);
  CHECK(measure("write_reversed", in_order) == 0.0);
  CHECK(measure("write_in_order", reversed) == 0.0);
  CHECK(measure("write_reversed", reversed) == 1.0);
  // Only the source segment counts: 4 slots, all in segment 0.
  const MeasureTally t = tally_measure("write_in_order", in_order, copy4(), 0, 0);
  CHECK(t.total_counted() == 4);
  CHECK(t.counted[0] == 4);
  // A slot whose strongest column is the write memory, not a token, writes no token.
  put(in_order, 0, 8, 4, 0.3f);
  put(in_order, 0, 8, 9, 0.7f);
  CHECK(measure("write_in_order", in_order) == doctest::Approx(0.75));
  // Tr-XL has no write memory: undefined, not zero.
  CHECK(std::isnan(measure("write_in_order", maps_of("xl"))));
}

TEST_CASE("attention measures: read order counts answer rows against the read slots") {
  AttentionMaps maps = maps_of("rmt");
  // Segment 1 (positions 4-7: <go> a b c, all answer rows): row 4 + j attends to read slot j;
  // segment 2 (positions 8-11) to read slot 3 - j.
  for (int j = 0; j < 4; ++j) {
    put(maps, 1, 4 + j, j, 0.6f);
    put(maps, 2, 4 + j, 3 - j, 0.6f);
  }
  const MeasureTally in_order = tally_measure("read_in_order", maps, copy4(), 0, 0);
  CHECK(in_order.segment_value(1) == 1.0);
  CHECK(in_order.segment_value(2) == 0.0);
  CHECK(in_order.value() == 0.5);
  CHECK(tally_measure("read_reversed", maps, copy4(), 0, 0).segment_value(2) == 1.0);
  // Segment 0 holds no answer row: not counted.
  CHECK(in_order.counted[0] == 0);
}

TEST_CASE("attention measures: a write block attending only to the read memory rewrites it") {
  AttentionMaps maps = maps_of("rmt");
  for (int s = 0; s < 3; ++s)
    for (int i = 0; i < 4; ++i) {
      put(maps, s, 8 + i, i, 0.5f);      // read slot i
      put(maps, s, 8 + i, (i + 1) % 4, 0.5f);
    }
  CHECK(measure("rewrite_mass", maps) == doctest::Approx(1.0));
  CHECK(measure("rewrite_argmax", maps) == 1.0);
  // Only segment 1 counts: segment 0 reads the initial memory, segment 2's write memory is never read.
  const MeasureTally t = tally_measure("rewrite_mass", maps, copy4(), 0, 0);
  CHECK(t.counted == std::vector<int>{0, 4, 0});
  // Half of one slot's attention moved to the tokens: 7/8 of the mass on the read memory.
  put(maps, 1, 8, 0, 0.f);
  put(maps, 1, 8, 5, 0.5f);
  CHECK(measure("rewrite_mass", maps) == doctest::Approx(0.875));
  CHECK(measure("rewrite_argmax", maps) == 1.0);  // its strongest is read slot 1 (the first of the two equals)
}

TEST_CASE("attention measures: source coverage of a memory smaller than the segment") {
  AttentionMaps maps = maps_of("rmt", 1, 1, 2);  // 2 slots, 4 tokens: rows [r0 r1 a b c d w0 w1]
  put(maps, 0, 6, 2, 0.5f);                      // w0: tokens a and b
  put(maps, 0, 6, 3, 0.5f);
  put(maps, 0, 7, 4, 0.85f);                     // w1: token c; d gets 0.15, below 0.2
  put(maps, 0, 7, 5, 0.15f);
  CHECK(measure("source_coverage", maps) == doctest::Approx(0.75));
  // Segment 1 holds answers, segment 2 is the last: only segment 0 counts.
  CHECK(tally_measure("source_coverage", maps, copy4(), 0, 0).total_counted() == 4);
  // Slots attending to all 8 keys alike (1/8 each) cover nothing.
  AttentionMaps even = maps_of("rmt", 1, 1, 2);
  for (int r = 6; r < 8; ++r)
    for (int k = 0; k < 8; ++k) put(even, 0, r, k, 0.125f);
  CHECK(measure("source_coverage", even) == 0.0);
}

TEST_CASE("attention measures: Tr-XL's straight lines and several answers read from one cached state") {
  // Segment 1 caches positions 0-3 (the source a b c d); its rows are answers 0-3 (a b c d).
  AttentionMaps lines = maps_of("xl"), shared = maps_of("xl");
  for (int j = 0; j < 4; ++j) {
    put(lines, 1, j, j, 1.f);   // answer j reads the cached source symbol j
    put(shared, 1, j, 0, 1.f);  // every answer reads cached position 0
  }
  // Segment 2 caches positions 4-7 (<go> a b c): answers 4-7 (d a b c); its rows read the
  // token columns only, so their strongest cache column is the first (all zero).
  CHECK(measure("cache_source_reads", lines) == doctest::Approx(4.0 / 7));  // segment 2: a b c cached, none read
  CHECK(tally_measure("cache_source_reads", lines, copy4(), 0, 0).segment_value(1) == 1.0);
  CHECK(tally_measure("shared_cache_reads", lines, copy4(), 0, 0).segment_value(1) == 0.0);
  CHECK(tally_measure("shared_cache_reads", shared, copy4(), 0, 0).segment_value(1) == 0.75);
  CHECK(tally_measure("cache_source_reads", shared, copy4(), 0, 0).segment_value(1) == 0.25);
  // RMT has no cache.
  CHECK(std::isnan(measure("shared_cache_reads", maps_of("rmt"))));
}

TEST_CASE("attention measures: a run's layer and head, and its mean and spread over the samples") {
  // Two heads: head 1 writes in order on every sample, head 0 on none; two samples.
  std::vector<AttentionMaps> samples(2, maps_of("rmt", 1, 2));
  for (int i = 0; i < 4; ++i) {
    put(samples[0], 0, 8 + i, 4 + i, 1.f, 0, 1);
    put(samples[1], 0, 8 + i, 4 + (i < 2 ? i : 0), 1.f, 0, 1);  // slots 2 and 3 write token a
    put(samples[0], 0, 8 + i, 4, 1.f, 0, 0);
    put(samples[1], 0, 8 + i, 4, 1.f, 0, 0);
  }
  const std::vector<RunMeasure> m = measure_run(samples, copy4(), {"write_in_order", "shared_cache_reads"});
  REQUIRE(m.size() == 2);
  CHECK(m[0].defined);
  CHECK(m[0].head == 1);
  CHECK(m[0].samples == 2);
  CHECK(m[0].mean == doctest::Approx(0.75));                // 1 and 0.5
  CHECK(m[0].sd == doctest::Approx(std::sqrt(0.125)));      // sample sd of {1, 0.5}
  CHECK(m[0].per_segment[0] == doctest::Approx(0.75));
  CHECK_FALSE(m[1].defined);
  // The rewrite measures pool every layer and head: segment 1's write slots attend only to the
  // read memory in head 0, only to the tokens in head 1 (a head that carries the memory over
  // would make the best head's share 1 whatever the model does).
  for (AttentionMaps& maps : samples)
    for (int i = 0; i < 4; ++i) {
      put(maps, 1, 8 + i, i, 1.f, 0, 0);
      put(maps, 1, 8 + i, 4 + i, 1.f, 0, 1);
    }
  const RunMeasure rewrite = measure_run(samples, copy4(), {"rewrite_mass"})[0];
  CHECK(rewrite.layer == -1);
  CHECK(rewrite.head == -1);
  CHECK(rewrite.mean == doctest::Approx(0.5));
}

TEST_CASE("attention measures: the layout of copy and reverse, and other tasks refused") {
  DatasetMeta meta;
  meta.task = meta.kind = "reverse";
  meta.len_x = 6, meta.len_y = 7, meta.input_length = 12, meta.answer_size = 6;
  const SampleLayout l = sample_layout(meta);
  CHECK(l.answer_begin == 6);
  CHECK(l.source_of(0) == 5);
  CHECK(l.source_of(5) == 0);
  meta.task = meta.kind = "copy";
  meta.len_y = 13, meta.input_length = 18, meta.answer_size = 12;
  CHECK(sample_layout(meta).source_of(7) == 1);
  meta.task = meta.kind = "retrieval";
  CHECK(error_of([&] { sample_layout(meta); }).find("copy and reverse") != std::string::npos);
  CHECK(error_of([] { attention_measure_definition("write_order"); }).find("unknown attention measure") !=
        std::string::npos);
}
