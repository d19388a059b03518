#pragma once
// A dataset directory a sweep or a length item generated once and reuses: before reusing it,
// check that it is the dataset the spec asks for now. A sweep's data directory is named by the
// sweep, not by its options, and a run id hashes the config, whose `data` is that path: without
// this check, a sweep file whose data options changed would silently train (and count as done)
// runs on the old data.
#include <filesystem>
#include <string>
#include <vector>

namespace rmt {

// `generate_args`: the `rmt generate` arguments that write `dir` ("generate", TASK, then
// "--flag", "value" pairs; --out and --force are ignored). Fails, naming the option, when
// dir/meta.yaml records another task or another value of an option it records (the options,
// the counts, the seed); options meta.yaml does not record are not checked.
void check_generated_dataset(const std::filesystem::path& dir, const std::vector<std::string>& generate_args);

}  // namespace rmt
