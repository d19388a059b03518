// Planning a sweep (sweep.h): its grid points, their configs, datasets and run ids.
#include "lib/experiments/sweep.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/experiments/sweep_expr.h"
#include "lib/experiments/sweep_internal.h"
#include "lib/files/io.h"
#include "lib/run/config_family.h"
#include "tasks/task_kind.h"

namespace rmt {

namespace fs = std::filesystem;

std::string sweep_internal::config_value(const Config& config, const std::string& key) {
  YAML::Node root = YAML::Load(to_yaml(config));
  size_t dot = key.find('.');
  YAML::Node node = dot == std::string::npos ? root[key] : root[key.substr(0, dot)][key.substr(dot + 1)];
  return node.IsScalar() ? node.Scalar() : "";
}

using namespace sweep_internal;

namespace {

// Short names for the RUN_ID prefix; other keys use their last component.
std::string short_name(const std::string& key) {
  static const std::map<std::string, std::string> names = {
      {"segments", "seg"}, {"model.num_mem_tokens", "mem"}, {"model.mem_len", "cache"},
      {"train.seed", "seed"}, {"bptt", "bptt"}, {"train.lr", "lr"}, {"model.n_layer", "layers"}};
  auto it = names.find(key);
  if (it != names.end()) return it->second;
  return key.substr(key.rfind('.') + 1);
}

std::string id_safe(const std::string& text) {
  std::string out;
  for (char ch : text) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' ? ch : '_';
  return out;
}

}  // namespace

SweepPlan plan_sweep(const SweepSpec& spec, const std::string& runs_dir, int threads,
                     const std::string& device) {
  if (!device.empty())
    for (const auto& grid : spec.grids)
      for (const auto& entry : grid)
        if (entry.first == "device")
          fail("{}: grid.device gives the runs their devices; --device {} would give them all the "
               "same one: leave out one of the two", spec.path, device);
  SweepPlan plan;
  plan.spec = spec;
  plan.sweep_dir = fs::path(runs_dir) / spec.name;
  // Columns: every grid key of any block, then the derived keys.
  auto add_column = [&](const std::string& key) {
    if (std::find(plan.columns.begin(), plan.columns.end(), key) == plan.columns.end()) plan.columns.push_back(key);
  };
  bool data_varies = false;
  for (const auto& grid : spec.grids)
    for (const auto& [key, values] : grid) add_column(key), data_varies |= is_data_key(key);
  for (const auto& [key, expr] : spec.derive) add_column(key);

  std::set<std::string> seen_ids;
  // data.dir spellings by the directory they name: one dataset written as two paths ("d", "./d/",
  // a link to it) is the first spelling, so that one config on it is one run.
  std::map<std::string, std::string> spelling_of_dataset;
  for (const auto& grid : spec.grids) {
    // Cartesian product, the first grid key varying slowest.
    std::vector<size_t> index(grid.size(), 0);
    while (true) {
      std::map<std::string, std::string> data(spec.data.begin(), spec.data.end());
      Config config = spec.base;
      std::string where = spec.path + ": grid point";
      for (size_t k = 0; k < grid.size(); ++k) {
        const auto& [key, values] = grid[k];
        where += fmt::format(" {}={}", key, values[index[k]]);
        if (is_data_key(key)) data[key.substr(5)] = values[index[k]];
        else apply_value(config, key, values[index[k]], spec.path + ": grid." + key);
      }
      // The dataset of this point and its segment lengths.
      SweepData resolved = resolve_data(data, where);
      SweepDataset dataset;
      if (!resolved.dir.empty()) {
        const auto [first, fresh] = spelling_of_dataset.emplace(fs::canonical(resolved.dir).string(), resolved.dir);
        resolved.dir = data["dir"] = first->second;
        dataset.dir = resolved.dir;  // exists; nothing to generate
      } else {
        dataset.dir = (plan.sweep_dir / "data").string();
        if (data_varies) {
          std::string sub = resolved.task;
          for (const auto& [k, v] : data)
            if (k != "task") sub += "-" + k + id_safe(v);
          dataset.dir = (plan.sweep_dir / "data" / sub).string();
        }
        dataset.generate_args = {"generate", data["task"], "--out", dataset.dir};
        for (const auto& [k, v] : data)
          if (k != "task") dataset.generate_args.insert(dataset.generate_args.end(), {generate_flag(k), v});
      }
      config.data = dataset.dir;
      // The config must be of its data's family; a step reads seq_len positions of each sample
      // (a language model: one segment of segment_length).
      const ConfigFamily& family = config_family(config);
      try {
        config_family(resolved.family)
            .check_config_of_data(config, resolved.dir.empty() ? "data task " + resolved.task : "data.dir " + resolved.dir,
                                  resolved.task);
      } catch (const Error& e) {
        fail("{}: {}", where, e.what());
      }
      const int seq_len = family.step_positions(config, resolved.seq_len);
      const int segments = family.step_segments(config);
      if (segments > seq_len)
        fail("{}: segments {} is more than the {} input positions of task {}", where, segments, seq_len,
             resolved.task);
      const int segment_length = segment_lengths(seq_len, segments)[0];
      const std::map<std::string, long long> vars = {
          {"segment_length", segment_length}, {"seq_len", seq_len}, {"segments", segments}};
      for (const auto& [key, expr] : spec.derive) {
        long long v = eval_expression(expr, vars, spec.path + ": derive." + key);
        apply_value(config, key, std::to_string(v), fmt::format("{} (derive.{} = {})", where, key, v));
      }
      if (!device.empty()) apply_value(config, "device", device, "--device " + device);
      try {
        validate(config);
      } catch (const Error& e) {
        fail("{}: {}", where, e.what());
      }
      resolve_kind(config.model);  // what prepare_run does, so that RUN_ID names what runs
      // derive: may set segments itself (e.g. `segments: seq_len / 4 + 1`): the run's longest
      // segment is then that count's.
      const int run_segments = family.step_segments(config);
      if (run_segments > seq_len)
        fail("{}: segments {} (derived) is more than the {} input positions of task {}", where, run_segments,
             seq_len, resolved.task);
      const int run_segment_length = segment_lengths(seq_len, run_segments)[0];

      // RUN_ID: readable prefix + hash of what the run computes (threads, a cpu device left out).
      config.train.threads = threads;
      std::string hash = sha256_hex(identity_yaml(config)).substr(0, 8);
      std::string id = config.model.kind;
      for (const auto& key : plan.columns) {
        if (key == "model.kind" || key == "data.task") continue;
        if (is_data_key(key) && !data.count(key.substr(5))) continue;
        std::string value = is_data_key(key) ? data[key.substr(5)] : config_value(config, key);
        // Memory sizes the kind does not use are 0 after resolve_kind: leave them out of the name.
        if ((key == "model.num_mem_tokens" || key == "model.mem_len") && value == "0") continue;
        id += "-" + short_name(key) + id_safe(value);
      }
      if (data_varies) id = resolved.task + "-" + id;
      id += "-" + hash;
      if (seen_ids.insert(id).second) {  // e.g. baseline x two memory sizes is one run
        SweepRun run;
        run.run_id = id;
        run.config = config;
        run.segment_length = run_segment_length;
        run.dir = plan.sweep_dir / id;
        run.data_options = data;
        plan.runs.push_back(run);
        bool have = false;
        for (const auto& d : plan.datasets) have |= d.dir == dataset.dir;
        if (!have) plan.datasets.push_back(dataset);
      }
      // next grid point
      size_t k = grid.size();
      while (k > 0 && ++index[k - 1] == grid[k - 1].second.size()) index[--k] = 0;
      if (k == 0) break;
    }
  }
  return plan;
}

}  // namespace rmt
