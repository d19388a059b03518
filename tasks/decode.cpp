// Ids as text under a dataset's vocabulary, for `rmt data show`, samples and messages.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tasks/dataset.h"

namespace rmt {

// Single-character symbols are joined without spaces ("0123"), words with ("where is Mary ?").
std::string decode_ids(const DatasetMeta& meta, const int64_t* ids, int n) {
  std::vector<std::string> parts;
  bool single = true;
  for (int i = 0; i < n; i++) {
    std::string s = ids[i] >= 0 && ids[i] < int64_t(meta.vocab.size()) ? meta.vocab[ids[i]]
                                                                       : fmt::format("<{}?>", ids[i]);
    single = single && s.size() == 1;
    parts.push_back(s);
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); i++) out += (i && !single ? " " : "") + parts[i];
  return out;
}

}  // namespace rmt
