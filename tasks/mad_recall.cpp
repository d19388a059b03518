// MAD's in-context recall and noisy in-context recall (tasks/mad.h): mad-lab's
// generate_in_context_recall_instance (mad/data/instances.py:31-140) with multi_query=True, the
// setting of every mad-lab config (configs/tasks/in-context-recall.yml, noisy-in-context-recall.yml;
// MADConfig.multi_query, mad/configs.py:42).
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"
#include "tasks/mad.h"

namespace rmt {

namespace {

// mad-lab's ids (instances.py:63-73 with multi_query): N = V - noise ids for keys 0..N/2-1 and
// values N/2..N-1, the noise ids N..V-1 after them.
struct RecallIds {
  int64_t keys, plain;  // K = N/2 key ids; N
  explicit RecallIds(const TaskOptions& t) : keys((t.vocab_size - t.noise_vocab_size) / 2),
                                             plain(t.vocab_size - t.noise_vocab_size) {}
  bool key(int64_t id) const { return id < keys; }
  bool value(int64_t id) const { return id >= keys && id < plain; }
};

// Defaults: the baselines of configs/tasks/in-context-recall.yml and noisy-in-context-recall.yml.
struct RecallDefaults {
  int vocab, length, noise_vocab;
  const char* frac_noise;
};
RecallDefaults recall_defaults(const std::string& kind) {
  if (kind == "mad_noisy_recall") return {32, 128, 16, "0.2"};
  return {16, 128, 0, "0"};
}

}  // namespace

// mad-lab's inputs[:-1] (instances.py:140): the final value is only a target.
int mad_recall_len(const TaskOptions& t) { return t.length - 1; }

// A lower bound: each sequence of the length/2 - 1 keys before the query, and each value of the
// first, gives another X (noise only adds to them).
int64_t mad_recall_max_unique(const TaskOptions& t) {
  const RecallIds ids(t);
  int64_t n = ids.plain - ids.keys;
  for (int i = 0; i < t.length / 2 - 1; ++i) n = saturating_mul(n, ids.keys);
  return n;
}

void mad_recall_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  const RecallIds ids(t);
  const int pairs = t.length / 2;  // num_kv_pairs (:81); the last is the query
  const double frac = mad_frac_noise(t);
  // mad-lab's not_noise_idx = rng.choice(num_kv_pairs) (:82) may be the query's, which the loop
  // never reaches (:83): every pair may then be noise, leaving the query no key (choice of an empty
  // list raises, :120). Here it is one of the loop's pairs.
  const int kept = int(rng.below(uint64_t(pairs - 1)));
  std::vector<int64_t> value_of(size_t(ids.keys), -1);
  std::vector<int64_t> presented;  // keys_presented's keys, in the order they came (:117)
  int p = 0;
  for (int i = 0; i < pairs - 1; ++i) {
    const bool noise = frac > 0 && i != kept && rng.unit() < frac;  // :86
    if (noise) {  // :89-92: two noise ids, drawn with replacement
      for (int j = 0; j < 2; ++j) x[p++] = ids.plain + int64_t(rng.below(uint64_t(t.noise_vocab_size)));
      continue;
    }
    const int64_t k = int64_t(rng.below(uint64_t(ids.keys)));  // :97
    if (value_of[size_t(k)] < 0) {                              // :99-103: a key's value is fixed at its first
      value_of[size_t(k)] = ids.keys + int64_t(rng.below(uint64_t(ids.plain - ids.keys)));
      presented.push_back(k);
    }
    x[p++] = k;
    x[p++] = value_of[size_t(k)];
  }
  // The query (:120-126): a key presented before, uniformly; its value is the last input, dropped.
  x[p] = presented[size_t(rng.below(presented.size()))];
  mad_recall_target(t, x, y);
}

// multi_query's targets (:108-115, :130-131), shifted by one (targets[1:], :140): at a key seen in
// an earlier pair, its value; -1 elsewhere.
void mad_recall_target(const TaskOptions& t, const int64_t* x, int64_t* y) {
  const RecallIds ids(t);
  const int len = mad_recall_len(t);
  std::vector<int64_t> value_of(size_t(ids.keys), -1);
  std::fill(y, y + len, int64_t(-1));
  for (int p = 0; p < len; p += 2) {
    if (!ids.key(x[p])) continue;  // a noise pair
    int64_t& v = value_of[size_t(x[p])];
    if (v >= 0) y[p] = v;
    else if (p + 1 < len) v = x[p + 1];
  }
  // next: mad-lab's training targets, inputs[1:] (:136-138): every next input, the query's value last.
  if (t.targets == "next") std::copy(x + 1, x + len, y);
}

std::string mad_recall_row_problem(const TaskOptions& t, const DatasetMeta&, const int64_t* x, const int64_t*) {
  const RecallIds ids(t);
  const int len = mad_recall_len(t);
  const bool noisy = mad_frac_noise(t) > 0;
  std::vector<int64_t> value_of(size_t(ids.keys), -1);
  for (int p = 0; p + 1 < len; p += 2) {
    const int64_t k = x[p], v = x[p + 1];
    if (!ids.key(k) && !ids.value(k)) {  // a noise id
      if (!noisy) return fmt::format("X[{}] = {} is a noise id, but frac_noise is 0", p, k);
      if (v < ids.plain)
        return fmt::format("X[{}] = {} after the noise id X[{}]: a noise pair is two noise ids ({}..{})", p + 1, v,
                           p, ids.plain, t.vocab_size - 1);
      continue;
    }
    if (!ids.key(k))
      return fmt::format("X[{}] = {} is not a key id (0..{}): pairs start at even positions", p, k, ids.keys - 1);
    if (!ids.value(v))
      return fmt::format("X[{}] = {} after key {} is not a value id ({}..{})", p + 1, v, k, ids.keys, ids.plain - 1);
    int64_t& seen = value_of[size_t(k)];
    if (seen >= 0 && seen != v)
      return fmt::format("key {} has value {} at X[{}] but {} before: a key's value is fixed in a sample", k, v, p + 1,
                         seen);
    seen = v;
  }
  const int64_t q = x[len - 1];
  if (!ids.key(q)) return fmt::format("X[{}] = {}, the query, is not a key id (0..{})", len - 1, q, ids.keys - 1);
  if (value_of[size_t(q)] < 0)
    return fmt::format("the query's key {} (X[{}]) is in no earlier pair", q, len - 1);
  return "";
}

void mad_recall_resolve_options(TaskOptions& t, const TaskArgs& a) {
  const RecallDefaults d = recall_defaults(t.kind);
  t.vocab_size = a.vocab_size.value_or(d.vocab);
  t.length = a.length.value_or(d.length);
  t.noise_vocab_size = a.noise_vocab_size.value_or(d.noise_vocab);
  t.frac_noise = a.frac_noise.value_or(d.frac_noise);
  t.targets = a.targets.value_or("scored");
  mad_finish_options(t);
}

}  // namespace rmt
