// The text noise of the BABILong-style tasks (`--noise text --noise-text FILE`, tasks/babilong.h):
// a file's words, its most frequent ones as the noise vocabulary.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "tasks/babilong.h"

namespace rmt {

namespace {

// The task's own words as a text would spell them (lowercase); never noise, so that noise can
// never be read as a fact or a question.
const std::set<std::string>& task_words_lowercase() {
  static const std::set<std::string> words = [] {
    std::set<std::string> out;
    for (std::string w : babilong_task_words()) {
      for (char& c : w) c = char(std::tolower(static_cast<unsigned char>(c)));
      out.insert(w);
    }
    return out;
  }();
  return words;
}

// Calls `on_word` for every word of `bytes`: a run of ASCII letters, lowercased; any other byte
// separates words.
template <typename OnWord>
void for_each_word(const std::string& bytes, OnWord on_word) {
  std::string word;
  for (char c : bytes) {
    const char lower = (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c;
    if (lower >= 'a' && lower <= 'z') {
      word += lower;
    } else if (!word.empty()) {
      on_word(word);
      word.clear();
    }
  }
  if (!word.empty()) on_word(word);
}

}  // namespace

std::shared_ptr<const BabilongNoiseText> load_babilong_noise_text(const std::string& path, int k) {
  require_regular_file(path, "--noise-text");
  const std::string bytes = read_file(path);
  auto text = std::make_shared<BabilongNoiseText>();
  text->name = std::filesystem::path(path).filename().string();
  text->sha256 = sha256_hex(bytes);

  std::unordered_map<std::string, int64_t> counts;
  int64_t total = 0;
  for_each_word(bytes, [&](const std::string& w) {
    counts[w]++;
    total++;
  });
  if (total == 0) fail("--noise-text {} has no words (runs of the letters a-z): nothing to make noise of", path);
  std::vector<std::pair<int64_t, std::string>> usable;  // (-count, word): most frequent first, ties alphabetical
  for (auto& [w, n] : counts)
    if (!task_words_lowercase().count(w)) usable.push_back({-n, w});
  if (int64_t(usable.size()) < k)
    fail("--noise-text {} has {} distinct words besides the task's own, fewer than --noise-words {}: give a longer "
         "text or a smaller --noise-words", path, usable.size(), k);
  std::partial_sort(usable.begin(), usable.begin() + k, usable.end());

  std::unordered_map<std::string, int32_t> index;
  for (int i = 0; i < k; i++) {
    text->vocab.push_back(usable[size_t(i)].second);
    index[usable[size_t(i)].second] = i;
  }
  text->vocab.push_back("<unk>");
  text->words.reserve(size_t(total));
  for_each_word(bytes, [&](const std::string& w) {
    auto it = index.find(w);
    text->words.push_back(it == index.end() ? int32_t(k) : it->second);
  });
  return text;
}

std::string babilong_noise_vocab_problem(const std::vector<std::string>& noise_vocab) {
  if (noise_vocab.empty() || noise_vocab.back() != "<unk>")
    return fmt::format("vocab.{} is not '<unk>': a text's noise words end with it",
                       kBabiFirstNoise + int(noise_vocab.size()) - 1);
  std::set<std::string> seen;
  for (size_t i = 0; i + 1 < noise_vocab.size(); i++) {
    const std::string& w = noise_vocab[i];
    const int id = kBabiFirstNoise + int(i);
    const bool letters = !w.empty() && std::all_of(w.begin(), w.end(), [](char c) { return c >= 'a' && c <= 'z'; });
    if (!letters) return fmt::format("vocab.{} '{}' is not a word of a text (lowercase letters a-z)", id, w);
    if (task_words_lowercase().count(w)) return fmt::format("vocab.{} '{}' is one of the task's own words", id, w);
    if (!seen.insert(w).second) return fmt::format("vocab.{} '{}' is a noise word twice", id, w);
  }
  return "";
}

}  // namespace rmt
