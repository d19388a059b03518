#pragma once
// What the attention items of `rmt reproduce` read on the maps (docs/paper.md §4, Figures 6 and
// 8; docs/reproduction.md "Attention measures"), as numbers over many test samples rather than
// by eye on one: each measure is a share in [0, 1] per sample, counted over the segments where it
// is defined, at one layer and head chosen per run by a stated rule.
//
// The measures (T: a segment's token rows; "strongest": the argmax of the row's attention):
//   write_in_order      6a  write slot i's strongest column (over the whole row) is token i, on
//                           segments of source tokens only with one write slot per token
//   write_reversed      6a  ... is token Ts-1-i
//   read_in_order       6b  answer row j's strongest read-memory column is read slot j (j: its
//                           index among the segment's answer rows), on segments with as many
//                           answer rows as read slots
//   read_reversed       6b  ... is read slot m-1-j
//   rewrite_mass        6c  the write slots' attention on the read-memory columns (a share of
//                           the row), on every segment but the first and the last
//   rewrite_argmax      6c  write slots whose strongest column is a read-memory slot, same segments
//   source_coverage     8a  source tokens that get >= 0.2 of some write slot's attention, on
//                           segments of source tokens only (not the last)
//   cache_source_reads  6d  answer rows whose strongest cache column holds the source symbol they
//                           answer (or an earlier answer's copy of it), among the answer rows
//                           whose symbol is in the cache (Tr-XL: its straight lines)
//   shared_cache_reads  8b  answer rows whose strongest cache column is that of an earlier answer
//                           row of the same segment (several symbols read from one cached state)
// The layer and head of each measure: the one with the highest mean over the samples (does some
// head do it?), except the rewrite measures, pooled over every layer and head (one head that
// carries the read memory over, as any model may keep a copy of it, would make them 1 in every
// setting), and shared_cache_reads, read at the layer and head whose answer rows attend most to
// the cache (so that the rule does not pick the head that mixes most).
#include <string>
#include <vector>

#include "lib/experiments/attention_map.h"
#include "tasks/dataset.h"

namespace rmt {

// Where a copy or reverse sample keeps its source and its answer (tasks/sequence_tasks.h): the
// input is the source X (positions [0, source_length)), <go>, then the answer; answer row k
// (input position answer_begin + k) predicts answer symbol k, source symbol source_of(k), and
// the input at answer_begin + 1 + k is answer symbol k.
struct SampleLayout {
  bool reverse = false;
  int source_length = 0, answer_begin = 0, positions = 0;
  int source_of(int k) const { return reverse ? source_length - 1 - k : k % source_length; }
};
// The layout of a copy or reverse dataset; fails naming the task for any other.
SampleLayout sample_layout(const DatasetMeta& meta);

// One measure on one sample at one layer and head: hits and counted rows (or slots) per segment.
struct MeasureTally {
  std::vector<double> hits;
  std::vector<int> counted;
  int total_counted() const;
  double value() const;              // hits / counted over every segment; NaN when none counted
  double segment_value(size_t s) const;  // NaN when segment s counts nothing
  void add(const MeasureTally& other);   // segment by segment
};

// The measures' names, in the order above.
const std::vector<std::string>& attention_measure_names();
bool is_attention_measure(const std::string& name);
// One sentence saying what `name` counts (fails for an unknown name).
std::string attention_measure_definition(const std::string& name);

// Measure `name` on one sample's maps at one layer and head.
MeasureTally tally_measure(const std::string& name, const AttentionMaps& maps, const SampleLayout& layout,
                           int layer, int head);

// A measure over a run's samples at its chosen layer and head.
struct RunMeasure {
  std::string name;
  bool defined = false;         // some sample counted something
  int layer = 0, head = 0;      // chosen by the rule above; -1, -1: pooled over every layer and head
  int samples = 0;              // samples where it is defined
  double mean = 0, sd = 0;      // over those samples (sd: n-1; 0 for one sample)
  std::vector<double> per_segment;  // pooled over the samples (NaN where a segment counts nothing)
};

// Each of `names` over the samples' maps (one AttentionMaps per test sample of one run).
std::vector<RunMeasure> measure_run(const std::vector<AttentionMaps>& samples, const SampleLayout& layout,
                                    const std::vector<std::string>& names);

}  // namespace rmt
