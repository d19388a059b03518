#include "lib/core/messages.h"

#include <algorithm>

#include <fmt/format.h>

namespace rmt {

std::string format_bytes(double bytes) {
  if (bytes >= 1e12) return fmt::format("{:.1f} TB", bytes / 1e12);
  if (bytes >= 1e9) return fmt::format("{:.1f} GB", bytes / 1e9);
  if (bytes >= 1e6) return fmt::format("{:.0f} MB", bytes / 1e6);
  return fmt::format("{:.0f} kB", bytes / 1e3);
}

namespace {

int edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: insertions, deletions, substitutions and swaps of neighbours
  // ("trian" is one typo away from "train", not two).
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); i++) d[i][0] = int(i);
  for (size_t j = 0; j <= b.size(); j++) d[0][j] = int(j);
  for (size_t i = 1; i <= a.size(); i++)
    for (size_t j = 1; j <= b.size(); j++) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

}  // namespace

std::string closest_match(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = 1 << 30;
  for (const auto& c : candidates) {
    int d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  // A typo: at most a third of the word changed (and at least one edit allowed).
  return best_d <= std::max<int>(1, int(word.size()) / 3) ? best : "";
}

std::string did_you_mean(const std::string& suggestion) {
  return suggestion.empty() ? "" : fmt::format(" (did you mean '{}'?)", suggestion);
}

std::string with_article(const std::string& noun) {
  if (noun.empty() || noun == "null") return noun;
  return (std::string("aeiou").find(noun[0]) != std::string::npos ? "an " : "a ") + noun;
}

}  // namespace rmt
