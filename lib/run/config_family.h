#pragma once
// What a config trains on, decided from the config alone: samples of an algorithmic task cut into
// `segments`, or a text's bytes read in streams of segment_length (a language model: the config
// sets segment_length). What follows from it for the config's keys, a sweep's plan and results.csv
// is a method here, so that the config, sweep and results code never ask which one a config is.
// A run's half (its setup, data and evaluation) is the RunFamily of the same FamilyKind
// (lib/run/run_family.h). This file needs nothing of a run: the config's readers and their
// fuzzers link it alone.
#include <string>

#include "lib/run/config.h"
#include "tasks/family.h"  // FamilyKind

namespace rmt {

class ConfigFamily {
 public:
  virtual ~ConfigFamily() = default;
  virtual FamilyKind kind() const = 0;
  // Whether the config's YAML has `key` ("segments" for samples, "segment_length" for text):
  // to_yaml leaves out the other, so that parse_config(to_yaml(c)) == c.
  virtual bool has_key(const std::string& key) const = 0;
  // The checks of the config's keys that concern this family (validate calls them): a language
  // model has no segments, curriculum or target, and a numeric bptt.
  virtual void validate(const Config& config) const = 0;
  // Refuses `config` when it is not of this family, its data's: segment_length on a task's
  // samples, none on a text. `data` names the data for the message ("data runs/d", "data task
  // text"), `task` its task.
  virtual void check_config_of_data(const Config& config, const std::string& data, const std::string& task) const = 0;
  // The input positions one sample (stream) gives a step: a task's sample's (`sample_positions`),
  // or segment_length.
  virtual int step_positions(const Config& config, int sample_positions) const = 0;
  // The segments a step cuts them into (results.csv's `segments`): `segments`, or one.
  virtual int step_segments(const Config& config) const = 0;
  // Whether validation reports bpc (else accuracy): results.csv's bpc column, the metrics log.
  virtual bool validates_bpc() const = 0;
};

// The decision, made here only: text when segment_length is set.
const ConfigFamily& config_family(const Config& config);
// The family of data of `kind` (a dataset's, tasks/family.h).
const ConfigFamily& config_family(FamilyKind kind);

}  // namespace rmt
