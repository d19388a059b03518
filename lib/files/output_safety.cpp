#include "lib/files/output_safety.h"

#include <filesystem>

#include "lib/core/error.h"

namespace rmt {

namespace fs = std::filesystem;

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  // Both exist: the same inode, whatever the spelling or links.
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
  // An output not written yet (named twice): the same path once made absolute and normalised.
  const fs::path ca = fs::weakly_canonical(a, ec), cb = fs::weakly_canonical(b, ec);
  return !ec && ca == cb;
}

void check_outputs_not_inputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    for (const NamedPath& in : inputs)
      if (same_file(out.path, in.path))
        fail("{} {}: is also the input {} {}; writing it would destroy the input: give another "
             "output", out.option, out.path, in.option, in.path);
    for (size_t j = 0; j < i; ++j)
      if (same_file(out.path, outputs[j].path))
        fail("{} {} and {} {} are the same file: give each output its own file", outputs[j].option,
             outputs[j].path, out.option, out.path);
  }
}

std::vector<NamedPath> files_in_dir(const std::string& option, const std::string& dir) {
  std::vector<NamedPath> files;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return files;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file(ec)) files.push_back({option, entry.path().string()});
  return files;
}

}  // namespace rmt
