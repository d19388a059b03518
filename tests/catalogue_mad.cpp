// Catalogue of bad inputs (tests/catalogue.h): MAD's synthetic tasks (`rmt generate mad_*`,
// tasks/mad.h). Each impossible option is refused before anything is written, naming the option and
// why; mad_compression is refused naming the readout it would need.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lib/files/io.h"
#include "tests/catalogue.h"

namespace {

const std::string kSizes = " --train 20 --val 5 --test 5 --out {dir}/d";

// {dir}/d: a tiny dataset of `task` with `options`, then `from` replaced by `to` in its meta.yaml.
void edited_mad(const std::string& dir, const std::string& task, const std::string& options, const std::string& from,
                const std::string& to) {
  const std::string cmd = std::string(RMT_BINARY) + " generate " + task + " " + options +
                          " --train 20 --val 5 --test 5 --out " + dir + "/d >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("catalogue setup failed: " + cmd);
  std::string meta = rmt::read_file(dir + "/d/meta.yaml");
  const size_t at = meta.find(from);
  if (at == std::string::npos) throw std::runtime_error("catalogue setup: no '" + from + "' in meta.yaml");
  rmt::write_file_atomic(dir + "/d/meta.yaml", meta.replace(at, from.size(), to));
}

}  // namespace

RMT_CATALOGUE({
    {"generate", "mad_compression: refused, naming mad-lab's encoder-decoder", nullptr,
     "generate mad_compression" + kSizes, 1, "mad_compression is not offered: mad-lab's compression"},
    {"generate", "mad_recall: noise without noise ids", nullptr, "generate mad_recall --frac-noise 0.3" + kSizes, 1,
     "--frac-noise 0.3 needs noise ids: --noise-vocab-size is 0"},
    {"generate", "mad_noisy_recall: --frac-noise not a number", nullptr,
     "generate mad_noisy_recall --frac-noise lots" + kSizes, 1, "--frac-noise 'lots' must be a number in [0, 1)"},
    {"generate", "mad_recall: an odd --length", nullptr, "generate mad_recall --length 63" + kSizes, 1,
     "--length 63 must be even and at least 4"},
    {"generate", "mad_selective_copy: no room for the blanks", nullptr,
     "generate mad_selective_copy --length 33" + kSizes, 1,
     "--length 33 must be more than 2 x --tokens-to-copy 16 + 1"},
    {"generate", "mad_fuzzy_recall: a key motif longer than the key ids", nullptr,
     "generate mad_fuzzy_recall --k-motif-size 8" + kSizes, 1, "--k-motif-size 8 is longer than the 7 key ids"},
    {"generate", "mad_fuzzy_recall's motifs given to mad_recall", nullptr,
     "generate mad_recall --v-motif-size 2" + kSizes, 1, "--v-motif-size is not an option of task mad_recall"},
    {"data", "mad_noisy_recall: meta.yaml's frac_noise not a number",
     [](const std::string& dir) {
       edited_mad(dir, "mad_noisy_recall", "--length 16", "frac_noise: 0.2", "frac_noise: x");
     },
     "data check {dir}/d", 1, "options.frac_noise 'x' must be a number in [0, 1)"},
    {"data", "mad_selective_copy: meta.yaml's tokens_to_copy too many for its length",
     [](const std::string& dir) {
       edited_mad(dir, "mad_selective_copy", "--length 16 --tokens-to-copy 3", "tokens_to_copy: 3",
                  "tokens_to_copy: 9");
     },
     "data check {dir}/d", 1, "options.length 16 must be more than 2 x options.tokens_to_copy 9 + 1"},
});
