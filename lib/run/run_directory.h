#pragma once
// The run directory of `rmt train` (its layout: lib/run/train.h): who may write in it, and what
// --resume does with what it holds, and the config it says the run was trained with.
#include <filesystem>
#include <string>
#include <vector>

#include "lib/files/io.h"
#include "lib/run/config.h"

namespace rmt {

// The files a run writes into its directory (their temp files are cleaned on the next start).
extern const std::vector<std::string> kRunFiles;

// Refuses a run directory that is the dataset directory `data` or lies inside it: the run's
// files would mix with the dataset's (and a later `rmt generate --force` there would meet them).
void check_run_dir_outside_data(const std::filesystem::path& dir, const std::string& data);

// RUN_DIR/config.yaml of a trained run (rmt train writes every key): fails when it is missing or
// holds no keys, since the defaults would then be described as what the run was trained with.
Config load_run_config(const std::string& run_dir);

// Opens `dir` for training: creates it, takes its lock into `lock` (one rmt train at a time, for
// as long as the lock lives), removes temp files a killed write left, and applies the resume
// policy. Returns true when training continues from state.safetensors (resume, and the run has a
// checkpoint; its config.yaml must be `config_text`). Otherwise config.yaml is written: a new
// run, or, with resume, one that stopped before its first checkpoint, restarted from step 0.
// Fails when the directory holds a run and resume is false, or on a config that differs.
bool open_run_directory(const std::filesystem::path& dir, const std::string& config_text, bool resume,
                        DirectoryLock& lock);

}  // namespace rmt
