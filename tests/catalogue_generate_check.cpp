// Catalogue of bad inputs (tests/catalogue.h): `rmt generate --check` (what `rmt sweep --dry-run`
// runs) said yes where `rmt generate` says no. The check now runs every test the command runs
// before it writes: the output directory, the files already there without --force, and, for a
// BABILong-style task with text noise, the draw that finds too few distinct samples.
#include <filesystem>
#include <string>

#include "lib/files/io.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tests/catalogue.h"

namespace fs = std::filesystem;

namespace {

const std::string kCopy = "generate copy --length 4 --symbols 4 --train 40 --val 8 --test 8";

// {dir}/d: the copy dataset kCopy makes.
void copy_dataset(const std::string& dir) {
  rmt::GenerateRequest g;
  g.task = rmt::resolve_task("copy", 4, 4);
  g.sizes = {40, 8, 8};
  g.out_dir = dir + "/d";
  rmt::generate_dataset(g);
}

// {dir}/words.txt: 10 distinct words repeated 30 times: 300 words, yet only 10 distinct runs of
// noise, far fewer than the estimate from its length.
void repetitive_text(const std::string& dir) {
  std::string text;
  for (int i = 0; i < 30; ++i) text += "apple banana cherry grape lemon mango melon peach pear plum ";
  rmt::write_file_atomic(dir + "/words.txt", text);
}

}  // namespace

RMT_CATALOGUE({
    {"generate", "--check: the dataset is already in --out (no --force)", copy_dataset,
     kCopy + " --out {dir}/d --check", 1, "/d/meta.yaml already exists; pass --force to overwrite the dataset in {dir}/d"},
    {"generate", "--check: --out is a file", [](const std::string& dir) { rmt::write_file_atomic(dir + "/f", "x"); },
     kCopy + " --out {dir}/f --check", 1, "--out {dir}/f: exists and is not a directory"},
    {"generate", "--check: --out under a file", [](const std::string& dir) { rmt::write_file_atomic(dir + "/f", "x"); },
     kCopy + " --out {dir}/f/d --check", 1, "--out {dir}/f/d: {dir}/f is not a directory"},
    {"generate", "--check text: the dataset is already in --out (no --force)",
     [](const std::string& dir) {
       copy_dataset(dir);
       repetitive_text(dir);
     },
     "generate text --input {dir}/words.txt --out {dir}/d --check", 1, "/d/meta.yaml already exists; pass --force"},
    {"generate", "--check memorize: a repetitive --noise-text has too few distinct samples", repetitive_text,
     "generate memorize --noise text --noise-text {dir}/words.txt --noise-words 9 --train 3000 --val 1 --test 1 "
     "--out {dir}/d --check", 1, "memorize: found only 2560 distinct samples of 3002 requested"},
});
