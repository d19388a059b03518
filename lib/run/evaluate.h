#pragma once
// Evaluation of a model on a whole split, deterministically (no dropout, fixed order).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lib/core/engine.h"
#include "tasks/dataset.h"

namespace rmt {

// A batch's rows [start, start + B): input and target [B, T] and the predictions pred [B, T].
using PredictionCallback =
    std::function<void(int64_t start, int B, const int32_t* input, const int32_t* target, const int32_t* pred)>;

// The order of the teacher-forced pass's layer-steps: segment by segment, or (armt only) by
// diagonals of the (segment, layer) grid (Engine::forward_diagonal; the same bits).
enum class EvalSchedule { sequential, diagonal };
// "sequential" | "diagonal"; fails naming them for anything else.
EvalSchedule parse_eval_schedule(const std::string& name);
const char* eval_schedule_name(EvalSchedule schedule);

struct EvalOptions {
  std::vector<int> seg_len;   // segment lengths (sum = the split's seq_len)
  int answer_size = 0;
  // The targets hold -1 at answer positions that are not scored (mqar: all but the queries'):
  // every metric skips them, and each scored position is predicted from the true inputs before
  // it, so greedy decoding is the teacher-forced prediction (not run again).
  bool unscored_targets = false;
  int batch_size = 32;
  int64_t max_samples = 0;    // 0 = the whole split
  bool free_running = true;   // also decode greedily (wherever the answer starts)
  bool kv_cache_decoding = true;  // false: re-run each segment per generated token (slower)
  // The teacher-forced pass's schedule, and greedy decoding's up to the answer's first segment:
  // an answer segment's inputs are the last layer's predictions, so its layer-steps form no
  // diagonal.
  EvalSchedule schedule = EvalSchedule::sequential;
  // sqeq: a sample is solved when its last solve_positions predictions are all right (the
  // answer block); 0 = no solve rate.
  int solve_positions = 0;
  // A sample whose answer logits hold a number that is not finite (a memory that overflows far
  // past the trained length): true, it counts as a wrong answer (EvalResult::non_finite_samples;
  // the loss is then not finite); false, the evaluation fails naming how many.
  bool count_non_finite = false;
  // Called with each batch's predictions: pred [B, T] holds the greedy decoding at the answer
  // positions (teacher-forced argmax where the answer is one token; -1 where its logits are not
  // finite), -1 elsewhere. For `rmt eval --predictions`.
  PredictionCallback on_predictions;
};

struct EvalResult {
  double loss = 0;                      // mean cross-entropy over the scored answer positions
  double acc_teacher_forced = 0;        // per-token accuracy over the scored answer positions
  std::optional<double> acc_free_running;  // set when options.free_running
  std::optional<double> solve_rate;     // greedy decoding (whole answer block right)
  // The same with teacher forcing: the answer block right given the true text before it (for
  // sqeq: the roots carried from earlier segments, without the arithmetic that produces them).
  std::optional<double> solve_rate_teacher_forced;
  // The share of samples whose whole answer (every answer position) is right, greedy decoding
  // (teacher forcing where the answer is one token) and teacher-forced. Every algorithmic task.
  std::optional<double> exact_match, exact_match_teacher_forced;
  int64_t samples = 0;
  // Samples whose answer outputs were not finite, scored as wrong (EvalOptions::count_non_finite).
  int64_t non_finite_samples = 0;
  // Language models (evaluate_lm, lib/run/lm.h): bits per character = loss / ln 2, the
  // positions scored and the number of streams.
  std::optional<double> bpc;
  int64_t positions = 0;
  int streams = 0;
};

// The split's rows [start, start + B) into input and target, [B, T] row-major.
using EvalBatchReader =
    std::function<void(int64_t start, int B, std::vector<int32_t>& input, std::vector<int32_t>& target)>;
// n samples of T positions, read a batch at a time (a SampleSplitReader: memory for one batch).
EvalResult evaluate(Engine& engine, int64_t n, int T, const EvalBatchReader& read, const EvalOptions& options);
// A split in memory (validation during training).
EvalResult evaluate(Engine& engine, const SampleSplit& split, const EvalOptions& options);

// Greedy free-running decoding of one batch input [B, T]: inputs up to the answer's start
// (T - answer_size, at a segment border or inside a segment) are the true ones; from there on each
// prediction is the next input. pred [B, T] gets the predictions at the answer positions (-1
// elsewhere). kv_cache: decode token rows incrementally against cached keys and values instead
// of re-running the segment for every token (same predictions, several times faster).
// schedule diagonal (armt): the segments wholly before the answer, whose inputs are the true
// ones, run by diagonals (Engine::forward_diagonal; the same state bit for bit); the answer's
// segments run one by one.
void decode_greedy(Engine& engine, const int32_t* input, int B, int T,
                   const std::vector<int>& seg_len, int answer_size, bool kv_cache,
                   std::vector<int32_t>& pred, EvalSchedule schedule = EvalSchedule::sequential);

}  // namespace rmt
