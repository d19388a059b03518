// MAD's tasks (tasks/mad.h): what they share, the options' problems, the refused compression task.
#include "tasks/mad.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"

namespace rmt {

const char* mad_refused_task(const std::string& name) {
  if (name == "mad_compression")
    return "mad_compression is not offered: mad-lab's compression (generate_compression_instance, "
           "mad/data/instances.py) is scored by an encoder-decoder (mad/model/auto_encoder.py) that pools the "
           "whole sequence into its last position and decodes every position from that one vector; rmt's models "
           "are causal language models whose every position reads the tokens before it, so reconstructing them "
           "would be rmt's copy task (rmt generate copy), not compression into one vector (docs/datasets.md, "
           "\"MAD\")";
  return nullptr;
}

double mad_frac_noise(const TaskOptions& t) { return std::strtod(t.frac_noise.c_str(), nullptr); }

std::vector<std::string> mad_vocab(const TaskOptions& t) {
  std::vector<std::string> v;
  for (int id = 0; id < t.vocab_size; ++id) v.push_back(fmt::format("{}", id));
  return v;
}

int mad_answer_size(const TaskOptions& t) { return task_len_y(t); }

// "X 3 11 … | scored @0→11 @6→9 (2 of 127)": the row and what it asks.
std::string mad_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy) {
  std::string scored;
  int n = 0;
  for (int p = 0; p < cy; ++p)
    if (y[p] >= 0) {
      ++n;
      scored += fmt::format(" @{}→{}", p, decode_ids(meta, y + p, 1));
    }
  std::string xs;
  for (int p = 0; p < cx; ++p) xs += fmt::format("{}{}", p ? " " : "", decode_ids(meta, x + p, 1));
  return fmt::format("X {} | scored{} ({} of {})", xs, scored, n, cy);
}

std::string mad_options_problem(const TaskOptions& t, bool flags) {
  auto name = [&](const char* key, const char* flag) {
    return flags ? fmt::format("--{}", flag) : fmt::format("options.{}", key);
  };
  const std::string V = fmt::format("{} {}", name("vocab_size", "vocab-size"), t.vocab_size);
  const std::string L = fmt::format("{} {}", name("length", "length"), t.length);
  const std::string noise = fmt::format("{} {}", name("noise_vocab_size", "noise-vocab-size"), t.noise_vocab_size);
  const bool recall = t.kind == "mad_recall" || t.kind == "mad_noisy_recall";
  const bool fuzzy = t.kind == "mad_fuzzy_recall", memo = t.kind == "mad_memorization";
  if (recall || fuzzy || memo) {
    // frac_noise: mad-lab asserts 0 <= frac_noise < 1 for recall (instances.py:70, 247), <= 1 for
    // memorization (:425), and a noise vocabulary where it is above 0 (:72, 249, 427).
    const char* s = t.frac_noise.c_str();
    char* end = nullptr;
    errno = 0;
    const double f = std::strtod(s, &end);
    if (t.frac_noise.empty() || *end != '\0' || errno != 0 || !std::isfinite(f) || f < 0 || f > 1 || (f == 1 && !memo))
      return fmt::format("{} '{}' must be a number in [0, {} (mad-lab's assertion)", name("frac_noise", "frac-noise"),
                         t.frac_noise, memo ? "1]" : "1)");
    if (f > 0 && t.noise_vocab_size == 0)
      return fmt::format("{} {} needs noise ids: {} is 0 (mad-lab asserts noise_vocab_size > 0 then)",
                         name("frac_noise", "frac-noise"), t.frac_noise, name("noise_vocab_size", "noise-vocab-size"));
    if (t.noise_vocab_size >= t.vocab_size)
      return fmt::format("{} leaves no ids for keys and values in {}", noise, V);
  }
  // The ids left for keys and values: recall's every id not noise; fuzzy's and memorization's
  // less their special last id (the pad, the insert token).
  const int64_t rest = int64_t(t.vocab_size) - t.noise_vocab_size - (recall ? 0 : 1);
  if ((recall || memo) && rest < 2)
    return fmt::format("{} with {} leaves {} ids for keys and values: at least 2 (a key id and a value id)", V, noise,
                       rest);
  if (recall && (t.length % 2 != 0 || t.length < 4))
    return fmt::format("{} must be even and at least 4: a sample is length/2 key-value pairs, the last a query "
                       "(mad-lab asserts an even seq_len)", L);
  if (memo && (t.length % 2 != 0 || t.length < 2))
    return fmt::format("{} must be even: a sample is length/2 pairs of a key and the insert token", L);
  if (fuzzy) {
    const int64_t keys = rest / 2, values = rest - keys;
    if (t.k_motif_size > keys)
      return fmt::format("{} {} is longer than the {} key ids of {} with {} (a key's ids are distinct)",
                         name("k_motif_size", "k-motif-size"), t.k_motif_size, keys, V, noise);
    if (t.v_motif_size > values)
      return fmt::format("{} {} is longer than the {} value ids of {} with {} (a value's ids are distinct)",
                         name("v_motif_size", "v-motif-size"), t.v_motif_size, values, V, noise);
    const int need = 2 * (t.k_motif_size + t.v_motif_size) + 2;
    if (t.length < need)
      return fmt::format("{} is too short for motifs of up to {} + {} ids: at least {}", L, t.k_motif_size,
                         t.v_motif_size, need);
  }
  if ((recall || fuzzy) && t.targets != "scored" && t.targets != "next")
    return fmt::format("{} '{}' is not one of scored, next", name("targets", "targets"), t.targets);
  if (fuzzy && t.key_motifs != "any" && t.key_motifs != "longest")
    return fmt::format("{} '{}' is not one of any, longest", name("key_motifs", "key-motifs"), t.key_motifs);
  if (t.kind == "mad_selective_copy") {
    if (t.vocab_size < 3)
      return fmt::format("{} is too small: ids V-2 and V-1 are the blank and the copy token, so at least 3", V);
    if (t.length <= 2 * int64_t(t.tokens_to_copy) + 1)
      return fmt::format("{} must be more than 2 x {} {} + 1 (mad-lab's assertion: the tokens, at least one blank, "
                         "the copy token and a blank for each token)", L, name("tokens_to_copy", "tokens-to-copy"),
                         t.tokens_to_copy);
  }
  return "";
}

void mad_finish_options(TaskOptions& t) {
  if (const std::string problem = mad_options_problem(t, true); !problem.empty()) fail("{}", problem);
  if (!t.frac_noise.empty()) t.frac_noise = fmt::format("{}", mad_frac_noise(t));
}

void mad_check_meta_options(const TaskOptions& t) {
  if (const std::string problem = mad_options_problem(t, false); !problem.empty()) fail("{}", problem);
}

std::string mad_generated_summary(const TaskOptions& t) {
  std::string s = fmt::format(", vocab_size {}, length {}", t.vocab_size, t.length);
  const TaskKindTraits& k = task_kind(t.kind);
  if (has_option(k, kOptNoiseVocabSize))
    s += fmt::format(", noise_vocab_size {}, frac_noise {}", t.noise_vocab_size, t.frac_noise);
  if (has_option(k, kOptMotifSize))
    s += fmt::format(", motifs up to {} + {} (keys {})", t.k_motif_size, t.v_motif_size, t.key_motifs);
  if (has_option(k, kOptTargets)) s += fmt::format(", targets {}", t.targets);
  if (has_option(k, kOptTokensToCopy)) s += fmt::format(", {} tokens to copy", t.tokens_to_copy);
  if (has_option(k, kOptKvMapSeed)) s += fmt::format(", kv_map_seed {}", t.kv_map_seed);
  return s;
}

}  // namespace rmt
