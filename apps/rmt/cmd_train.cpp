// rmt train, rmt eval, and rmt step-dump (one training step's tensors, for golden tests).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/core/model.h"
#include "lib/files/io.h"
#include "lib/run/run_data.h"
#include "lib/run/run_directory.h"
#include "lib/run/curriculum.h"
#include "lib/run/eval_run.h"
#include "lib/run/step_dump.h"
#include "lib/run/train.h"

namespace rmt::cli {

namespace fs = std::filesystem;

static std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = int64_t(s);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

static void print_progress(const TrainProgress& p, bool tty, FILE* out = stderr) {
  if (p.note) {  // an event: its own line
    std::fprintf(out, "%s%s\n", tty ? "\r\033[K" : "", p.note->c_str());
    std::fflush(out);
    return;
  }
  double rate = p.step > 0 ? p.elapsed_s / double(p.step) : 0;
  std::string val = p.val_acc ? fmt::format("{:.4f}", *p.val_acc) : "-";
  if (p.val_bpc) val = fmt::format("{:.4f}", *p.val_bpc);  // a language model: bits per character
  // A language model's training loss in bits per byte, as its validation (loss in nats / ln 2).
  const std::string loss = p.lm ? fmt::format("train bpc {:.4f}", p.loss / std::log(2.0)) : fmt::format("loss {:.4f}", p.loss);
  std::string line = fmt::format(
      "step {}/{} | {} | val {} {} | lr {:.2e} | {:.0f} tok/s | elapsed {} | ETA {}",
      p.step, p.max_steps, loss, p.lm ? "bpc" : "acc", val, p.lr, p.tokens_per_s, duration_text(p.elapsed_s),
      duration_text(rate * double(p.max_steps - p.step)));
  if (tty) {
    std::fprintf(out, "\r\033[K%s", line.c_str());
    if (p.step == p.max_steps && p.is_eval) std::fprintf(out, "\n");
  } else {
    std::fprintf(out, "%s%s\n", line.c_str(), p.is_eval ? " [eval]" : "");
  }
  std::fflush(out);
}

// The config of `train --out R`: --config's, else with --resume the run's own R/config.yaml (a
// resume continues the run as it was started), else the defaults; --set applies on top.
static Config train_config(const std::string& config_file, const std::string& out, bool resume) {
  if (!config_file.empty()) return load_config(config_file);
  const fs::path saved = fs::path(out) / "config.yaml";
  if (!resume || !fs::is_regular_file(saved)) return Config{};
  fmt::print(stderr, "resuming with the run's saved config {}\n", saved.string());
  return load_config(saved.string());
}

static void print_start(const RunSetup& run, int64_t params, int64_t start, FILE* out = stderr) {
  fmt::print(out, "{}\n", run.family->start_line(run, params, start, num_threads()));
}

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a model from a YAML config");
  cmd->footer("Config keys (defaults = the paper's recipe): " + fmt::format("{}", fmt::join(config_keys(), ", ")) +
              "\nExample: rmt train --config experiments/train_rmt_copy6.yaml --set model.kind=xl --out runs/x\n"
              "(the data the config names first: rmt generate copy --length 6 --train 20000 --val 500 --test 1000 "
              "--out runs/data/copy6; experiments/*.yaml with a grid: are sweep files, for rmt sweep)");
  struct Args {
    std::string config, out, device;
    std::vector<std::string> sets;
    bool resume = false;
    int64_t abort_after_step = 0;
    int threads = -1;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--abort-after-step", args->abort_after_step, "tests: die after this step")->group("")
      ->transform(int_range(0));
  cmd->add_option("--config", args->config, "YAML config file (with --resume, default: the run's config.yaml)")->check(existing_file());
  cmd->add_option("--set", args->sets, "Override a config key: --set model.kind=xl (repeatable)");
  cmd->add_option("--out", args->out, "Run directory (checkpoints, metrics, results)")->required();
  cmd->add_flag("--resume", args->resume, "Continue the run in --out from its last checkpoint");
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores, or OMP_NUM_THREADS where set); "
                  "--threads N is --set train.threads=N")->transform(thread_count());
  add_device_option(cmd, args->device, "the config's device; --device X is --set device=X");
  cmd->callback([args] {
    check_output_dir("--out", args->out);
    // The run's files must not be written over the config it reads. config.yaml is left out: a
    // directory holding one is refused without --resume, and with it that is the run's own saved
    // config, rewritten with the same keys.
    std::vector<NamedPath> run_files;
    for (const std::string& f : kRunFiles)
      if (f != "config.yaml") run_files.push_back({"--out", (fs::path(args->out) / f).string()});
    if (!args->config.empty()) check_outputs_not_inputs(run_files, {{"--config", args->config}});
    Config config = train_config(args->config, args->out, args->resume);
    for (const auto& s : args->sets) apply_override(config, s);
    if (!args->device.empty()) config.device = args->device;  // checked as the config's device
    if (args->threads >= 0) config.train.threads = args->threads;
    TrainOptions opt;
    opt.run_dir = args->out;
    opt.resume = args->resume;
    opt.abort_after_step = args->abort_after_step;
    const bool tty = ::isatty(2);
    opt.on_progress = [tty](const TrainProgress& p) { print_progress(p, tty); };
    opt.on_start = [](const RunSetup& run, int64_t params, int64_t start) { print_start(run, params, start); };
    train(config, opt);
    std::printf("%s", read_file(fs::path(args->out) / "results.json").c_str());
  });
}

// `rmt train-pack`: what `rmt sweep --pack K` runs, one process per pack (lib/run/train.h
// train_packed). Hidden: a user trains packed runs through the sweep.
void add_train_pack_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train-pack", "Train runs packed into one computation (what rmt sweep --pack runs)");
  cmd->group("");  // not listed: rmt sweep --pack starts it
  cmd->footer("LIST has one run a line: CONFIG<TAB>RUN_DIR<TAB>new|resume (resume: the run's own saved\n"
              "config). Each run's progress goes to RUN_DIR/train.log, and the error that stopped it too.");
  struct Args {
    std::string list;
    int slots = 2, threads = 1;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("list", args->list, "The runs")->required()->check(existing_file());
  cmd->add_option("--pack", args->slots, "Runs trained at a time")->capture_default_str()->transform(int_range(1, 4096));
  cmd->add_option("--threads", args->threads, "Runs whose kernels run at a time (CPU)")
      ->capture_default_str()->transform(int_range(1, kMaxThreads));
  cmd->callback([args] {
    std::vector<TrainJob> jobs;
    std::vector<std::string> errors;
    std::istringstream in(read_file(args->list));
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.empty()) continue;
      std::vector<std::string> f;
      for (size_t start = 0;;) {
        const size_t tab = line.find('\t', start);
        f.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
        if (tab == std::string::npos) break;
        start = tab + 1;
      }
      if (f.size() != 3 || (f[2] != "new" && f[2] != "resume"))
        fail("{} line {}: expected CONFIG<TAB>RUN_DIR<TAB>new|resume", args->list, line_no);
      TrainJob job;
      job.options.run_dir = f[1];
      job.options.resume = f[2] == "resume";
      job.config = load_config(job.options.resume ? (fs::path(f[1]) / "config.yaml").string() : f[0]);
      const std::string log = (fs::path(f[1]) / "train.log").string();
      job.options.on_progress = [log](const TrainProgress& p) {
        if (FILE* out = std::fopen(log.c_str(), "a")) {
          print_progress(p, false, out);
          std::fclose(out);
        }
      };
      job.options.on_start = [log](const RunSetup& run, int64_t params, int64_t start) {
        if (FILE* out = std::fopen(log.c_str(), "a")) {
          print_start(run, params, start, out);
          std::fclose(out);
        }
      };
      jobs.push_back(std::move(job));
    }
    const std::vector<std::string> outcome = train_packed(jobs, args->slots, args->threads);
    int failed = 0;
    for (size_t j = 0; j < jobs.size(); ++j) {
      if (outcome[j].empty()) continue;
      ++failed;
      append_line(fs::path(jobs[j].options.run_dir) / "train.log", "rmt: error: " + outcome[j]);
      fmt::print(stderr, "rmt: {}: {}\n", jobs[j].options.run_dir, outcome[j]);
    }
    if (failed > 0) fail("{} of {} packed runs failed", failed, jobs.size());
  });
}

void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Evaluate a trained run on a split (prints one JSON object)");
  cmd->footer("Length generalisation: --data DIR evaluates on another dataset of the run's task "
              "(same task kind and symbols, e.g. longer sequences); without --segments its "
              "samples are split into ceil(seq_len / the trained longest segment length) "
              "segments, so the segments keep the trained length.\n"
              "Example: rmt eval runs/copy6 --data runs/data/copy24   (or --run runs/copy6)");
  auto req = std::make_shared<EvalRunRequest>();
  const int int_max = std::numeric_limits<int>::max();
  auto* run_opt = cmd->add_option("--run", req->run_dir, "Run directory written by rmt train")->check(existing_dir());
  auto run_positional = std::make_shared<std::string>();
  auto* run_arg = cmd->add_option("run", *run_positional, "Run directory written by rmt train (or --run)")
                      ->check(existing_dir())->excludes(run_opt);
  cmd->add_option("--split", req->split, "train | val | test")->capture_default_str()
      ->check(one_of({"train", "val", "test"}));
  cmd->add_option("--data", req->data_dir,
                  "Evaluate on this dataset of the run's task instead of the run's own (default: the run's)")
      ->check(existing_dir());
  cmd->add_option("--segments", req->segments,
                  "Number of segments (default: as trained; with --data, as many as keep the trained "
                  "segment length)")
      ->transform(int_range(1, int_max));
  cmd->add_option("--segment-length", req->segment_length,
                  "With --data: segments of this many positions (default: the trained longest segment)")
      ->transform(int_range(1, int_max));
  cmd->add_option("--checkpoint", req->checkpoint, "best | last | a .safetensors file")->capture_default_str();
  cmd->add_option("--batch-size", req->batch_size, "Evaluation batch (default: the training batch)")
      ->transform(int_range(1, int_max));
  cmd->add_option("--samples", req->samples, "Evaluate only the first N samples (default: all)")
      ->transform(int_range(1));
  cmd->add_option("--threads", req->threads, "CPU threads (0 = all cores)")->transform(thread_count());
  cmd->add_option("--predictions", req->predictions,
                  "Also write each sample's input, target and prediction (greedy decoding) to FILE, one JSON "
                  "object a line");
  auto schedule = std::make_shared<std::string>("sequential");
  cmd->add_option("--schedule", *schedule,
                  "sequential | diagonal: the order of the teacher-forced pass. diagonal (model.kind "
                  "armt only) runs the layer-steps of each diagonal of the (segment, layer) grid at "
                  "once on the CPU's threads, with the same results bit for bit (docs/armt.md, "
                  "\"Diagonal evaluation\"); greedy decoding runs the segments before the answer's so, and "
                  "the answer's segments one by one")
      ->check(one_of({"sequential", "diagonal"}))->capture_default_str();
  cmd->add_flag("--count-non-finite", req->count_non_finite,
                "Score a sample whose outputs are not finite numbers (a memory that overflows far past "
                "the trained length) as a wrong answer and report how many (non_finite_samples; the "
                "loss is then null) instead of failing");
  add_device_option(cmd, req->device, "the device the run was trained on");
  auto allow_changed = std::make_shared<bool>(false);
  add_allow_changed_data_flag(cmd, *allow_changed);
  cmd->callback([req, allow_changed, run_opt, run_arg, run_positional, schedule] {
    if (run_arg->count() > 0) req->run_dir = *run_positional;
    req->schedule = parse_eval_schedule(*schedule);
    if (run_opt->count() == 0 && run_arg->count() == 0) throw CLI::RequiredError("RUN (or --run)");
    // Before any work: the predictions must not be written over what the evaluation reads.
    if (!req->predictions.empty())
      check_outputs_not_inputs({{"--predictions", req->predictions}},
                               trained_run_inputs(req->run_dir, req->checkpoint, req->data_dir));
    if (req->data_dir.empty()) check_run_dataset_unchanged(req->run_dir, *allow_changed);
    std::printf("%s\n", eval_run_json(evaluate_run(*req)).c_str());
  });
}

namespace {

struct StepDumpArgs {
  std::string checkpoint, input, target, out, bptt = "all", device = kDefaultDevice;
  int segments = 1, answer_size = 0, adam_steps = 0, segment_length = 0;
  int delta_chunk = -1;  // not given: the default form
  double lr = 1e-3, clip = 0.25, weight_decay = 0;
  bool update = false;
};

}  // namespace

void add_step_dump_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("step-dump",
      "Run one forward/backward on a given batch and write logits, loss and gradients "
      "(for golden tests against the PyTorch reference)");
  cmd->group("For tests");
  auto args = std::make_shared<StepDumpArgs>();
  const int int_max = std::numeric_limits<int>::max();
  cmd->add_option("--checkpoint", args->checkpoint, "Model checkpoint (.safetensors)")->required()->check(existing_file());
  cmd->add_option("--input", args->input, "int64 .npy [B, T] input ids")->required()->check(existing_file());
  cmd->add_option("--target", args->target, "int64 .npy [B, T] target ids")->required()->check(existing_file());
  auto* segments = cmd->add_option("--segments", args->segments, "Number of segments")->transform(int_range(1, int_max));
  cmd->add_option("--bptt", args->bptt, "all | 0 | k")->capture_default_str()
      ->check(CLI::Validator(
          [k = int_range(0, int_max)](std::string& s) -> std::string {
            if (s == "all" || k(s).empty()) return "";
            return "must be 'all' or an integer, at least 0 (got '" + s + "')";
          },
          "all|k"));
  auto* answer = cmd->add_option("--answer-size", args->answer_size,
                                 "Scored positions at the end of each row (required without --segment-length)")
      ->transform(an_int());
  auto* adam_steps = cmd->add_option("--adam-steps", args->adam_steps, "Also take this many Adam steps on the batch")
      ->transform(int_range(0, 1000000));
  auto* seg_len_opt = cmd->add_option("--segment-length", args->segment_length,
      "Language-model steps instead: the rows are B streams cut into segments of this length; "
      "step s trains on segment s of every stream with the state the step before carried "
      "(bptt k: the window of the k earlier segments re-run); writes step<s>/ for each")
      ->transform(int_range(1, int_max));
  auto* update = cmd->add_flag("--update", args->update,
      "With --segment-length: after each step clip the gradient (--clip) and take an Adam step (--lr), as training does");
  cmd->add_option("--delta-chunk", args->delta_chunk,
                  "deltanet, gated_deltanet: the delta rule's form (model.delta_chunk: 0 the recurrence, "
                  "C > 0 the chunked form with chunks of C rows; default: model.delta_chunk's default)")
      ->transform(int_range(0, 1024));
  seg_len_opt->excludes(segments)->excludes(answer)->excludes(adam_steps);
  update->needs(seg_len_opt);
  cmd->add_option("--lr", args->lr, "Adam learning rate")->capture_default_str()->check(number_range(0, HUGE_VAL, true));
  cmd->add_option("--clip", args->clip, "Gradient-norm clip (0: none)")->capture_default_str()
      ->check(number_range(0, HUGE_VAL));
  cmd->add_option("--weight-decay", args->weight_decay,
                  "AdamW's decoupled weight decay of the Adam steps, as train.weight_decay (0: Adam)")
      ->capture_default_str()->check(number_range(0, HUGE_VAL));
  cmd->add_option("--out", args->out, "Output directory")->required();
  add_device_option(cmd, args->device, kDefaultDevice);
  cmd->callback([args, answer] {
    if (args->segment_length == 0 && answer->count() == 0) throw CLI::RequiredError("--answer-size");
    check_output_dir("--out", args->out);
    std::vector<NamedPath> outputs;  // what step-dump writes into --out
    for (const std::string& f : kStepDumpFiles) outputs.push_back({"--out", (fs::path(args->out) / f).string()});
    check_outputs_safe(outputs, {{"--checkpoint", args->checkpoint}, {"--input", args->input},
                                 {"--target", args->target}});
    StepDumpRequest req;
    req.checkpoint = args->checkpoint;
    req.input = args->input;
    req.target = args->target;
    req.out = args->out;
    req.device = args->device;
    req.bptt = args->bptt == "all" ? -1 : std::stoi(args->bptt);  // checked by its validator
    req.lr = args->lr;
    req.clip = args->clip;
    req.weight_decay = args->weight_decay;
    req.segments = args->segments;
    req.answer_size = args->answer_size;
    req.adam_steps = args->adam_steps;
    req.segment_length = args->segment_length;
    req.update = args->update;
    req.delta_chunk = args->delta_chunk;
    const StepDumpResult r = step_dump(req);
    if (args->segment_length > 0)
      std::printf("losses %s; wrote %s\n", fmt::format("{:.8f}", fmt::join(r.losses, " ")).c_str(),
                  args->out.c_str());
    else
      std::printf("loss %.8f; wrote %s\n", r.losses.at(0), args->out.c_str());
  });
}

}  // namespace rmt::cli
