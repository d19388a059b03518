#pragma once
// Pieces of the messages rmt prints: sizes in bytes, "did you mean" for a mistyped name, a noun
// with its article.
#include <string>
#include <vector>

namespace rmt {

// "1.5 GB", "320 MB", "12 kB" (decimal units).
std::string format_bytes(double bytes);

// The candidate closest to `word` (fewest insertions, deletions, substitutions and swaps of
// neighbours; the first of equals) when it is close enough to be a likely typo (at most a
// third of the word changed, one edit at least), else "". The one did-you-mean of rmt.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);
// " (did you mean 'NAME'?)" for a closest_match, "" for none.
std::string did_you_mean(const std::string& suggestion);

// "a string", "an object", "an array": what a value is, as a message says it ("null" stays).
std::string with_article(const std::string& noun);

}  // namespace rmt
