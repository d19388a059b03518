// MAD's fuzzy in-context recall (tasks/mad.h): mad-lab's generate_fuzzy_in_context_recall_instance
// (mad/data/instances.py:186-347) with multi_query=True and is_training=True (keys of every motif
// size), the baseline of configs/tasks/fuzzy-in-context-recall.yml.
#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"
#include "tasks/mad.h"

namespace rmt {

namespace {

using Motif = std::vector<int64_t>;

// mad-lab's ids (:222-227, :250 with multi_query): N = V - 1 - noise ids, keys 0..N/2-1, values
// N/2..N-1, the noise ids N..V-2, the pad V-1.
struct FuzzyIds {
  int64_t keys, plain, pad;
  explicit FuzzyIds(const TaskOptions& t)
      : keys((t.vocab_size - 1 - t.noise_vocab_size) / 2), plain(t.vocab_size - 1 - t.noise_vocab_size),
        pad(t.vocab_size - 1) {}
  // 0 key, 1 value, 2 noise, 3 pad.
  int kind(int64_t id) const { return id < keys ? 0 : id < plain ? 1 : id < pad ? 2 : 3; }
};

// A uniform ordered choice of `size` distinct ids of lo..lo+count-1: what rng.choice over mad-lab's
// shuffled list of every permutation of that size gives (:11-26, :255), without the list.
Motif motif(TaskRng& rng, int64_t lo, int64_t count, int size) {
  Motif m;
  while (int(m.size()) < size) {
    const int64_t id = lo + int64_t(rng.below(uint64_t(count)));
    if (std::find(m.begin(), m.end(), id) == m.end()) m.push_back(id);
  }
  return m;
}

// The maximal run of ids of one kind from p.
int run_end(const FuzzyIds& ids, const int64_t* x, int p, int len) {
  const int k = ids.kind(x[p]);
  while (p < len && ids.kind(x[p]) == k) ++p;
  return p;
}

bool distinct(const int64_t* x, int a, int b) {
  for (int i = a; i < b; ++i)
    if (std::find(x + i + 1, x + b, x[i]) != x + b) return false;
  return true;
}

}  // namespace

int mad_fuzzy_len(const TaskOptions& t) { return t.length; }

// A lower bound: the loop runs at least ceil((L - 2(km+vm)) / (km+vm)) rounds (each adds at most
// km+vm ids until length - probe - (km+vm)), one of them the probe's; each round's key may be any
// of at least K (the key ids), and the probe's value any of the value ids.
int64_t mad_fuzzy_max_unique(const TaskOptions& t) {
  const FuzzyIds ids(t);
  const int most = t.k_motif_size + t.v_motif_size, rounds = (t.length - 2 * most + most - 1) / most;
  int64_t n = ids.plain - ids.keys;
  for (int r = 0; r < rounds; ++r) n = saturating_mul(n, ids.keys);
  return n;
}

void mad_fuzzy_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  const FuzzyIds ids(t);
  const int L = t.length, km = t.k_motif_size, vm = t.v_motif_size;
  const double frac = mad_frac_noise(t);
  std::vector<int64_t> seq;
  // mad-lab adds the probe pair once the sequence reaches probe_idx (:274), but probe_idx may lie
  // past where the loop stops (:258 against :267): its final query then asks a key the sequence
  // never showed. Such a draw is drawn again, so a sample is mad-lab's given the probe is shown.
  for (bool probe_added = false; !probe_added;) {
    seq.clear();
    // The sizes (:253-254, :270-271); longest: mad-lab's test instances, every key k_motif_size ids
    // (:238-240, :253, :270).
    const bool longest = t.key_motifs == "longest";
    const int kp = longest ? km : 1 + int(rng.below(uint64_t(km))), vp = 1 + int(rng.below(uint64_t(vm)));
    const Motif k_probe = motif(rng, 0, ids.keys, kp), v_probe = motif(rng, ids.keys, ids.plain - ids.keys, vp);
    const int probe_idx = int(rng.below(uint64_t(L - 2 * (kp + vp))));  // :258
    const size_t limit = size_t(L - (kp + vp) - (km + vm));              // :267
    std::map<Motif, Motif> value_of;  // kv_map and keys_presented (:262-264)
    while (seq.size() < limit) {
      const int ks = longest ? km : 1 + int(rng.below(uint64_t(km))), vs = 1 + int(rng.below(uint64_t(vm)));
      if (!probe_added && seq.size() >= size_t(probe_idx)) {  // :274-281
        seq.insert(seq.end(), k_probe.begin(), k_probe.end());
        seq.insert(seq.end(), v_probe.begin(), v_probe.end());
        value_of[k_probe] = v_probe;
        probe_added = true;
        continue;
      }
      if (frac > 0 && rng.unit() < frac) {  // :284-291: noise as long as the pair would be
        for (int i = 0; i < ks + vs; ++i) seq.push_back(ids.plain + int64_t(rng.below(uint64_t(t.noise_vocab_size))));
        continue;
      }
      const Motif k = motif(rng, 0, ids.keys, ks);  // :296-309
      auto it = value_of.find(k);
      if (k == k_probe) probe_added = true;
      else if (it == value_of.end()) it = value_of.emplace(k, motif(rng, ids.keys, ids.plain - ids.keys, vs)).first;
      const Motif& v = k == k_probe ? v_probe : it->second;
      seq.insert(seq.end(), k.begin(), k.end());
      seq.insert(seq.end(), v.begin(), v.end());
    }
    if (!probe_added) continue;
    seq.insert(seq.end(), k_probe.begin(), k_probe.end());  // :324-327, the final query
    seq.insert(seq.end(), v_probe.begin(), v_probe.end());
  }
  // Left-padded to length + 1 (:338-341), X the first length ids (:345).
  const int pad = L + 1 - int(seq.size());
  for (int p = 0; p < L; ++p) x[p] = p < pad ? ids.pad : seq[size_t(p - pad)];
  mad_fuzzy_target(t, x, y);
}

// multi_query's targets (:311-319, :331-332) shifted by one (:345): a key seen in an earlier pair
// scores its value's ids, each at the position before it (the key's last id predicts the first);
// the final query's value runs one past X, so its ids come from the earlier pair.
void mad_fuzzy_target(const TaskOptions& t, const int64_t* x, int64_t* y) {
  const FuzzyIds ids(t);
  const int L = t.length;
  std::fill(y, y + L, int64_t(-1));
  std::map<Motif, Motif> value_of;
  for (int p = 0; p < L;) {
    if (ids.kind(x[p]) != 0) {  // pad, noise, or a value without its key (row_problem names it)
      p = run_end(ids, x, p, L);
      continue;
    }
    const int b = run_end(ids, x, p, L);
    const int c = b < L && ids.kind(x[b]) == 1 ? run_end(ids, x, b, L) : b;
    const Motif key(x + p, x + b);
    if (auto it = value_of.find(key); it != value_of.end()) {
      for (size_t j = 0; j < it->second.size() && b - 1 + int(j) < L; ++j) y[b - 1 + int(j)] = it->second[j];
    } else if (c < L) {
      value_of.emplace(key, Motif(x + b, x + c));
    }
    p = c;
  }
  // next: mad-lab's training targets, inputs[1:] (:343-345): every next input, pads included.
  if (t.targets == "next") std::copy(x + 1, x + L, y);
}

std::string mad_fuzzy_row_problem(const TaskOptions& t, const DatasetMeta&, const int64_t* x, const int64_t*) {
  const FuzzyIds ids(t);
  const int L = t.length;
  const bool noisy = mad_frac_noise(t) > 0;
  int p = 0;
  while (p < L && x[p] == ids.pad) ++p;
  // At most length - 1 ids before the padding (the loop stops length - 1 - its probe's ids in).
  if (p < 2) return fmt::format("X starts with {} pad ids ({}), expected at least 2", p, ids.pad);
  std::map<Motif, Motif> value_of;
  bool query = false;
  while (p < L) {
    const int k = ids.kind(x[p]), e = run_end(ids, x, p, L);
    if (k == 3) return fmt::format("X[{}] = {}, the pad id, after the sequence began", p, x[p]);
    if (k == 2) {
      if (!noisy) return fmt::format("X[{}] = {} is a noise id, but frac_noise is 0", p, x[p]);
      if (e == L) return "X ends in noise: the last pair is the query";
      p = e;
      continue;
    }
    if (k == 1) return fmt::format("X[{}] = {} starts a value with no key before it", p, x[p]);
    if (e - p > t.k_motif_size || !distinct(x, p, e))
      return fmt::format("the key at X[{}..{}] is not 1..{} distinct key ids", p, e - 1, t.k_motif_size);
    if (t.key_motifs == "longest" && e - p != t.k_motif_size)
      return fmt::format("the key at X[{}..{}] is not {} ids long (key_motifs longest)", p, e - 1, t.k_motif_size);
    const int c = e < L && ids.kind(x[e]) == 1 ? run_end(ids, x, e, L) : e;
    const Motif key(x + p, x + e), value(x + e, x + c);
    const auto it = value_of.find(key);
    if (c == L) {  // the final query: its value is one id short, the last a target only
      if (it == value_of.end()) return fmt::format("the query's key at X[{}..{}] is in no earlier pair", p, e - 1);
      if (value.size() + 1 != it->second.size() || !std::equal(value.begin(), value.end(), it->second.begin()))
        return fmt::format("the query's value at X[{}..] is not its key's earlier value but its last id", e);
      query = true;
      break;
    }
    if (c == e) return fmt::format("the key at X[{}..{}] has no value after it", p, e - 1);
    if (c - e > t.v_motif_size || !distinct(x, e, c))
      return fmt::format("the value at X[{}..{}] is not 1..{} distinct value ids", e, c - 1, t.v_motif_size);
    if (it != value_of.end() && it->second != value)
      return fmt::format("the key at X[{}..{}] has another value than before: a key's value is fixed in a sample",
                         p, e - 1);
    value_of.emplace(key, value);
    p = c;
  }
  if (!query) return "no final query: X should end with a key seen before and its value but the last id";
  return "";
}

void mad_fuzzy_resolve_options(TaskOptions& t, const TaskArgs& a) {
  // configs/tasks/fuzzy-in-context-recall.yml's baseline; noise as the generator's defaults (:195-196).
  t.vocab_size = a.vocab_size.value_or(16);
  t.length = a.length.value_or(128);
  t.k_motif_size = a.k_motif_size.value_or(3);
  t.v_motif_size = a.v_motif_size.value_or(3);
  t.noise_vocab_size = a.noise_vocab_size.value_or(0);
  t.frac_noise = a.frac_noise.value_or("0");
  t.targets = a.targets.value_or("scored");
  t.key_motifs = a.key_motifs.value_or("any");
  mad_finish_options(t);
}

}  // namespace rmt
