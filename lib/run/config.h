#pragma once
// The run configuration of `rmt train`: a YAML file, overridden by `--set key=value` with dotted
// paths (`--set model.kind=xl`). Defaults are the paper's recipe (docs/paper.md §3).
#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/model_config.h"

namespace rmt {

// The most stages train.curriculum may have (config.cpp says why a bound is needed).
constexpr int kMaxCurriculumStages = 1024;

inline constexpr const char* kDefaultDevice = "cpu";

struct TrainConfig {
  int batch_size = 32;
  double lr = 1.0e-4;
  std::string schedule = "plateau";  // plateau | cosine | constant
  int warmup_steps = 0;
  double clip = 0.25;
  int64_t max_steps = 250000;
  int64_t eval_every = 12000;
  int patience = 8;
  double factor = 0.5;
  double min_lr = 1.0e-6;
  int64_t log_every = 100;
  int64_t eval_samples = 0;  // 0 = the whole validation split at every evaluation
  // Adam's second-moment decay (torch's betas[1]). Lower values (0.95, 0.99) let the moment
  // follow a sudden gradient after a long stretch of near-zero loss instead of dividing it by a
  // stale tiny estimate: the loss spikes that end some long runs (docs/training.md).
  double adam_beta2 = 0.999;
  // AdamW's decoupled weight decay (torch.optim.AdamW's weight_decay), 0 = Adam. Not applied to
  // biases, norms and A_log (docs/training.md, "Weight decay").
  double weight_decay = 0;
  uint64_t seed = 1;
  // Curriculum over the number of segments (lib/run/curriculum.h): `curriculum` stages, stage i
  // of N (1-based) training on ceil(segments * i / N) segments of the same input, the last on
  // `segments`. 1 = no curriculum. curriculum_advance: fixed (each stage gets an equal share of
  // max_steps) or mastery (a stage also ends once validation at its own segments meets target).
  int curriculum = 1;  // 1..kMaxCurriculumStages
  std::string curriculum_advance = "fixed";
  // Under mastery: a stage whose share of the steps runs out before it is mastered ends the run
  // (end_reason "unmastered") instead of going on to longer inputs it has not learned the
  // shorter ones of. Spares the ceiling to runs that cannot learn (a baseline that sees one
  // segment) at the price of runs that would have learned a stage later.
  bool stop_unmastered = false;
  // Stop when solved: 0 = train max_steps; else the run ends once the validation accuracy
  // (teacher-forced, at `segments`) is >= target at target_evals consecutive evaluations.
  double target = 0;
  int target_evals = 2;
  int threads = 0;           // 0 = all cores
};

struct Config {
  std::string data;          // dataset directory written by `rmt generate`
  int segments = 3;          // the input is split into this many segments
  // Language modelling (text datasets only): positions per training segment of each stream.
  // 0 (the default, for algorithmic tasks) is left out of the resolved YAML, and so is
  // `segments` when it is set: algorithmic configs and their run ids do not change.
  int segment_length = 0;
  int bptt = -1;             // -1 = all; 0 = memory detached at every border; k = k segments
  bool bptt_recompute = false;
  // The backend that runs it (backend_by_name, lib/core/backend.h): cpu, or cuda in a build
  // with the CUDA backend. Where a run goes, not what it computes: left out of run ids when cpu.
  std::string device = kDefaultDevice;
  ModelConfig model;
  TrainConfig train;
};

// Parses YAML text (origin names the file in error messages). Unknown keys are an error naming
// the key and the closest valid one; values are type- and range-checked.
Config parse_config(const std::string& yaml_text, const std::string& origin);
Config load_config(const std::string& path);
// Applies one "dotted.key=value" override (value parsed as YAML scalar).
void apply_override(Config& config, const std::string& assignment);
// Range checks that need no dataset (sizes > 0, kind known, kind-specific requirements).
void validate(const Config& config);
// Fails when a model of this kind cannot run on `device` yet (armt: not on a GPU until one has
// run its kernels; docs/cuda.md). validate() asks it of the config's device; eval and step-dump
// of the device they are given.
void check_kind_runs_on(const std::string& kind, const std::string& device);
// Zeroes what the kind does not use (mem_len for rmt/mt/baseline, num_mem_tokens for xl and
// baseline) so the resolved config says exactly what ran.
void resolve_kind(ModelConfig& model);
// armt's keys (not on a GPU yet), in lib/run/config_kind_checks.cpp.
void validate_associative_memory_keys(const Config& config);
// YAML text of the whole resolved config; parse_config(to_yaml(c)) == c (keys that do not apply
// are left out: segment_length when 0, segments when segment_length is set).
std::string to_yaml(const Config& config);
// The text a run's identity is hashed from (the sweep's RUN_ID): to_yaml without what says where
// and how fast a run goes rather than what it computes: train.threads reads 0, and device is left
// out when it is the default cpu (so every id made before the key existed still names its run).
std::string identity_yaml(const Config& config);
// Whether two config texts say the same (a config.yaml written before a key existed reads as
// that key's default); false when either does not parse.
bool same_config_text(const std::string& a, const std::string& b);
// The first key (in config_keys() order) whose value differs between two config texts, as
// "train.lr is 0.001 in the saved config but 0.5 in this one"; "" when none does or either
// text is not a valid config.
std::string first_config_difference(const std::string& saved, const std::string& now);
// All valid dotted keys, in file order (for --help and "did you mean").
std::vector<std::string> config_keys();
// "bptt: all" <-> -1
std::string bptt_to_string(int bptt);

}  // namespace rmt
