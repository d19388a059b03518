// `rmt attn`: attention maps of a trained run as heat maps (docs/paper.md §4, Figures 6 and 8)
// and as JSON numbers. The work is in lib/experiments/attention_map.cpp.
#include <cstdio>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/experiments/attention_map.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"
#include "lib/run/config.h"
#include "lib/run/run_data.h"

namespace rmt::cli {

namespace fs = std::filesystem;

namespace {

// A flag's index must be in 0..count-1; `has` says what there is ("the model has 2 layers").
void check_index(const char* flag, int value, int count, const std::string& has) {
  if (value < 0 || value >= count)
    fail("{} {} is out of range: {} (valid: {})", flag, value, has,
         count == 1 ? std::string("0") : fmt::format("0..{}", count - 1));
}

std::vector<int> all_or(int count, bool given, int value) {
  if (given) return {value};
  std::vector<int> v(size_t(count), 0);
  for (int i = 0; i < count; ++i) v[size_t(i)] = i;
  return v;
}

// The directory of an output file must exist or be creatable; says which flag it is for.
void prepare_output(const char* flag, const std::string& path) {
  const fs::path p(path);
  if (path.empty() || p.filename().empty()) fail("{} '{}': not a file name", flag, path);
  if (fs::is_directory(p)) fail("{} {}: is a directory", flag, path);
  if (!p.has_parent_path()) return;
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  if (ec || !fs::is_directory(p.parent_path()))
    fail("{} {}: cannot create its directory {}: {}", flag, path, p.parent_path().string(),
         ec ? ec.message() : "not a directory");
}

}  // namespace

void add_attn_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "attn", "Draw a trained run's attention probabilities as heat maps (paper Figures 6 and 8)");
  cmd->footer(
      "One panel per layer, segment and head: layers as rows; segments, then heads, as columns. "
      "Without --segment every segment is drawn side by side (the memory written at the end of "
      "one segment is read at the start of the next); without --layer / --head every layer / "
      "head. Rows are queries, columns keys; darkness is the probability, masked cells blue-hatched, "
      "red lines separate the blocks (cache, read memory, tokens, write memory). Ticks show the "
      "input symbols, r<i> / w<i> for memory slot i of the read / write block. Indices are "
      "0-based. The model runs in evaluation mode (no dropout) on one sample of the run's own "
      "dataset (config.yaml's data).\n"
      "Example: rmt attn --run runs/rmt_copy6 --sample 0 --out attn.png --dump attn.json");
  struct Args {
    std::string run, checkpoint = "best", split = "test", out, dump, device;
    int sample = 0, segment = 0, layer = 0, head = 0, threads = 0;
    bool allow_changed_data = false;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--run", args->run, "Run directory written by rmt train")->required();
  cmd->add_option("--checkpoint", args->checkpoint, "best | last | a .safetensors file")->capture_default_str();
  cmd->add_option("--split", args->split, "train | val | test")->capture_default_str()
      ->check(one_of({"train", "val", "test"}));
  // Indices: only the type here; check_index names the valid range once the run is loaded.
  cmd->add_option("--sample", args->sample, "Sample index in the split")->capture_default_str()->transform(an_int());
  auto* segment = cmd->add_option("--segment", args->segment, "Only this segment (default: all, side by side)")
      ->transform(an_int());
  auto* layer = cmd->add_option("--layer", args->layer, "Only this layer (default: all, as rows)")->transform(an_int());
  auto* head = cmd->add_option("--head", args->head, "Only this head (default: all, as columns)")->transform(an_int());
  cmd->add_option("--out", args->out, "Picture file, .png, .svg, .pdf or .eps (needs gnuplot; .pdf and .eps its cairo terminals)");
  cmd->add_option("--dump", args->dump,
                  "Write the probabilities, mask, blocks and labels as JSON ('-': stdout); --out, --dump or both");
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)")->transform(thread_count());
  add_device_option(cmd, args->device, "the device the run was trained on");
  add_allow_changed_data_flag(cmd, args->allow_changed_data);
  cmd->callback([args, segment, layer, head] {
    if (args->out.empty() && args->dump.empty())
      throw CLI::RequiredError("--out FILE.png|FILE.svg or --dump FILE.json");
    std::string format;
    if (!args->out.empty()) format = figure_format(args->out);  // svg, png, pdf or eps
    if (args->dump == "/dev/stdout") args->dump = "-";  // written as '-' is, not replaced
    std::vector<NamedPath> outputs;
    if (!args->dump.empty() && args->dump != "-") outputs.push_back({"--dump", args->dump});
    if (!args->out.empty()) outputs.push_back({"--out", args->out});
    check_outputs_safe(outputs, trained_run_inputs(args->run, args->checkpoint));
    for (const NamedPath& o : outputs) prepare_output(o.option.c_str(), o.path);
    check_threads(args->threads, "--threads");

    check_run_dataset_unchanged(args->run, args->allow_changed_data);
    TrainedRun t = load_trained_run(args->run, args->checkpoint, args->device);
    const Model& model = *t.model;
    const int segments = int(t.run.seg_len.size());
    if (layer->count())
      check_index("--layer", args->layer, model.L, fmt::format("the model has {} layers", model.L));
    if (head->count())
      check_index("--head", args->head, model.H, fmt::format("the model has {} heads", model.H));
    if (segment->count())
      check_index("--segment", args->segment, segments,
                  fmt::format("the run has {} segments ({})", segments, describe_segments(t.run.seg_len)));
    set_num_threads(args->threads);
    SampleSplit split = load_sample_split(t.run.config.data, t.run.meta, args->split);
    check_index("--sample", args->sample, int(std::min<int64_t>(split.n, INT32_MAX)),
                fmt::format("the {} split of {} has {} samples", args->split, t.run.config.data, split.n));

    AttentionMaps maps = compute_attention_maps(*t.model, t.run.meta.vocab,
                                                split.input.data() + int64_t(args->sample) * split.seq_len,
                                                split.seq_len, t.run.seg_len);
    AttentionSelection sel{all_or(segments, segment->count() > 0, args->segment),
                           all_or(model.L, layer->count() > 0, args->layer),
                           all_or(model.H, head->count() > 0, args->head)};
    // The numbers first: they are written even where gnuplot is missing or fails.
    if (!args->dump.empty()) {
      nlohmann::json about{{"run", args->run}, {"checkpoint", t.checkpoint_path},
                           {"split", args->split}, {"sample", args->sample},
                           {"task", t.run.meta.task}};
      const std::string text = attention_maps_json(maps, sel, about.dump());
      if (args->dump == "-") {
        std::fwrite(text.data(), 1, text.size(), stdout);
      } else {
        write_file_atomic(args->dump, text);
        std::fprintf(stderr, "wrote %s\n", args->dump.c_str());
      }
    }
    if (!args->out.empty()) {
      const std::string title = fmt::format(
          "{}: {} on {}, {} sample {}, checkpoint {}", args->run, model.config.kind,
          t.run.meta.task, args->split, args->sample, fs::path(t.checkpoint_path).filename().string());
      write_file_atomic(args->out, run_gnuplot(attention_gnuplot_script(maps, sel, format, title)));
      std::fprintf(stderr, "wrote %s\n", args->out.c_str());
    }
  });
}

}  // namespace rmt::cli
