// Catalogue of bad inputs (tests/catalogue.h): Zoology's MQAR (`rmt generate mqar`, tasks/mqar.h).
// Each impossible option is refused before anything is written, naming the option and its limit.
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "lib/files/io.h"
#include "tests/catalogue.h"

namespace {

const std::string kMqar = "generate mqar --train 20 --val 5 --test 5 --out {dir}/d";

// {dir}/d: a tiny mqar dataset, then `from` replaced by `to` in its meta.yaml.
void edited_mqar(const std::string& dir, const std::string& from, const std::string& to) {
  const std::string cmd = std::string(RMT_BINARY) + " generate mqar --vocab-size 16 --length 16 --pairs 2 "
                          "--train 20 --val 5 --test 5 --out " + dir + "/d >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("catalogue setup failed: " + cmd);
  std::string meta = rmt::read_file(dir + "/d/meta.yaml");
  const size_t at = meta.find(from);
  if (at == std::string::npos) throw std::runtime_error("catalogue setup: no '" + from + "' in meta.yaml");
  rmt::write_file_atomic(dir + "/d/meta.yaml", meta.replace(at, from.size(), to));
}

}  // namespace

RMT_CATALOGUE({
    {"generate", "mqar: an odd --length", nullptr, kMqar + " --length 63", 1,
     "--length 63 must be even: the queries sit at even offsets after the pairs"},
    {"generate", "mqar: more pairs than the length holds", nullptr, kMqar + " --length 32 --pairs 9", 1,
     "--pairs 9 is too many for --length 32: the pairs take 2 positions each and their queries need as many after "
     "them, so at most 8"},
    {"generate", "mqar: more pairs than distinct keys", nullptr, kMqar + " --vocab-size 8 --pairs 4", 1,
     "--pairs 4 is too many for --vocab-size 8: the keys are distinct ids 1..3 (3 of them)"},
    {"generate", "mqar: a --vocab-size below 4", nullptr, kMqar + " --vocab-size 3", 1,
     "--vocab-size must be from 4 to 1048576 (got 3)"},
    {"generate", "mqar: --power-a not a positive number", nullptr, kMqar + " --power-a 0", 1,
     "--power-a '0' must be a number in (0, 100]"},
    {"generate", "mqar: Zoology's own filler (keys included)", nullptr, kMqar + " --filler zoology", 1,
     "--filler zoology is not offered: Zoology's filler may repeat a sample's key"},
    {"generate", "mqar: an unknown --filler", nullptr, kMqar + " --filler noise", 1,
     "--filler 'noise' is not one of random, zero"},
    {"generate", "mqar's options given to another task", nullptr,
     "generate copy --vocab-size 64 --out {dir}/d", 1, "--vocab-size is not an option of task copy"},
    {"data", "mqar: meta.yaml's pairs too many for its length",
     [](const std::string& dir) { edited_mqar(dir, "pairs: 2", "pairs: 5"); }, "data check {dir}/d", 1,
     "options.pairs 5 is too many for options.length 16"},
    {"data", "mqar: meta.yaml's filler unknown",
     [](const std::string& dir) { edited_mqar(dir, "filler: random", "filler: some"); }, "data check {dir}/d", 1,
     "options.filler 'some' is not one of random, zero"},
    {"data check", "mqar: meta.yaml with imported's unscored_targets",
     [](const std::string& dir) { edited_mqar(dir, "stacked: false", "stacked: false\nunscored_targets: false"); },
     "data check {dir}/d", 1,
     "{dir}/d/meta.yaml: 'unscored_targets' is a key of imported datasets (rmt data import); kind mqar implies "
     "whether y holds unscored positions"},
});
