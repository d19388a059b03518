// `rmt generate TASK --out DIR ...`: parses options and prints a summary; the work is in tasks/.
#include <charconv>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/error.h"
#include "tasks/dataset.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tasks/text.h"

namespace rmt::cli {

namespace fs = std::filesystem;

namespace {
struct GenerateArgs {
  std::string task, out;
  std::string seed = "0";
  int64_t train = 0, val = 0, test = 0;
  int length = 0, symbols = 0, pairs = 0, max_root = 0, max_alpha = 0;
  int key_size = 0, value_size = 0;  // ar_remember, ar_rewrite
  int segments = 0, segment_length = 0, facts = 0, distractors = 0, noise_words = 0;  // BABILong-style
  std::string noise, noise_text;                                                      // BABILong-style
  bool force = false, check = false;
  std::string input, split = "90,5,5";  // text
  int64_t bytes = 0;                     // text
};
// 0..2^64-1, digits only: CLI11 would turn "-1" into 2^64-1.
uint64_t parse_seed(const std::string& text) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end)
    fail("--seed must be an integer in 0..18446744073709551615 (got '{}')", text);
  return v;
}
}  // namespace

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand(
      "generate", "Generate a dataset (copy, reverse, retrieval, sqeq, the paper's presets, the BABILong-style "
                  "memorize, detect_memorize, reasoning, ARMT's ar_remember, ar_rewrite, or text from a file)");
  cmd->footer(
      "Tasks: copy, reverse (L 24, 10 symbols), retrieval (4 pairs), sqeq, copy120, copy240, copy360,\n"
      "reverse120 (8 symbols); BABILong-style (facts hidden in noise, a question at the end): memorize,\n"
      "detect_memorize, reasoning (default length 64, 20000/500/1000 samples; docs/datasets.md).\n"
      "The ARMT paper's associative retrieval: ar_remember (distinct keys), ar_rewrite (keys repeat; the\n"
      "last value counts): --pairs blocks `key=value.` then `key?`, 16 symbols, one block a segment.\n"
      "Writes {task}_{split}_{X|y}.npy (int64) and meta.yaml (written last).\n"
      "Samples are drawn i.i.d. with std::mt19937_64, de-duplicated on X, shuffled, then split.\n"
      "text --input FILE: a byte-level language-modelling dataset (bytes as tokens, vocabulary 256): the\n"
      "first 90% of FILE is train, the next 5% val, the last 5% test (enwik8's 90M/5M/5M; --split to\n"
      "change it). Writes text_{train,val,test}.npy (1-D uint8) and meta.yaml (written last).");
  cmd->add_option("task", args->task, "Task or preset name")->required();
  cmd->add_option("--out", args->out, "Output directory (created if missing)")->required();
  cmd->add_option("--seed", args->seed, "PRNG seed; the same seed gives byte-identical files (default 0)");
  // tasks/ checks the sizes against the task, the memory and the disk; here only the type.
  auto* train = cmd->add_option("--train", args->train, "Training samples (default: the paper's size for the task)")
      ->transform(int_range(1));
  auto* val = cmd->add_option("--val", args->val, "Validation samples (default: the paper's size)")->transform(int_range(1));
  auto* test = cmd->add_option("--test", args->test, "Test samples (default: the paper's size)")->transform(int_range(1));
  const int int_max = std::numeric_limits<int>::max();
  // A task option's range as the task table states it (its largest over the tasks: length
  // 1..100000, --key-size 1..8), not int's; the task checks its own narrower one after.
  auto task_option_range = [](const char* key) {
    const auto bounds = task_option_bounds(key);
    return bounds ? int_range(bounds->first, bounds->second) : int_range(1, std::numeric_limits<int>::max());
  };
  auto* length = cmd->add_option("--length", args->length,
                                 "copy/reverse: symbols per sample L (default 24); BABILong-style: X's tokens, the "
                                 "model's input positions (default 64)")
      ->transform(task_option_range("length"));
  auto* symbols = cmd->add_option("--symbols", args->symbols, "copy/reverse: alphabet size V, ids 2..V+1 (default 10)")
      ->transform(task_option_range("symbols"));
  auto* pairs = cmd->add_option("--pairs", args->pairs,
                                "retrieval: key-value pairs K, 1..10 (default 4); ar_*: 1..100000 (default 10)")
      ->transform(task_option_range("pairs"));
  auto* key_size = cmd->add_option("--key-size,--key_size", args->key_size, "ar_*: symbols per key, 1..8 (default 1)")
      ->transform(task_option_range("key_size"));
  auto* value_size = cmd->add_option("--value-size,--value_size", args->value_size,
                                     "ar_*: symbols per value, 1..8 (default 1)")
      ->transform(task_option_range("value_size"));
  // The underscore spellings let a sweep's data block say max_root: / max_alpha:.
  auto* max_root = cmd->add_option("--max-root,--max_root", args->max_root,
                                   "sqeq: roots int(uniform(-R, R)), R in 2..208 (default: the paper's 100); "
                                   "samples without real roots scale with R: b in 0..2R-1, c up to R^2-1")
      ->transform(int_range(1, int_max));
  auto* max_alpha = cmd->add_option("--max-alpha,--max_alpha", args->max_alpha,
                                    "sqeq: multiplier ±round(uniform(1, A)) (default: the paper's 10; at most 9999 "
                                    "for R 100, so that the shown equation fits its 30 ids)")
      ->transform(int_range(1, int_max));
  auto* segments = cmd->add_option("--segments", args->segments,
                                   "BABILong-style: with --segment-length T, length S x T (instead of --length)")
      ->transform(int_range(1, int_max));
  auto* segment_length = cmd->add_option("--segment-length", args->segment_length,
                                         "BABILong-style: tokens per segment T (with --segments)")
      ->transform(int_range(1, int_max));
  auto* facts = cmd->add_option("--facts", args->facts,
                                "BABILong-style supporting facts: memorize, detect_memorize 1; reasoning 2 or 3 "
                                "(default 2)")
      ->transform(int_range(1, int_max));
  auto* distractors = cmd->add_option("--distractors", args->distractors,
                                      "BABILong-style: facts of other people, 0..7 (default: memorize 0, reasoning 2)")
      ->transform(int_range(0, int_max));
  auto* noise = cmd->add_option("--noise", args->noise,
                                "BABILong-style noise: filler (i.i.d. words w0..; default) or text (--noise-text)");
  auto* noise_text = cmd->add_option("--noise-text", args->noise_text,
                                     "BABILong-style --noise text: the file whose words are the noise");
  auto* noise_words = cmd->add_option("--noise-words", args->noise_words,
                                      "BABILong-style: noise vocabulary K (filler: w0..w{K-1}, default 32; text: the "
                                      "K most frequent words + <unk>, default 500)")
      ->transform(int_range(1, int_max));
  auto* input = cmd->add_option("--input", args->input, "text: the file whose bytes become the dataset");
  auto* split = cmd->add_option("--split", args->split,
                                "text: percent of the file for train,val,test in file order (default 90,5,5)");
  auto* bytes = cmd->add_option("--bytes", args->bytes,
                                "text: use only the first N bytes of --input (enwik8 is the first 10^8 bytes of a "
                                "Wikipedia dump); default: all of it")
      ->transform(int_range(1));
  cmd->add_flag("--force", args->force, "Overwrite dataset files already in --out");
  cmd->add_flag("--check", args->check, "Check that the dataset can be generated (options, input, sizes, memory, "
                                         "disk, --out and the files already there, the BABILong-style tasks' draw) "
                                         "and write nothing (what `rmt sweep --dry-run` runs)");
  cmd->callback([=] {
    auto given = [](CLI::Option* o, int v) { return o->count() ? std::optional<int>(v) : std::nullopt; };
    // What the writes need, checked before any work so that --check says no where they would fail.
    check_output_dir("--out", args->out);
    const std::vector<std::pair<const char*, CLI::Option*>> task_options = {
        {"--train", train},     {"--val", val},           {"--test", test},          {"--length", length},
        {"--symbols", symbols}, {"--pairs", pairs},       {"--max-root", max_root},  {"--max-alpha", max_alpha},
        {"--segments", segments}, {"--segment-length", segment_length}, {"--facts", facts},
        {"--distractors", distractors}, {"--noise", noise}, {"--noise-text", noise_text},
        {"--noise-words", noise_words}, {"--key-size", key_size}, {"--value-size", value_size}};
    if (args->task == "text") {
      // A text dataset is the file's bytes in order: nothing is drawn, so nothing to size or seed.
      for (auto [flag, o] : task_options)
        if (o->count()) fail("{} is not an option of task text (its splits are the shares of --split)", flag);
      if (cmd->count("--seed")) fail("--seed is not an option of task text: its dataset is the file's bytes, in order");
      if (!input->count() || args->input.empty()) fail("task text needs --input FILE: the text to split");
      std::vector<NamedPath> outputs{{"--out", (fs::path(args->out) / "meta.yaml").string()}};
      for (const char* s : {"train", "val", "test"}) outputs.push_back({"--out", text_split_file(args->out, s)});
      check_outputs_safe(outputs, {{"--input", args->input}});
      TextGenerateRequest r;
      r.input = args->input;
      r.out_dir = args->out;
      r.shares = parse_text_shares(args->split);
      if (bytes->count()) r.bytes = args->bytes;
      r.force = args->force;
      r.check_only = args->check;
      const TextGenerateResult res = generate_text_dataset(r);
      if (args->check) return fmt::print("text from {} can be generated into {}\n", args->input, args->out);
      const TextMeta& m = res.meta;
      fmt::print("generated text from {} ({} bytes{}, split {},{},{}): train {}, val {}, test {} bytes in {:.2f} s\n",
                 args->input, m.used, m.used == m.source_size ? "" : fmt::format(" of {}", m.source_size), m.shares[0],
                 m.shares[1], m.shares[2], m.counts[0], m.counts[1], m.counts[2], res.seconds);
      for (const std::string& f : res.files) fmt::print("  {}\n", f);
      return;
    }
    for (auto [flag, o] : {std::pair{"--input", input}, std::pair{"--split", split}, std::pair{"--bytes", bytes}})
      if (o->count()) fail("{} is an option of task text only (got task {})", flag, args->task);
    GenerateRequest r;
    auto given_text = [](CLI::Option* o, const std::string& v) {
      return o->count() ? std::optional<std::string>(v) : std::nullopt;
    };
    TaskArgs task_args;
    task_args.length = given(length, args->length);
    task_args.symbols = given(symbols, args->symbols);
    task_args.pairs = given(pairs, args->pairs);
    task_args.key_size = given(key_size, args->key_size);
    task_args.value_size = given(value_size, args->value_size);
    task_args.max_root = given(max_root, args->max_root);
    task_args.max_alpha = given(max_alpha, args->max_alpha);
    task_args.segments = given(segments, args->segments);
    task_args.segment_length = given(segment_length, args->segment_length);
    task_args.facts = given(facts, args->facts);
    task_args.distractors = given(distractors, args->distractors);
    task_args.noise_words = given(noise_words, args->noise_words);
    task_args.noise = given_text(noise, args->noise);
    task_args.noise_text = given_text(noise_text, args->noise_text);
    r.task = resolve_task(args->task, task_args);
    r.sizes = default_split_sizes(r.task);
    if (train->count()) r.sizes.train = args->train;
    if (val->count()) r.sizes.val = args->val;
    if (test->count()) r.sizes.test = args->test;
    r.seed = parse_seed(args->seed);
    r.out_dir = args->out;
    r.force = args->force;
    r.check_only = args->check;
    std::vector<NamedPath> outputs{{"--out", (fs::path(args->out) / "meta.yaml").string()}};
    for (const char* split : kSplits)
      for (const char* which : {"X", "y"}) outputs.push_back({"--out", dataset_file(args->out, r.task.name, split, which)});
    std::vector<NamedPath> inputs;
    if (noise_text->count()) inputs.push_back({"--noise-text", args->noise_text});
    check_outputs_safe(outputs, inputs);
    GenerateResult res = generate_dataset(r);
    if (args->check) return fmt::print("{} can be generated into {}\n", r.task.name, args->out);
    const auto summary = task_kind(r.task.kind).generated_summary;
    const std::string range = summary ? summary(r.task) : "";
    fmt::print("generated {} (seed {}{}): train {}, val {}, test {} samples in {:.2f} s\n", r.task.name, r.seed, range,
               r.sizes.train, r.sizes.val, r.sizes.test, res.seconds);
    for (const std::string& note : res.notes) fmt::print(stderr, "note: {}\n", note);
    for (const std::string& f : res.files) fmt::print("  {}\n", f);
  });
}

}  // namespace rmt::cli
