#pragma once
// Model checkpoints as safetensors (fp32) with the authors' PyTorch state_dict names and shapes,
// so `MemTransformerLM.load_state_dict` accepts ours. The model config is in __metadata__.
// The tied output weight `crit.out_layers.0.weight` and the buffer `pos_emb.inv_freq` are
// written too (strict loading wants them) and are optional when reading.
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "lib/core/model.h"

namespace rmt {

std::map<std::string, std::string> model_metadata(const ModelConfig& config);
ModelConfig model_config_from_metadata(const std::map<std::string, std::string>& metadata,
                                       const std::string& origin);

// Writes the parameters (or, with values = model.grads, the gradients) atomically.
void save_checkpoint(const std::string& path, const Model& model,
                     const DeviceArray<float>& values,
                     std::map<std::string, std::string> extra_metadata = {});
// Builds the model described by the file's metadata on `backend` (the run's device:
// backend_by_name) and loads its parameters. `check`, if not empty, sees the file's model config
// before anything is allocated and may refuse it (fail).
// The metadata must agree with the tensors, and every value must be finite: a checkpoint with
// NaN or Inf is refused, naming the file and the first such tensor.
std::unique_ptr<Model> load_checkpoint(
    const std::string& path, const std::function<void(const ModelConfig&)>& check,
    Backend& backend);
// Loads parameters into an existing model; shapes and names must match, values be finite.
void load_parameters(const std::string& path, Model& model);
// Fails, naming `path` and the tensor, if data[0..n) holds a NaN or an infinity.
void check_finite(const std::string& path, const std::string& tensor, const float* data, int64_t n);

}  // namespace rmt
