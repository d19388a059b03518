#pragma once
// Attention maps of a trained model (`rmt attn`; docs/paper.md §4, Figures 6 and 8): every
// layer's and head's attention probabilities over one sample, segment by segment, with the
// blocks of docs/paper.md §2 (cache, read memory, tokens, write memory) along both axes, as
// JSON numbers and as a gnuplot heat-map grid.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/model.h"
#include "lib/run/train.h"
#include "lib/run/eval_run.h"

namespace rmt {

// A trained run as `rmt eval` loads it: the resolved config (its dataset checked) and the
// checkpoint's model, refused when it does not fit the run.
struct TrainedRun {
  RunSetup run;
  std::unique_ptr<Model> model;
  std::string checkpoint_path;
};
// checkpoint: best | last | a .safetensors file. device: the backend the model is loaded on
// (run_backend); empty: the run's.
TrainedRun load_trained_run(const std::string& run_dir, const std::string& checkpoint,
                            const std::string& device = "");

struct AttentionBlock {
  std::string name;        // "cache", "read memory", "tokens", "write memory"
  int begin = 0, end = 0;  // rows (queries) or columns (keys) [begin, end)
};

struct SegmentAttention {
  int segment = 0;
  int first_position = 0;  // the segment's first input position in the sample
  int q = 0, klen = 0;     // query rows, key columns
  std::vector<AttentionBlock> query_blocks, key_blocks;
  // Per row / column: the input symbol (tokens), r<i> / w<i> (memory slot i of the read / write
  // block); cache columns keep the label of the row they were cached from.
  std::vector<std::string> query_labels, key_labels;
  std::vector<uint8_t> mask;  // [q, klen] 1 = blocked (docs/paper.md §2)
  std::vector<float> prob;    // [layers, heads, q, klen]: every row, in evaluation mode
};

struct AttentionMaps {
  std::string kind;
  int layers = 0, heads = 0, memory_tokens = 0, mem_len = 0;
  std::vector<int> seg_len;
  std::vector<int32_t> input;  // the sample's input ids
  std::vector<SegmentAttention> segments;
  // The [q, klen] map of one layer and head of segment s.
  const float* map(int s, int layer, int head) const;
};

// Runs `model` over one sample (input [T], split into seg_len) segment by segment in evaluation
// mode (no dropout; the state handed on as in `rmt eval`) and keeps every layer's attention
// probabilities, all rows of every layer. vocab names the input ids for the labels.
AttentionMaps compute_attention_maps(Model& model, const std::vector<std::string>& vocab,
                                     const int32_t* input, int T, const std::vector<int>& seg_len);

// Which maps to write: segments, layers, heads (each non-empty, in range).
struct AttentionSelection {
  std::vector<int> segments, layers, heads;
};

// The selected maps as one JSON document: blocks, labels, mask and probabilities per segment.
// `about` (a JSON object's text, e.g. run, checkpoint, split, sample) is merged at the top.
std::string attention_maps_json(const AttentionMaps& maps, const AttentionSelection& selection,
                                 const std::string& about);

// A gnuplot script drawing the selected maps as a grid to stdout: layers as rows, segments then
// heads as columns; darkness = probability (white 0, black 1), masked cells grey, block borders
// as red lines, block names on the top and right axes, symbols on the bottom and left ones.
// format: "png", "svg", "pdf" or "eps"; vector formats draw each cell as a rectangle (crisp when
// scaled), and a single panel is centred under the title.
std::string attention_gnuplot_script(const AttentionMaps& maps, const AttentionSelection& selection,
                                     const std::string& format, const std::string& title);

// Runs gnuplot on `script` and returns what it writes to stdout (the image). Fails, with
// gnuplot's own message, when gnuplot is missing or fails.
std::string run_gnuplot(const std::string& script);

}  // namespace rmt
