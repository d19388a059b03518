// BABILong-style tasks (tasks/babilong.h): options, sample drawing, reading a row back (its
// facts, its answer, what is wrong with it) and showing it.
#include "tasks/babilong.h"

#include <algorithm>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "tasks/dataset.h"
#include "tasks/task_kind.h"

namespace rmt {

namespace {

bool is_person(int64_t id) { return id >= kBabiFirstPerson && id < kBabiFirstPerson + kBabiPeople; }
bool is_move_verb(int64_t id) { return id >= kBabiFirstMoveVerb && id < kBabiFirstMoveVerb + kBabiMoveVerbs; }
bool is_take_verb(int64_t id) { return id >= kBabiFirstTakeVerb && id < kBabiFirstTakeVerb + kBabiTakeVerbs; }
bool is_place(int64_t id) { return id >= kBabiFirstPlace && id < kBabiFirstPlace + kBabiPlaces; }
bool is_object(int64_t id) { return id >= kBabiFirstObject && id < kBabiFirstObject + kBabiObjects; }

constexpr int64_t kCap = int64_t(1) << 62;

// The three kinds share these functions: reasoning moves an object, memorize puts its facts first.
bool is_reasoning(const TaskOptions& t) { return t.kind == "reasoning"; }
bool facts_first(const TaskOptions& t) { return t.kind == "memorize"; }

int64_t sat_mul(int64_t a, int64_t b) { return saturating_mul(a, b); }

int64_t sat_pow(int64_t base, int64_t exponent) {
  int64_t n = 1;
  for (int64_t i = 0; i < exponent && n < kCap; i++) n = sat_mul(n, base);
  return n;
}

// n choose k, saturating (k is small: the facts of a sample).
int64_t sat_choose(int64_t n, int64_t k) {
  using u128 = unsigned __int128;
  u128 c = 1;
  for (int64_t i = 1; i <= k; i++) {
    c = c * u128(n - k + i) / u128(i);  // exact: c is C(n-k+i, i) after each step
    if (c >= u128(kCap)) return kCap;
  }
  return int64_t(c);
}

// One fact: [person, verb, place or object, "."].
struct Fact {
  int64_t person = 0, verb = 0, thing = 0;
  int position = 0;  // where it starts in X (reading a row)
  bool take() const { return is_take_verb(verb); }
};

// The first k of a random permutation of first .. first+n-1 (partial Fisher-Yates; n <= 8).
std::vector<int64_t> draw_distinct(TaskRng& rng, int first, int n, int k) {
  std::vector<int64_t> pool(static_cast<size_t>(n));
  for (int i = 0; i < n; i++) pool[size_t(i)] = first + i;
  for (int i = 0; i < k; i++) std::swap(pool[size_t(i)], pool[size_t(i) + rng.below(uint64_t(n - i))]);
  pool.resize(size_t(k));
  return pool;
}

int64_t draw_move_verb(TaskRng& rng) { return kBabiFirstMoveVerb + int64_t(rng.below(kBabiMoveVerbs)); }
int64_t draw_take_verb(TaskRng& rng) { return kBabiFirstTakeVerb + int64_t(rng.below(kBabiTakeVerbs)); }
int64_t draw_place(TaskRng& rng) { return kBabiFirstPlace + int64_t(rng.below(kBabiPlaces)); }

std::string word_of(const TaskOptions& t, int64_t id) {
  if (id >= 0 && id < kBabiFirstNoise) return babilong_task_words()[size_t(id)];
  if (id >= kBabiFirstNoise && id - kBabiFirstNoise < int64_t(t.noise_vocab.size()))
    return t.noise_vocab[size_t(id - kBabiFirstNoise)];
  return fmt::format("<{}?>", id);
}

bool is_noise(const TaskOptions& t, int64_t id) {
  return id >= kBabiFirstNoise && id - kBabiFirstNoise < int64_t(t.noise_vocab.size());
}

std::string fact_text(const TaskOptions& t, const Fact& f) {
  return fmt::format("'{} {} {} .'", word_of(t, f.person), word_of(t, f.verb), word_of(t, f.thing));
}

// The facts of X in order, read up to the first thing that is not noise or a whole fact; returns
// what stopped it (empty: the whole part before the question read). The question is not read.
std::string read_facts(const TaskOptions& t, const int64_t* x, std::vector<Fact>& facts) {
  const int body = t.length - kBabiQuestionTokens;
  for (int i = 0; i < body;) {
    if (is_noise(t, x[i])) {
      i++;
      continue;
    }
    if (!is_person(x[i]))
      return fmt::format("X[{}] = '{}' is outside a fact (before the question: noise words and whole facts "
                         "[person, verb, place or object, '.'] only)", i, word_of(t, x[i]));
    if (i + kBabiFactTokens > body)
      return fmt::format("the fact starting at X[{}] ('{}') runs into the question at X[{}]", i, word_of(t, x[i]), body);
    Fact f{x[i], x[i + 1], x[i + 2], i};
    if (is_move_verb(f.verb)) {
      if (!is_place(f.thing))
        return fmt::format("X[{}] = '{}' after '{} {}' is not a place", i + 2, word_of(t, f.thing),
                           word_of(t, f.person), word_of(t, f.verb));
    } else if (is_take_verb(f.verb)) {
      if (!is_object(f.thing))
        return fmt::format("X[{}] = '{}' after '{} {}' is not an object", i + 2, word_of(t, f.thing),
                           word_of(t, f.person), word_of(t, f.verb));
    } else {
      return fmt::format("X[{}] = '{}' after the person '{}' is not a verb", i + 1, word_of(t, f.verb),
                         word_of(t, f.person));
    }
    if (x[i + 3] != kBabiPeriod)
      return fmt::format("X[{}] = '{}' ends the fact '{} {} {}' instead of '.'", i + 3, word_of(t, x[i + 3]),
                         word_of(t, f.person), word_of(t, f.verb), word_of(t, f.thing));
    facts.push_back(f);
    i += kBabiFactTokens;
  }
  return "";
}

// The place of `person`'s last move fact, or 0 when there is none.
int64_t last_place(const std::vector<Fact>& facts, int64_t person) {
  int64_t place = 0;
  for (const Fact& f : facts)
    if (f.person == person && !f.take()) place = f.thing;
  return place;
}

}  // namespace

const std::vector<std::string>& babilong_task_words() {
  static const std::vector<std::string> words = {
      ".",         "?",       "where",    "is",                                                  // specials
      "Mary",      "John",    "Daniel",   "Sandra",   "Bill",    "Fred",    "Julie",  "Jeff",     // people
      "went",      "journeyed", "moved",  "travelled",                                            // moves
      "got",       "grabbed", "took",                                                             // takes
      "kitchen",   "garden",  "office",   "bathroom", "hallway", "bedroom", "cellar", "balcony",  // places
      "apple",     "football", "milk",    "ball",     "book",    "key"};                          // objects
  return words;
}

std::vector<std::string> babilong_filler_words(int k) {
  std::vector<std::string> words;
  for (int i = 0; i < k; i++) words.push_back(fmt::format("w{}", i));
  return words;
}

int babilong_fact_count(const TaskOptions& t) { return t.facts + t.distractors; }

int babilong_min_length(const TaskOptions& t) {
  return kBabiFactTokens * babilong_fact_count(t) + kBabiQuestionTokens;
}

void check_babilong_options(const TaskOptions& t, bool cli, const std::string& length_given) {
  auto key = [cli](const char* dashed, const char* underscored) {
    return cli ? fmt::format("--{}", dashed) : fmt::format("options.{}", underscored);
  };
  if (is_reasoning(t)) {
    if (t.facts != 2 && t.facts != 3)
      fail("{} must be 2 or 3 for reasoning (bAbI's two and three supporting facts: a take and one or two moves), "
           "got {}", key("facts", "facts"), t.facts);
  } else if (t.facts != 1) {
    fail("{} {}: {} has one supporting fact ({} 1, or leave it out); reasoning has 2 or 3", key("facts", "facts"),
         t.facts, t.kind, key("facts", "facts"));
  }
  // Each distractor is a fact of another person, each a different one (reasoning's takes are of
  // other objects, too: with more takes than objects left, the rest are moves).
  if (t.distractors < 0) fail("{} must be at least 0 (got {})", key("distractors", "distractors"), t.distractors);
  if (t.distractors > kBabiPeople - 1)
    fail("{} {} is too many: distractors are facts of the other people, one each, and there are {} people besides "
         "the question's, so at most {}", key("distractors", "distractors"), t.distractors, kBabiPeople - 1,
         kBabiPeople - 1);
  if (t.noise != "filler" && t.noise != "text")
    fail("{} must be filler or text (got '{}')", key("noise", "noise"), t.noise);
  if (t.noise_words < 1 || t.noise_words > kBabiMaxNoiseWords)
    fail("{} must be in 1..{} (got {})", key("noise-words", "noise_words"), kBabiMaxNoiseWords, t.noise_words);
  const int minimum = babilong_min_length(t);
  if (t.length < minimum)
    fail("{} is too short for {}: {} fact{} ({} supporting + {} distractors) of {} tokens and the {}-token "
         "question need a length of at least {}", length_given, t.kind, babilong_fact_count(t),
         babilong_fact_count(t) == 1 ? "" : "s", t.facts, t.distractors, kBabiFactTokens, kBabiQuestionTokens, minimum);
  if (t.length > kBabiMaxLength) fail("{} is longer than the most, {}", length_given, kBabiMaxLength);
}

void draw_babilong_sample(const TaskOptions& t, TaskRng& rng, int64_t* x) {
  // The facts: the supporting ones, then the distractors, each about its own person.
  const std::vector<int64_t> people = draw_distinct(rng, kBabiFirstPerson, kBabiPeople, 1 + t.distractors);
  std::vector<Fact> facts;
  int64_t subject = people[0];
  if (is_reasoning(t)) {
    // P takes O and moves facts-1 times, to different places; P's last place is O's.
    const std::vector<int64_t> objects = draw_distinct(rng, kBabiFirstObject, kBabiObjects, kBabiObjects);
    subject = objects[0];
    facts.push_back({people[0], draw_take_verb(rng), objects[0]});
    for (int64_t place : draw_distinct(rng, kBabiFirstPlace, kBabiPlaces, t.facts - 1))
      facts.push_back({people[0], draw_move_verb(rng), place});
    // Distractors: moves, or takes of the other objects (each taken once) while any are left.
    size_t next_object = 1;
    for (int d = 1; d <= t.distractors; d++) {
      if (next_object < objects.size() && rng.below(2))
        facts.push_back({people[size_t(d)], draw_take_verb(rng), objects[next_object++]});
      else
        facts.push_back({people[size_t(d)], draw_move_verb(rng), draw_place(rng)});
    }
  } else {
    for (int64_t person : people) facts.push_back({person, draw_move_verb(rng), draw_place(rng)});
  }
  // A random order: the take before, between or after the moves, the distractors anywhere.
  for (size_t i = facts.size(); i > 1; i--) std::swap(facts[i - 1], facts[rng.below(i)]);

  // The noise: i.i.d. filler words, or a run of the text's words from a random offset (wrapping).
  const int n = int(facts.size()), noise = t.length - babilong_min_length(t);
  std::vector<int64_t> noise_ids(static_cast<size_t>(noise));
  if (t.noise == "text") {
    const std::vector<int32_t>& words = t.noise_source->words;
    size_t at = size_t(rng.below(words.size()));
    for (int64_t& id : noise_ids) {
      id = kBabiFirstNoise + words[at];
      at = at + 1 == words.size() ? 0 : at + 1;
    }
  } else {
    for (int64_t& id : noise_ids) id = kBabiFirstNoise + int64_t(rng.below(uint64_t(t.noise_words)));
  }

  // Where the facts go: memorize first; otherwise n of the noise + n units, a uniform random
  // subset (Floyd's algorithm), so facts never overlap and any gap is possible.
  std::vector<char> fact_here(static_cast<size_t>(noise + n), 0);
  if (facts_first(t)) {
    std::fill(fact_here.begin(), fact_here.begin() + n, 1);
  } else {
    for (int j = noise; j < noise + n; j++) {
      const size_t pick = size_t(rng.below(uint64_t(j) + 1));
      fact_here[fact_here[pick] ? size_t(j) : pick] = 1;
    }
  }
  int at = 0;
  size_t next_fact = 0, next_noise = 0;
  for (char is_fact : fact_here) {
    if (is_fact) {
      const Fact& f = facts[next_fact++];
      for (int64_t id : {f.person, f.verb, f.thing, int64_t(kBabiPeriod)}) x[at++] = id;
    } else {
      x[at++] = noise_ids[next_noise++];
    }
  }
  for (int64_t id : {int64_t(kBabiWhere), int64_t(kBabiIs), subject, int64_t(kBabiQuestionMark)}) x[at++] = id;
}

void babilong_target_from_x(const TaskOptions& t, const int64_t* x, int64_t* y) {
  std::vector<Fact> facts;
  read_facts(t, x, facts);  // an invalid row keeps the facts read before the problem
  const int64_t subject = x[t.length - 2];
  int64_t person = subject;
  if (is_reasoning(t)) {
    // The object is where the person who took it last was.
    person = -1;
    for (const Fact& f : facts)
      if (f.take() && f.thing == subject && person < 0) person = f.person;
  }
  y[0] = last_place(facts, person);
}

std::string babilong_row_problem(const TaskOptions& t, const int64_t* x) {
  std::vector<Fact> facts;
  const std::string unread = read_facts(t, x, facts);
  if (!unread.empty()) return unread;
  const int q = t.length - kBabiQuestionTokens;
  const bool reasoning = is_reasoning(t);
  if (x[q] != kBabiWhere || x[q + 1] != kBabiIs || x[q + 3] != kBabiQuestionMark ||
      !(reasoning ? is_object(x[q + 2]) : is_person(x[q + 2])))
    return fmt::format("the question X[{}..{}] is '{} {} {} {}', expected 'where is {} ?'", q, q + 3, word_of(t, x[q]),
                       word_of(t, x[q + 1]), word_of(t, x[q + 2]), word_of(t, x[q + 3]),
                       reasoning ? "OBJECT" : "PERSON");
  const int64_t subject = x[q + 2];
  const int want = babilong_fact_count(t);
  if (int(facts.size()) != want)
    return fmt::format("{} facts, but meta.yaml's options give {} ({} supporting + {} distractors)", facts.size(), want,
                       t.facts, t.distractors);
  if (facts_first(t))
    for (size_t k = 0; k < facts.size(); k++)
      if (facts[k].position != int(k) * kBabiFactTokens)
        return fmt::format("fact {} starts at X[{}]: memorize has its facts first, at X[0..{}]", k, facts[k].position,
                           want * kBabiFactTokens - 1);
  int64_t person = subject;  // the question's person (reasoning: the one who takes the object)
  if (reasoning) {
    person = -1;
    for (const Fact& f : facts)
      if (f.take() && f.thing == subject) {
        if (person >= 0) return fmt::format("'{}' is taken twice", word_of(t, subject));
        person = f.person;
      }
    if (person < 0) return fmt::format("no fact says who took '{}', the question's object", word_of(t, subject));
  }
  // The supporting facts: all of the person's. Every other fact is a distractor, one per person.
  std::vector<int64_t> places;
  int takes = 0;
  std::vector<bool> seen(size_t(kBabiFirstNoise), false);
  for (const Fact& f : facts) {
    if (f.person == person) {
      if (f.take()) takes++;
      else places.push_back(f.thing);
      continue;
    }
    if (seen[size_t(f.person)]) return fmt::format("'{}' has two distractor facts", word_of(t, f.person));
    seen[size_t(f.person)] = true;
    if (f.take()) {
      if (!reasoning) return fmt::format("{} is a take fact; {} has move facts only", fact_text(t, f), t.kind);
      if (seen[size_t(f.thing)]) return fmt::format("'{}' is taken twice", word_of(t, f.thing));
      seen[size_t(f.thing)] = true;
    }
  }
  const int moves = reasoning ? t.facts - 1 : 1;
  if (int(places.size()) != moves || takes != (reasoning ? 1 : 0))
    return fmt::format("'{}' has {} move and {} take facts; {} with {} supporting facts has {} and {}",
                       word_of(t, person), places.size(), takes, t.kind, t.facts, moves, reasoning ? 1 : 0);
  if (places.size() == 2 && places[0] == places[1])
    return fmt::format("'{}' moves to '{}' twice; the two moves go to different places", word_of(t, person),
                       word_of(t, places[0]));
  return "";
}

int64_t babilong_max_unique_samples(const TaskOptions& t) {
  const int n = babilong_fact_count(t), noise = t.length - babilong_min_length(t);
  // The sets of facts (distractors counted as moves only: a lower bound for reasoning).
  const int64_t move_facts = kBabiMoveVerbs * kBabiPlaces;
  int64_t sets = sat_mul(sat_choose(kBabiPeople - 1, t.distractors), sat_pow(move_facts, t.distractors));
  if (is_reasoning(t)) {
    const int64_t moves = t.facts == 2 ? move_facts : move_facts * (move_facts - kBabiMoveVerbs) / 2;
    sets = sat_mul(sets, sat_mul(int64_t(kBabiPeople) * kBabiObjects * kBabiTakeVerbs, moves));
  } else {
    sets = sat_mul(sets, kBabiPeople * move_facts);
  }
  int64_t orders = 1;
  for (int k = 2; k <= n; k++) orders = sat_mul(orders, k);
  const int64_t placements = facts_first(t) ? 1 : sat_choose(noise + n, n);
  // Noise: any filler sequence; a text gives at most one run per word offset.
  int64_t runs = sat_pow(int64_t(t.noise_vocab.size()), noise);
  if (t.noise == "text" && t.noise_source && noise > 0) runs = std::min<int64_t>(runs, int64_t(t.noise_source->words.size()));
  return sat_mul(sat_mul(sets, orders), sat_mul(placements, runs));
}

std::string babilong_show_x(const std::vector<std::string>& vocab, const int64_t* x, int n, int keep_noise) {
  auto word = [&](int64_t id) {
    return id >= 0 && id < int64_t(vocab.size()) ? vocab[size_t(id)] : fmt::format("<{}?>", id);
  };
  std::string out;
  for (int i = 0; i < n;) {
    int run = 0;
    while (i + run < n && x[i + run] >= kBabiFirstNoise && x[i + run] < int64_t(vocab.size())) run++;
    const int shown = run > keep_noise ? keep_noise / 2 : run;
    for (int k = 0; k < shown; k++) out += (out.empty() ? "" : " ") + word(x[i + k]);
    if (run > shown) out += fmt::format("{}… {} more noise words …", out.empty() ? "" : " ", run - shown);
    if (run > 0) {
      i += run;
      continue;
    }
    out += (out.empty() ? "" : " ") + word(x[i]);
    i++;
  }
  return out;
}

// ---- the task table's functions ----------------------------------------------------------

int babilong_len_x(const TaskOptions& t) { return t.length; }
int babilong_len_y(const TaskOptions&) { return 1; }  // the answer, a place
int babilong_answer_size(const TaskOptions&) { return 1; }

std::vector<std::string> babilong_vocab(const TaskOptions& t) {
  std::vector<std::string> v = babilong_task_words();
  v.insert(v.end(), t.noise_vocab.begin(), t.noise_vocab.end());
  return v;
}

void babilong_draw(const TaskOptions& t, TaskRng& rng, int64_t* x, int64_t* y) {
  draw_babilong_sample(t, rng, x);
  babilong_target_from_x(t, x, y);
}

void babilong_resolve_options(TaskOptions& t, const TaskArgs& a) {
  if (a.length && (a.segments || a.segment_length))
    fail("--length and --segments/--segment-length both give the length (length = segments x segment length); "
         "give one of them");
  if (a.segments.has_value() != a.segment_length.has_value())
    fail("--{} needs --{} too: the length is segments x segment length", a.segments ? "segments" : "segment-length",
         a.segments ? "segment-length" : "segments");
  if (a.segments) {
    if (*a.segments < 1 || *a.segment_length < 1)
      fail("--segments and --segment-length must be at least 1 (got {} and {})", *a.segments, *a.segment_length);
    const int64_t length = int64_t(*a.segments) * *a.segment_length;
    if (length > kBabiMaxLength)
      fail("--segments {} x --segment-length {} = {} is longer than the most, {}", *a.segments, *a.segment_length,
           length, kBabiMaxLength);
    t.length = int(length);
  }
  if (a.length) t.length = *a.length;
  const bool reasoning = is_reasoning(t);
  t.facts = a.facts.value_or(reasoning ? 2 : 1);
  t.distractors = a.distractors.value_or(reasoning ? 2 : 0);
  t.noise = a.noise.value_or("filler");
  if (t.noise != "filler" && t.noise != "text") fail("--noise must be filler or text (got '{}')", t.noise);
  if (t.noise == "text" && !a.noise_text)
    fail("--noise text needs --noise-text FILE: the text whose words are the noise");
  if (t.noise == "filler" && a.noise_text)
    fail("--noise-text is the file of --noise text; add --noise text (the default noise, filler, reads no file)");
  t.noise_words = a.noise_words.value_or(t.noise == "text" ? kBabiDefaultTextWords : kBabiDefaultFillerWords);
  // Everything but the file first: a bad option is named before a big file is read.
  check_babilong_options(t, true,
                         a.segments ? fmt::format("--segments {} x --segment-length {} = {}", *a.segments,
                                                  *a.segment_length, t.length)
                                    : fmt::format("--length {}", t.length));
  if (t.noise == "filler") {
    t.noise_vocab = babilong_filler_words(t.noise_words);
  } else {
    t.noise_source = load_babilong_noise_text(*a.noise_text, t.noise_words);
    t.noise_vocab = t.noise_source->vocab;
    t.noise_text = t.noise_source->name;
    t.noise_text_sha256 = t.noise_source->sha256;
  }
}

void babilong_check_meta_options(const TaskOptions& t) {
  check_babilong_options(t, false, fmt::format("options.length {}", t.length));
}

void babilong_finish_from_meta(TaskOptions& t, const DatasetMeta& meta) {
  t.noise_text = meta.noise_text;
  t.noise_text_sha256 = meta.noise_text_sha256;
  t.noise_vocab.clear();
  if (t.noise == "text") {
    // A text's words are what meta.yaml records (check_meta_values judges them); "<unk>" last.
    for (int i = 0; i < std::max(0, t.noise_words); i++) {
      const size_t id = size_t(kBabiFirstNoise + i);
      t.noise_vocab.push_back(id < meta.vocab.size() ? meta.vocab[id] : "<missing>");
    }
    t.noise_vocab.push_back("<unk>");
  } else {
    t.noise_vocab = babilong_filler_words(std::max(0, t.noise_words));
  }
}

std::string babilong_check_row(const TaskOptions& t, const DatasetMeta& meta, const int64_t* x, const int64_t* y) {
  std::string why = babilong_row_problem(t, x);
  if (!why.empty()) return why;
  int64_t want = 0;
  babilong_target_from_x(t, x, &want);
  if (y[0] != want)
    return fmt::format("y[0] = {} ('{}'), but the facts say {} ('{}')", y[0], meta.vocab[size_t(y[0])], want,
                       meta.vocab[size_t(want)]);
  return "";
}

std::string babilong_show_row(const DatasetMeta& meta, const int64_t* x, int cx, const int64_t* y, int cy) {
  // Words; long runs of noise abbreviated, so that the facts and the question stand out.
  return fmt::format("X: {}   y: {}", babilong_show_x(meta.vocab, x, cx), decode_ids(meta, y, cy));
}

std::string babilong_generated_summary(const TaskOptions& t) {
  return fmt::format(", length {}, {} + {} distractor facts, {} noise of {} words{}", t.length, t.facts, t.distractors,
                     t.noise, t.noise_words, t.noise == "text" ? fmt::format(" (+ <unk>) from {}", t.noise_text) : "");
}

}  // namespace rmt
