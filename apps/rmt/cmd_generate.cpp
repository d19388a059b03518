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
// A task option's CLI11 option and the value it reads (CLI11 keeps a pointer to it: task_flags
// is filled once, before the options are added).
struct TaskFlag {
  const TaskOptionInfo* info = nullptr;
  CLI::Option* option = nullptr;
  int value = 0;
  std::string text;
};
struct GenerateArgs {
  std::string task, out;
  std::string seed = "0";
  int64_t train = 0, val = 0, test = 0;
  // The task options (tasks/task_kind.h task_option_info), one per row of the table, in its order.
  std::vector<TaskFlag> task_flags;
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
                  "memorize, detect_memorize, reasoning, ARMT's ar_remember, ar_rewrite, Zoology's mqar, MAD's mad_*, or text from a file)");
  cmd->footer(
      "Tasks: copy, reverse (L 24, 10 symbols), retrieval (4 pairs), sqeq, copy120, copy240, copy360,\n"
      "reverse120 (8 symbols); BABILong-style (facts hidden in noise, a question at the end): memorize,\n"
      "detect_memorize, reasoning (default length 64, 20000/500/1000 samples; docs/datasets.md).\n"
      "The ARMT paper's associative retrieval: ar_remember (distinct keys), ar_rewrite (keys repeat; the\n"
      "last value counts): key-value blocks `key=value.` then `key?`, 16 symbols, one block a segment.\n"
      "Zoology's multi-query associative recall: mqar (--vocab-size 8192, --length 64, --pairs 8, --power-a\n"
      "0.01, --filler random; 20000/1000/1000): pairs, then each key queried once; y is -1 but at the queries.\n"
      "MAD's synthetic tasks (mad-lab's generators and baselines; y is -1 where mad-lab ignores a target):\n"
      "mad_recall, mad_noisy_recall (--vocab-size 16 / 32, --length 128, --noise-vocab-size 0 / 16,\n"
      "--frac-noise 0 / 0.2), mad_fuzzy_recall (--k-motif-size 3, --v-motif-size 3), mad_selective_copy\n"
      "(--length 256, --tokens-to-copy 16), mad_memorization (--vocab-size 256, --length 32, --kv-map-seed\n"
      "12345); 12800/1280/1280 samples (memorization 256 train). --targets next: mad-lab's training\n"
      "targets; --key-motifs longest: its fuzzy test keys. mad_compression is refused.\n"
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
  // The task options, as the task table states them: a flag, its help, its range (not int's;
  // the task checks its own narrower one after). The key's spelling, underscores for dashes, is an
  // alias, as a sweep's data block writes it.
  for (const TaskOptionInfo& info : task_option_info())
    if (info.flag) {
      TaskFlag flag;
      flag.info = &info;
      args->task_flags.push_back(flag);
    }
  for (TaskFlag& f : args->task_flags) {
    std::string names = fmt::format("--{}", f.info->flag);
    if (std::string(f.info->key) != f.info->flag) names += fmt::format(",--{}", f.info->key);
    if (f.info->arg)
      f.option = cmd->add_option(names, f.value, f.info->help)->transform(int_range(f.info->lo, f.info->hi));
    else
      f.option = cmd->add_option(names, f.text, f.info->help);
  }
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
    // What the writes need, checked before any work so that --check says no where they would fail.
    check_output_dir("--out", args->out);
    std::vector<std::pair<std::string, CLI::Option*>> task_options = {{"--train", train}, {"--val", val}, {"--test", test}};
    for (const TaskFlag& f : args->task_flags) task_options.push_back({fmt::format("--{}", f.info->flag), f.option});
    if (args->task == "text") {
      // A text dataset is the file's bytes in order: nothing is drawn, so nothing to size or seed.
      for (const auto& [flag, o] : task_options)
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
    TaskArgs task_args;
    std::vector<NamedPath> inputs;  // the files the task options name (kReadsFile): never an output
    for (const TaskFlag& f : args->task_flags) {
      if (!f.option->count()) continue;
      if (f.info->arg) task_args.*f.info->arg = f.value;
      else task_args.*f.info->arg_text = f.text;
      if (f.info->traits & kReadsFile) inputs.push_back({fmt::format("--{}", f.info->flag), f.text});
    }
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
