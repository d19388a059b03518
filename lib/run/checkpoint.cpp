#include "lib/run/checkpoint.h"

#include <cmath>

#include "lib/core/error.h"
#include "lib/files/safetensors.h"

namespace rmt {

namespace {
const char* kTiedOutputWeight = "crit.out_layers.0.weight";
const char* kInvFreq = "pos_emb.inv_freq";

std::string shape_str(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}
}  // namespace

std::map<std::string, std::string> model_metadata(const ModelConfig& c) {
  std::map<std::string, std::string> md = {{"format", "rmt-checkpoint-1"},
          {"kind", c.kind},
          {"n_token", std::to_string(c.n_token)},
          {"n_layer", std::to_string(c.n_layer)},
          {"n_head", std::to_string(c.n_head)},
          {"d_head", std::to_string(c.d_head)},
          {"d_model", std::to_string(c.d_model)},
          {"d_inner", std::to_string(c.d_inner)},
          {"mem_len", std::to_string(c.mem_len)},
          {"num_mem_tokens", std::to_string(c.num_mem_tokens)},
          {"read_mem_from_cache", c.read_mem_from_cache ? "true" : "false"},
          {"dropout", fmt::format("{}", c.dropout)},
          {"dropatt", fmt::format("{}", c.dropatt)}};
  if (kind_has_assoc(c.kind)) md["d_mem"] = std::to_string(c.d_mem);  // only armt's: the others' stay as they were
  if (kind_has_mixer_state(c.kind)) {  // only the delta-rule kinds'
    md["expand_v"] = std::to_string(resolved_expand_v(c));
    md["short_conv"] = std::to_string(c.short_conv);
  }
  return md;
}

ModelConfig model_config_from_metadata(const std::map<std::string, std::string>& md,
                                       const std::string& origin) {
  auto get = [&](const char* key) -> const std::string& {
    auto it = md.find(key);
    if (it == md.end())
      fail("{}: checkpoint metadata lacks '{}' (rmt checkpoints keep the model config in "
           "__metadata__)", origin, key);
    return it->second;
  };
  auto get_int = [&](const char* key) {
    const std::string& s = get(key);
    try {
      size_t used = 0;
      int v = std::stoi(s, &used);
      if (used == s.size()) return v;
    } catch (...) {
    }
    fail("{}: checkpoint metadata '{}' is not an integer: '{}'", origin, key, s);
  };
  auto get_double = [&](const char* key, double fallback) {
    auto it = md.find(key);
    if (it == md.end()) return fallback;
    try {
      return std::stod(it->second);
    } catch (...) {
      fail("{}: checkpoint metadata '{}' is not a number: '{}'", origin, key, it->second);
    }
  };
  ModelConfig c;
  c.kind = get("kind");
  c.n_token = get_int("n_token");
  c.n_layer = get_int("n_layer");
  c.n_head = get_int("n_head");
  c.d_head = get_int("d_head");
  c.d_model = get_int("d_model");
  c.d_inner = get_int("d_inner");
  c.mem_len = get_int("mem_len");
  c.num_mem_tokens = get_int("num_mem_tokens");
  if (kind_has_assoc(c.kind)) c.d_mem = get_int("d_mem");
  if (kind_has_mixer_state(c.kind)) c.expand_v = get_int("expand_v"), c.short_conv = get_int("short_conv");
  const std::string& rm = get("read_mem_from_cache");
  if (rm != "true" && rm != "false")
    fail("{}: checkpoint metadata 'read_mem_from_cache' must be true or false, got '{}'", origin, rm);
  c.read_mem_from_cache = rm == "true";
  c.dropout = get_double("dropout", 0.0);
  c.dropatt = get_double("dropatt", 0.0);
  return c;
}

void save_checkpoint(const std::string& path, const Model& model,
                     const DeviceArray<float>& device_values,
                     std::map<std::string, std::string> extra) {
  const std::vector<float> values = device_values.download();
  std::vector<TensorRef> refs;
  for (const auto& p : model.param_info)
    refs.push_back({p.name, p.shape, values.data() + p.offset});
  const ParamInfo* emb = model.find("word_emb.emb_layers.0.weight");
  refs.push_back({kTiedOutputWeight, emb->shape, values.data() + emb->offset});
  std::vector<float> inv_freq(size_t(model.d / 2));
  if (traits_of(model.kind).mixer == Mixer::attention) {  // the position table's (attention's only)
    for (int i = 0; i < model.d / 2; ++i)
      inv_freq[size_t(i)] = float(1.0 / std::pow(10000.0, 2.0 * i / model.d));
    refs.push_back({kInvFreq, {model.d / 2}, inv_freq.data()});
  }
  auto md = model_metadata(model.config);
  for (auto& [k, v] : extra) md[k] = v;
  save_safetensors(path, refs, md);
}

void check_finite(const std::string& path, const std::string& tensor, const float* data, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(data[i]))
      fail("{}: tensor '{}' holds a non-finite value ({} at index {}); the checkpoint is unusable "
           "(written by a run that diverged?), use an earlier one", path, tensor, data[i], i);
}

static void copy_parameters(const SafetensorsFile& file, const std::string& path, Model& model) {
  std::vector<float> params = model.params.download();
  for (const auto& p : model.param_info) {
    auto it = file.tensors.find(p.name);
    if (it == file.tensors.end()) fail("{}: missing tensor '{}'", path, p.name);
    if (it->second.shape != p.shape)
      fail("{}: tensor '{}' has shape {}, the model needs {}", path, p.name,
           shape_str(it->second.shape), shape_str(p.shape));
    check_finite(path, p.name, it->second.data.data(), p.numel);
    std::copy(it->second.data.begin(), it->second.data.end(), params.begin() + p.offset);
  }
  for (const auto& [name, t] : file.tensors) {
    if (name == kTiedOutputWeight || name == kInvFreq || model.find(name)) continue;
    fail("{}: unexpected tensor '{}' for a model of kind '{}'", path, name, model.config.kind);
  }
  model.params.upload(model.backend, params);
}

std::unique_ptr<Model> load_checkpoint(const std::string& path,
                                       const std::function<void(const ModelConfig&)>& check,
                                       Backend& backend) {
  SafetensorsFile file = load_safetensors(path);
  const ModelConfig config = model_config_from_metadata(file.metadata, path);
  if (check) check(config);
  // The metadata must describe the tensors before a model of its sizes is allocated (a header
  // claiming 10^8 layers must not allocate gigabytes first).
  if (config.n_token <= 0 || config.n_layer <= 0 || config.n_head <= 0 || config.d_head <= 0 ||
      config.d_model <= 0 || config.d_inner <= 0 || config.mem_len < 0 || config.num_mem_tokens < 0)
    fail("{}: checkpoint metadata holds a size that is not positive (n_token {}, n_layer {}, "
         "n_head {}, d_head {}, d_model {}, d_inner {}, mem_len {}, num_mem_tokens {})", path,
         config.n_token, config.n_layer, config.n_head, config.d_head, config.d_model,
         config.d_inner, config.mem_len, config.num_mem_tokens);
  double in_file = 0;
  for (const auto& [name, t] : file.tensors)
    if (name != kTiedOutputWeight && name != kInvFreq) in_file += double(t.numel());
  const double described = model_param_count(config);
  if (described != in_file)
    fail("{}: the metadata describes a {} model of {:.0f} parameters (n_layer {}, d_model {}, "
         "n_token {}) but the file holds {:.0f} values", path, config.kind, described,
         config.n_layer, config.d_model, config.n_token, in_file);
  auto model = std::make_unique<Model>(config, backend);
  copy_parameters(file, path, *model);
  return model;
}

void load_parameters(const std::string& path, Model& model) {
  copy_parameters(load_safetensors(path), path, model);
}

}  // namespace rmt
