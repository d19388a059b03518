#pragma once
// What the sweep's files share and the public interface (sweep.h) does not offer: how a sweep
// applies its values to a config and resolves its `data:` block (sweep_spec.cpp), and how it
// reads a value back out of a config (sweep_plan.cpp).
#include <map>
#include <string>

#include "lib/run/config.h"
#include "tasks/tasks.h"

namespace rmt::sweep_internal {

// A grid key that varies the dataset (`data.length`) rather than the config.
inline bool is_data_key(const std::string& key) { return key.rfind("data.", 0) == 0; }

// Applies `key: value` to a config, rewording the config's own error (which has the reason and
// the did-you-mean) so that it names the sweep file and section.
void apply_value(Config& config, const std::string& key, const std::string& value, const std::string& where);

// A data block of task text: `rmt generate text --input FILE [--split S] [--bytes N]`; the
// algorithmic tasks' options are refused as `rmt generate text` refuses them.
bool is_text_data(const std::map<std::string, std::string>& data, const std::string& where);

// Resolves a data block to the task it generates (fails like `rmt generate` would).
TaskOptions resolve_data_task(const std::map<std::string, std::string>& data, const std::string& where);

// The value of one dotted key in a config, as its YAML text (via to_yaml, the one place that
// knows how each key prints).
std::string config_value(const Config& config, const std::string& key);

}  // namespace rmt::sweep_internal
