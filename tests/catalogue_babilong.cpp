// Catalogue of bad inputs (tests/catalogue.h) for the BABILong-style tasks (memorize,
// detect_memorize, reasoning; tasks/babilong.h): `rmt generate` options that do not fit the task,
// a noise text that cannot make the vocabulary, and meta.yaml options that contradict each other.
#include <filesystem>
#include <string>

#include "lib/files/io.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tests/catalogue.h"

namespace fs = std::filesystem;

namespace {

// {dir}/words.txt: a text of 6 distinct words besides the task's own ("where", "is", "Mary").
void small_text(const std::string& dir) {
  rmt::write_file_atomic(dir + "/words.txt", "Where is Mary? The cat sat on the mat, the cat ran.\n");
}

// {dir}/d: a tiny memorize dataset (length 16, train 20, val 5, test 5), meta.yaml edited.
void memorize_with_meta(const std::string& dir, const std::string& from, const std::string& to) {
  rmt::GenerateRequest r;
  rmt::TaskArgs a;
  a.length = 16;
  r.task = rmt::resolve_task("memorize", a);
  r.sizes = {20, 5, 5};
  r.seed = 1;
  r.out_dir = dir + "/d";
  rmt::generate_dataset(r);
  const std::string meta = dir + "/d/meta.yaml";
  std::string text = rmt::read_file(meta);
  text.replace(text.find(from), from.size(), to);
  rmt::write_file_atomic(meta, text);
}

}  // namespace

RMT_CATALOGUE({
    {"generate", "memorize: a length without room for the facts and the question", nullptr,
     "generate memorize --length 7 --out {dir}/d", 1,
     "--length 7 is too short for memorize: 1 fact (1 supporting + 0 distractors) of 4 tokens and the 4-token "
     "question need a length of at least 8"},
    {"generate", "reasoning: segments too short for 3 facts and 2 distractors", nullptr,
     "generate reasoning --facts 3 --segments 3 --segment-length 7 --out {dir}/d", 1,
     "--segments 3 x --segment-length 7 = 21 is too short for reasoning: 5 facts (3 supporting + 2 distractors) of 4 "
     "tokens and the 4-token question need a length of at least 24"},
    {"generate", "memorize --facts 3", nullptr, "generate memorize --facts 3 --out {dir}/d", 1,
     "--facts 3: memorize has one supporting fact (--facts 1, or leave it out); reasoning has 2 or 3"},
    {"generate", "reasoning --facts 4 (above the table's 1..3)", nullptr, "generate reasoning --facts 4 --out {dir}/d",
     1, "--facts must be from 1 to 3 (got 4)"},
    {"generate", "reasoning --facts 1", nullptr, "generate reasoning --facts 1 --out {dir}/d", 1,
     "--facts must be 2 or 3 for reasoning"},
    {"generate", "more distractors than people", nullptr, "generate detect_memorize --distractors 8 --out {dir}/d", 1,
     "--distractors must be from 0 to 7 (got 8)"},
    {"generate", "--noise text without --noise-text", nullptr, "generate memorize --noise text --out {dir}/d", 1,
     "--noise text needs --noise-text FILE: the text whose words are the noise"},
    {"generate", "--noise-text without --noise text", small_text,
     "generate memorize --noise-text {dir}/words.txt --out {dir}/d", 1,
     "--noise-text is the file of --noise text; add --noise text"},
    {"generate", "an unknown --noise", nullptr, "generate reasoning --noise music --out {dir}/d", 1,
     "--noise must be filler or text (got 'music')"},
    {"generate", "--length with --segments", nullptr,
     "generate memorize --length 64 --segments 4 --segment-length 16 --out {dir}/d", 1,
     "--length and --segments/--segment-length both give the length"},
    {"generate", "--segments without --segment-length", nullptr, "generate memorize --segments 4 --out {dir}/d", 1,
     "--segments needs --segment-length too"},
    {"generate", "an option of another task (--pairs for memorize)", nullptr,
     "generate memorize --pairs 3 --out {dir}/d", 1, "--pairs is not an option of task memorize"},
    {"generate", "an option of another task (--symbols for reasoning)", nullptr,
     "generate reasoning --symbols 3 --out {dir}/d", 1, "--symbols is not an option of task reasoning"},
    {"generate", "a BABILong-style option for copy", nullptr, "generate copy --distractors 2 --out {dir}/d", 1,
     "--distractors is not an option of task copy (it is one of memorize, detect_memorize and reasoning)"},
    {"generate", "a BABILong-style option for text", nullptr, "generate text --input x --noise filler --out {dir}/d", 1,
     "--noise is not an option of task text"},
    {"generate", "a noise text with fewer words than --noise-words", small_text,
     "generate memorize --noise text --noise-text {dir}/words.txt --noise-words 10 --out {dir}/d", 1,
     "words.txt has 6 distinct words besides the task's own, fewer than --noise-words 10"},
    {"generate", "a noise text without words",
     [](const std::string& dir) { rmt::write_file_atomic(dir + "/empty.txt", "123 456, ... !\n"); },
     "generate memorize --noise text --noise-text {dir}/empty.txt --out {dir}/d", 1,
     "empty.txt has no words (runs of the letters a-z)"},
    {"generate", "a noise text that does not exist", nullptr,
     "generate memorize --noise text --noise-text {dir}/none.txt --out {dir}/d", 1, "none.txt: no such file"},
    {"meta.yaml", "memorize with options.facts 2",
     [](const std::string& dir) { memorize_with_meta(dir, "facts: 1", "facts: 2"); }, "data check {dir}/d", 1,
     "meta.yaml: options.facts 2: memorize has one supporting fact"},
    {"meta.yaml", "a length too short for options.distractors",
     [](const std::string& dir) { memorize_with_meta(dir, "distractors: 0", "distractors: 3"); },
     "data check {dir}/d", 1, "meta.yaml: options.length 16 is too short for memorize"},
    {"meta.yaml", "options.distractors more than the other people",
     [](const std::string& dir) { memorize_with_meta(dir, "distractors: 0", "distractors: 8"); },
     "data check {dir}/d", 1,
     "meta.yaml: options.distractors 8 is too many: distractors are facts of the other people, one each, and there "
     "are 7 people besides the question's, so at most 7"},
    {"meta.yaml", "options.noise unknown",
     [](const std::string& dir) { memorize_with_meta(dir, "noise: filler", "noise: pink"); }, "data check {dir}/d", 1,
     "meta.yaml: options.noise must be filler or text (got 'pink')"},
    {"meta.yaml", "text noise without its file's name",
     [](const std::string& dir) { memorize_with_meta(dir, "noise: filler", "noise: text"); }, "data check {dir}/d", 1,
     "meta.yaml: missing key 'options.noise_text'"},
    {"data check", "BABILong-style files without meta.yaml",
     [](const std::string& dir) {
       memorize_with_meta(dir, "seed: 1", "seed: 1");
       fs::remove(dir + "/d/meta.yaml");
     },
     "data check {dir}/d", 1, "the files are of the task memorize, whose options and vocabulary only meta.yaml "
                              "records"},
});
