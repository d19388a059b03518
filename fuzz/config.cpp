// Fuzz harness: the config loader (lib/config.*). The input is a config YAML text, then, after
// each NUL byte, one `--set key=value` override. Whatever is accepted must print (to_yaml) as
// YAML that parses back to the same config.
#include "fuzz/harness.h"
#include "lib/run/config.h"

using namespace rmt_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = split_at_nul(std::string_view(reinterpret_cast<const char*>(data), size));
  rmt::Config config;
  if (!accepts([&] { config = rmt::parse_config(parts[0], "fuzz.yaml"); })) return 0;
  for (size_t i = 1; i < parts.size(); ++i)
    if (!accepts([&] { rmt::apply_override(config, parts[i]); })) return 0;

  // to_yaml must round-trip whatever was accepted, valid or not.
  const std::string text = rmt::to_yaml(config);
  rmt::Config again;
  if (!accepts([&] { again = rmt::parse_config(text, "to_yaml"); })) broken("to_yaml wrote text that does not parse:\n" + text);
  require(rmt::to_yaml(again) == text, "to_yaml does not round-trip:\n" + text + "---\n" + rmt::to_yaml(again));

  if (accepts([&] { rmt::validate(config); })) {
    rmt::resolve_kind(config.model);
    accepts([&] { rmt::validate(config); });
    require(config.segments >= 1 && config.model.n_layer >= 1 && config.train.batch_size >= 1,
            "validate accepted a size < 1");
  }
  return 0;
}
