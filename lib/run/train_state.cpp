#include "lib/run/train_state.h"

#include <deque>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/safetensors.h"
#include "lib/run/checkpoint.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

void save_state(const std::string& path, const Model& model, const Adam& adam,
                const LrSchedule& sched, const TrainState& st, bool with_progression,
                const TrainingData& data) {
  const std::vector<float> params = model.params.download(), moment1 = adam.moment1.download(),
                           moment2 = adam.moment2.download();
  std::vector<TensorRef> refs;
  for (const auto& p : model.param_info) refs.push_back({"param." + p.name, p.shape, params.data() + p.offset});
  refs.push_back({"adam.m", {int64_t(moment1.size())}, moment1.data()});
  refs.push_back({"adam.v", {int64_t(moment2.size())}, moment2.data()});
  auto num = [](double x) { return fmt::format("{}", x); };
  std::map<std::string, std::string> carry_metadata;
  std::deque<std::vector<float>> carry_host;  // host copies the refs point into
  data.save_carry(model, refs, carry_metadata, carry_host);
  std::map<std::string, std::string> metadata =
                   {{"step", std::to_string(st.step)},
                    {"wall_time_s", num(st.wall_time_s)},
                    {"adam_t", std::to_string(adam.t)},
                    {"best_val_loss", num(st.best_val_loss)},
                    {"best_step", std::to_string(st.best_step)},
                    {"plateau_lr", num(sched.plateau_lr)},
                    {"plateau_best", num(sched.best)},
                    {"plateau_bad_evals", std::to_string(sched.bad_evals)},
                    {"plateau_has_best", sched.has_best ? "1" : "0"},
                    {"dataset_fingerprint", st.dataset_fingerprint}};
  metadata.insert(carry_metadata.begin(), carry_metadata.end());
  if (with_progression) {
    const Progression& p = st.progression;
    metadata["stage"] = std::to_string(p.stage);
    metadata["stage_first_step"] = steps_text(p.stage_first_step);
    metadata["target_streak"] = std::to_string(p.streak);
    metadata["target_streak_first_step"] = std::to_string(p.streak_first_step);
    metadata["solved_step"] = std::to_string(p.solved_step);
    if (p.unmastered()) metadata["unmastered_step"] = std::to_string(p.unmastered_step);
  }
  save_safetensors(path, refs, metadata);
}

void load_state(const std::string& path, Model& model, Adam& adam, LrSchedule& sched, TrainState& st,
                bool with_progression, TrainingData& data) {
  SafetensorsFile f = load_safetensors(path);
  data.restore_carry(f, path, model);
  auto tensor = [&](const std::string& name, int64_t numel) -> const Tensor& {
    auto it = f.tensors.find(name);
    if (it == f.tensors.end()) fail("{}: missing '{}'", path, name);
    if (it->second.numel() != numel)
      fail("{}: '{}' has {} values, expected {} (was the config changed?)", path, name,
           it->second.numel(), numel);
    return it->second;
  };
  std::vector<float> params(static_cast<size_t>(model.num_params()));
  for (const auto& p : model.param_info) {
    const Tensor& t = tensor("param." + p.name, p.numel);
    check_finite(path, "param." + p.name, t.data.data(), p.numel);
    std::copy(t.data.begin(), t.data.end(), params.begin() + p.offset);
  }
  const std::vector<float>& moment1 = tensor("adam.m", model.num_params()).data;
  const std::vector<float>& moment2 = tensor("adam.v", model.num_params()).data;
  check_finite(path, "adam.m", moment1.data(), model.num_params());
  check_finite(path, "adam.v", moment2.data(), model.num_params());
  model.params.upload(model.backend, params);
  adam.moment1.upload(model.backend, moment1);
  adam.moment2.upload(model.backend, moment2);
  auto md = [&](const char* key) {
    auto it = f.metadata.find(key);
    if (it == f.metadata.end()) fail("{}: missing metadata '{}'", path, key);
    return it->second;
  };
  try {
    st.step = std::stoll(md("step"));
    st.wall_time_s = std::stod(md("wall_time_s"));
    adam.t = std::stoll(md("adam_t"));
    st.best_val_loss = std::stod(md("best_val_loss"));
    st.best_step = std::stoll(md("best_step"));
    sched.plateau_lr = std::stod(md("plateau_lr"));
    sched.best = std::stod(md("plateau_best"));
    sched.bad_evals = std::stoi(md("plateau_bad_evals"));
    sched.has_best = md("plateau_has_best") == "1";
    // absent from states written before fingerprints were recorded
    auto fp = f.metadata.find("dataset_fingerprint");
    st.dataset_fingerprint = fp == f.metadata.end() ? "" : fp->second;
    if (with_progression) {
      Progression& p = st.progression;
      p.stage = std::stoi(md("stage"));
      p.stage_first_step = parse_steps_text(md("stage_first_step"), path + ": stage_first_step");
      p.streak = std::stoi(md("target_streak"));
      p.streak_first_step = std::stoll(md("target_streak_first_step"));
      p.solved_step = std::stoll(md("solved_step"));
      auto unmastered = f.metadata.find("unmastered_step");  // only in the state of such a run
      p.unmastered_step = unmastered == f.metadata.end() ? -1 : std::stoll(unmastered->second);
      if (p.stage < 0 || size_t(p.stage) + 1 != p.stage_first_step.size() || p.streak < 0)
        fail("{}: corrupt training state metadata (stage {} with {} stage starts)", path, p.stage,
             p.stage_first_step.size());
    }
  } catch (const std::logic_error&) {
    fail("{}: corrupt training state metadata", path);
  }
}

void truncate_metrics(const fs::path& path, int64_t step) {
  if (!fs::exists(path)) return;
  std::istringstream in(read_file(path));
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;  // a torn last line from a kill
    if (j.value("step", int64_t(0)) <= step) kept += line + "\n";
  }
  write_file_atomic(path, kept);
}


}  // namespace rmt
