#pragma once
// What each segment computes, derived in one place for the engine (lib/core/engine.cpp), the
// benchmark's FLOP count (lib/experiments/bench.cpp) and the memory estimate (estimate_memory,
// lib/core/model.cpp), so that the three cannot drift apart.
//
// A segment's query rows are [read m_read | tokens T | write m_write] and its key rows
// [cache mlen | query rows] (docs/paper.md §2):
//   q    = m_read + T + m_write   rows that ask queries (and get keys and values)
//   klen = mlen + q               rows that are attended to
// Training skips work no loss needs: the write block when nothing reads the memory it writes,
// in the last layer every query row nothing reads past its keys and values (live rows), the
// output layer where no position is scored, and a segment whose output goes nowhere.
#include <vector>

#include "lib/core/model_config.h"

namespace rmt {

// The parts of a model a plan depends on (Model's fields of the same names).
struct SegmentModel {
  int num_mem = 0;           // memory tokens m (rmt, mt, xl_rmt, armt), else 0
  int mem_len = 0;           // Transformer-XL cache rows kept per layer (xl, xl_rmt), else 0
  bool write_block = false;  // memory tokens at the segment's end (rmt, xl_rmt, armt)
  bool read_block = true;    // memory tokens at the segment's start (rmt, mt, xl_rmt; not armt,
                             // whose only memory rows are the write block: m_read = 0)
  bool mixer_state = false;  // every layer's mixer hands a state on (deltanet, gated_deltanet):
                             // a memory passed on without memory rows
};
SegmentModel segment_model(const ModelConfig& config);

// Which results of a segment anything depends on. Training asks only for what its loss needs;
// evaluation and decoding ask for everything.
struct SegmentOutputs {
  bool logits = true;  // logits and loss of the token rows
  bool memory = true;  // the memory passed on (models with memory tokens)
};

struct SegmentPlan {
  int T = 0;        // token rows
  int m_read = 0;   // read-block rows: the memory coming in (0 without memory tokens, and in
                    // armt, whose memory comes in through every layer's A and z); the token
                    // rows start here
  int m_write = 0;  // write-block rows run (0 without a write block, or when nothing reads it)
  int mlen = 0;     // cache rows entering (keys and values only)
  int q = 0;        // query rows, m_read + T + m_write
  int klen = 0;     // key rows, mlen + q
  bool scored = false;      // some token row has a loss
  bool logits = false;      // the output layer runs over the token rows (with targets, the loss)
  bool memory_out = false;  // the memory (memory tokens' or the mixers' state) is passed on ...
  int mem_out_row = 0;      // ... from query rows [mem_out_row, +num_mem): the write block, or
                            // without one (mt) the read block (armt: every layer's write block
                            // rows write its A and z)
  bool cache_out = false;   // the next segment's cache is needed
  int next_mlen = 0;        // cache rows handed on: the last min(mem_len, klen) key rows
  bool run = true;          // false: nothing depends on the segment, it is not run
  bool backward = false;    // a loss depends on it: scored, or its memory reaches a later loss
  // Query rows the last layer runs past its keys and values (attention, o_net, FF, output):
  // the token rows if logits are needed, the memory rows if memory is, all in evaluation.
  // Empty (0, 0): the layers run only as far as the next cache needs (the input of every layer).
  int live_begin = 0, live_end = 0;
  int live() const { return live_end - live_begin; }
};

// One segment of T tokens entering with mlen cache rows, asked for `outputs` (forward_segment:
// it runs, and hands on its cache where the model keeps one).
SegmentPlan plan_segment(const SegmentModel& model, int T, int mlen, bool training,
                         SegmentOutputs outputs);

// A forward over segments of seg_len tokens (Engine::forward): positions from first_scored on
// (of all segments concatenated) are scored; pass_on: the state after the last segment is
// needed (a language model carries it on); start_mlen: cache rows entering the first segment.
// Fills plans (one per segment; no allocation once its capacity suffices).
void plan_forward(std::vector<SegmentPlan>& plans, const SegmentModel& model,
                  const std::vector<int>& seg_len, int first_scored, bool training, bool pass_on,
                  int start_mlen = 0);
std::vector<SegmentPlan> plan_forward(const SegmentModel& model, const std::vector<int>& seg_len,
                                      int first_scored, bool training, bool pass_on,
                                      int start_mlen = 0);

// The largest shapes any forward of a T-token segment runs: evaluation (every row, the write
// block) with the cache full (a language model's steady state). The memory estimate's bound.
SegmentPlan plan_largest_segment(const SegmentModel& model, int T);

}  // namespace rmt
