#pragma once
// BABILong-style tasks (Bulatov et al. 2023, "Scaling Transformer to 1M tokens and beyond with
// RMT"): bAbI-like facts hidden in long irrelevant text, a question at the end that needs them.
//   memorize         the facts first, then noise, then "where is P ?"
//   detect_memorize  the same facts, each at a random position inside the noise
//   reasoning        P takes object O and moves (once or twice); "where is O ?" = P's last place
// Word-level tokens. The vocabulary is the fixed task words (below) then the noise words, and
// does not depend on the length or the seed: a model trained on one length is evaluated on
// datasets of other lengths (`rmt eval --data`). docs/datasets.md, "BABILong-style tasks".
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tasks/rng.h"

namespace rmt {

struct DatasetMeta;
struct TaskArgs;
struct TaskOptions;

// The fixed task words, in vocabulary order: ids are positions in this list.
constexpr int kBabiPeriod = 0, kBabiQuestionMark = 1, kBabiWhere = 2, kBabiIs = 3;
constexpr int kBabiPeople = 8, kBabiMoveVerbs = 4, kBabiTakeVerbs = 3, kBabiPlaces = 8, kBabiObjects = 6;
constexpr int kBabiFirstPerson = 4;
constexpr int kBabiFirstMoveVerb = kBabiFirstPerson + kBabiPeople;        // 12
constexpr int kBabiFirstTakeVerb = kBabiFirstMoveVerb + kBabiMoveVerbs;   // 16
constexpr int kBabiFirstPlace = kBabiFirstTakeVerb + kBabiTakeVerbs;      // 19
constexpr int kBabiFirstObject = kBabiFirstPlace + kBabiPlaces;           // 27
constexpr int kBabiFirstNoise = kBabiFirstObject + kBabiObjects;          // 33: noise words from here
constexpr int kBabiFactTokens = 4;      // [person, verb, place or object, "."]
constexpr int kBabiQuestionTokens = 4;  // ["where", "is", subject, "?"]
// Noise vocabulary sizes: filler words w0.. (default 32), the most frequent words of a text (500).
constexpr int kBabiDefaultFillerWords = 32, kBabiDefaultTextWords = 500, kBabiMaxNoiseWords = 65536;
constexpr int kBabiDefaultLength = 64, kBabiMaxLength = 100000;
constexpr int kBabiMaxFacts = 3;  // reasoning's three supporting facts (bAbI's qa3)

// The fixed task words: ".", "?", "where", "is", the people, verbs, places and objects.
const std::vector<std::string>& babilong_task_words();
// "w0" .. "w{k-1}": the filler noise vocabulary.
std::vector<std::string> babilong_filler_words(int k);

// The noise of `--noise text --noise-text FILE`: its K most frequent words (ties alphabetical),
// the task's own words excluded, then "<unk>"; and the whole file as indices into that list
// (words outside it are <unk>), from which each sample's noise is a contiguous run.
struct BabilongNoiseText {
  std::string name, sha256;        // the file's name (no directories) and the sha256 of its bytes
  std::vector<std::string> vocab;  // K words, then "<unk>"
  std::vector<int32_t> words;      // the file's words as indices into vocab
};
// Fails (rmt::Error) for a file that cannot be read, has no words, or fewer than k distinct usable ones.
std::shared_ptr<const BabilongNoiseText> load_babilong_noise_text(const std::string& path, int k);
// Why a recorded text-noise vocabulary (the words after the task's own, "<unk>" last) could not
// have come from a text; empty when it could.
std::string babilong_noise_vocab_problem(const std::vector<std::string>& noise_vocab);

// The options' constraints together (facts, distractors, noise, length against the facts):
// fails naming the option as `cli` spells it (--distractors) or as meta.yaml does
// (options.distractors); `length_given` says how the length was given ("--length 20").
void check_babilong_options(const TaskOptions& t, bool cli, const std::string& length_given);
// Facts in a sample: supporting plus distractors.
int babilong_fact_count(const TaskOptions& t);
// The shortest X that holds every fact and the question.
int babilong_min_length(const TaskOptions& t);

void draw_babilong_sample(const TaskOptions& t, TaskRng& rng, int64_t* x);
// y[0] = the place the facts of X imply (0 when X has no such fact: only for invalid rows).
void babilong_target_from_x(const TaskOptions& t, const int64_t* x, int64_t* y);
// What is wrong with X (facts, noise, question, fact counts); empty when it is a valid row.
std::string babilong_row_problem(const TaskOptions& t, const int64_t* x);
// How many distinct X rows the task can produce, about: a lower bound for the facts, times the
// noise's possibilities (saturates at 2^62).
int64_t babilong_max_unique_samples(const TaskOptions& t);
// X as words, runs of more than `keep_noise` noise words abbreviated ("w3 w7 … 57 noise words …").
std::string babilong_show_x(const std::vector<std::string>& vocab, const int64_t* x, int n, int keep_noise = 6);

// The task table's functions (tasks/task_kind.h).
int babilong_len_x(const TaskOptions& t);
int babilong_len_y(const TaskOptions& t);
int babilong_answer_size(const TaskOptions& t);
std::vector<std::string> babilong_vocab(const TaskOptions& t);  // the task words, then the noise words
void babilong_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y);
void babilong_resolve_options(TaskOptions& t, const TaskArgs& a);
void babilong_check_meta_options(const TaskOptions& t);
void babilong_finish_from_meta(TaskOptions& t, const DatasetMeta& meta);
std::string babilong_check_row(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y);
std::string babilong_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy);
std::string babilong_generated_summary(const TaskOptions& t);

}  // namespace rmt
