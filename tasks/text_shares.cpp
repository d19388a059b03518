// The split shares of a text dataset (--split) and the split sizes they give: kept apart from the
// rest of tasks/text.cpp so that sweep planning (and its fuzz harness) can check a sweep's
// data.split without the dataset reader and writer.
#include <charconv>
#include <string>
#include <vector>

#include "lib/core/error.h"
#include "tasks/text.h"

namespace rmt {

namespace {

const char* const kShareNames[3] = {"train", "val", "test"};

std::string trim_spaces(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

// floor(n * share / 100) without overflowing for any int64 n.
int64_t share_of(int64_t n, int share) { return n / 100 * share + n % 100 * share / 100; }

}  // namespace

TextShares parse_text_shares(const std::string& text) {
  const std::string usage = "three whole percentages train,val,test that sum to 100, e.g. 90,5,5";
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); i++)
    if (i == text.size() || text[i] == ',') {
      parts.push_back(trim_spaces(text.substr(start, i - start)));
      start = i + 1;
    }
  if (parts.size() != 3) fail("--split '{}' has {} part{}; expected {}", text, parts.size(), parts.size() == 1 ? "" : "s", usage);
  TextShares s{};
  for (int k = 0; k < 3; k++) {
    const std::string& p = parts[size_t(k)];
    int v = 0;
    auto [ptr, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
    if (p.empty() || ec != std::errc() || ptr != p.data() + p.size() || v < 0 || v > 100)
      fail("--split '{}': the {} share '{}' is not a whole number 0..100; expected {}", text, kShareNames[k], p, usage);
    s[size_t(k)] = v;
  }
  for (int k = 0; k < 3; k++)
    if (s[size_t(k)] == 0)
      fail("--split '{}': the {} share is 0; every split needs at least 1% (train trains, val picks the best "
           "checkpoint, test is reported)", text, kShareNames[k]);
  if (s[0] + s[1] + s[2] != 100) fail("--split '{}' sums to {}; expected {}", text, s[0] + s[1] + s[2], usage);
  return s;
}

std::array<int64_t, 3> text_split_sizes(int64_t n, const TextShares& shares) {
  const int64_t val = share_of(n, shares[1]), test = share_of(n, shares[2]);
  return {n - val - test, val, test};
}

}  // namespace rmt
