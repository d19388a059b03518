#pragma once
// Outputs that would destroy an input: every command that writes a file the user names checks it
// against the files the command reads, before anything is written. Two names are one file when
// they reach the same inode (another spelling, a symlink, a hard link), or, where one does not
// exist yet, when their canonical paths are equal.
#include <string>
#include <vector>

namespace rmt {

// A file named on the command line, with the option that named it ("--dump", "--input"), or a
// file the command reads because of one ("--run" for RUN/config.yaml).
struct NamedPath {
  std::string option;
  std::string path;
};

// Whether a and b name the same file (see above).
bool same_file(const std::string& a, const std::string& b);

// Fails (rmt::Error) when an output is one of the inputs, naming both ("--predictions P: is also
// the input --checkpoint C; ..."), or when two outputs are the same file.
void check_outputs_not_inputs(const std::vector<NamedPath>& outputs, const std::vector<NamedPath>& inputs);

// The regular files directly inside `dir` (a dataset directory), each named `option`; none when
// `dir` cannot be listed (its reader names that).
std::vector<NamedPath> files_in_dir(const std::string& option, const std::string& dir);

}  // namespace rmt
