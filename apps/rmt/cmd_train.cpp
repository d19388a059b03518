// rmt train, rmt eval, and rmt step-dump (one training step's tensors, for golden tests).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/optim.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "lib/files/safetensors.h"
#include "lib/run/checkpoint.h"
#include "lib/run/lm.h"
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

static void print_progress(const TrainProgress& p, bool tty) {
  double rate = p.step > 0 ? p.elapsed_s / double(p.step) : 0;
  std::string val = p.val_acc ? fmt::format("{:.4f}", *p.val_acc) : "-";
  std::string line = fmt::format(
      "step {}/{} | loss {:.4f} | val acc {} | lr {:.2e} | {:.0f} tok/s | elapsed {} | ETA {}",
      p.step, p.max_steps, p.loss, val, p.lr, p.tokens_per_s, duration_text(p.elapsed_s),
      duration_text(rate * double(p.max_steps - p.step)));
  if (tty) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
    if (p.step == p.max_steps && p.is_eval) std::fprintf(stderr, "\n");
  } else {
    std::fprintf(stderr, "%s%s\n", line.c_str(), p.is_eval ? " [eval]" : "");
  }
  std::fflush(stderr);
}

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a model from a YAML config");
  cmd->footer("Config keys (defaults = the paper's recipe): " + fmt::format("{}", fmt::join(config_keys(), ", ")) +
              "\nExample: rmt train --config experiments/quick_copy.yaml --set model.kind=xl --out runs/x");
  struct Args {
    std::string config, out;
    std::vector<std::string> sets;
    bool resume = false;
    int64_t abort_after_step = 0;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--abort-after-step", args->abort_after_step, "tests: die after this step")->group("")
      ->transform(int_range(0));
  cmd->add_option("--config", args->config, "YAML config file")->check(existing_file());
  cmd->add_option("--set", args->sets, "Override a config key: --set model.kind=xl (repeatable)");
  cmd->add_option("--out", args->out, "Run directory (checkpoints, metrics, results)")->required();
  cmd->add_flag("--resume", args->resume, "Continue the run in --out from its last checkpoint");
  cmd->callback([args] {
    check_output_dir("--out", args->out);
    Config config = args->config.empty() ? Config{} : load_config(args->config);
    for (const auto& s : args->sets) apply_override(config, s);
    TrainOptions opt;
    opt.run_dir = args->out;
    opt.resume = args->resume;
    opt.abort_after_step = args->abort_after_step;
    const bool tty = ::isatty(2);
    opt.on_progress = [tty](const TrainProgress& p) { print_progress(p, tty); };
    opt.on_start = [](const RunSetup& run, int64_t params, int64_t start) {
      std::string stages;  // "; curriculum: 3, 6, 9 segments"
      const TrainConfig& tc = run.config.train;
      for (int s = 0; tc.curriculum > 1 && s < tc.curriculum; ++s)
        stages += fmt::format("{}{}", s ? ", " : "; curriculum: ",
                              curriculum_segments(run.config, s * tc.max_steps / tc.curriculum));
      if (!stages.empty()) stages += " segments";
      std::fprintf(stderr, "%s %s on %s: %d segments of %s%s, bptt %s, %lld parameters, %d threads, "
                   "about %s of memory%s\n",
                   start > 0 ? "resuming" : "training", run.config.model.kind.c_str(),
                   run.meta.task.c_str(), run.config.segments,
                   describe_segments(run.seg_len).c_str(), stages.c_str(), bptt_to_string(run.config.bptt).c_str(),
                   (long long)params, num_threads(),
                   format_bytes(train_memory_estimate(run).total()).c_str(),
                   start > 0 ? fmt::format(" (from step {})", start).c_str() : "");
    };
    train(config, opt);
    std::printf("%s", read_file(fs::path(args->out) / "results.json").c_str());
  });
}

void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Evaluate a trained run on a split (prints one JSON object)");
  cmd->footer("Length generalisation: --data DIR evaluates on another dataset of the run's task "
              "(same task kind and symbols, e.g. longer sequences); without --segments its "
              "samples are split into ceil(seq_len / the trained longest segment length) "
              "segments, so the segments keep the trained length.\n"
              "Example: rmt eval --run runs/copy6 --data runs/data/copy24");
  auto req = std::make_shared<EvalRunRequest>();
  const int int_max = std::numeric_limits<int>::max();
  cmd->add_option("--run", req->run_dir, "Run directory written by rmt train")->required()->check(existing_dir());
  cmd->add_option("--split", req->split, "train | val | test")->capture_default_str()
      ->check(one_of({"train", "val", "test"}));
  cmd->add_option("--data", req->data_dir,
                  "Evaluate on this dataset of the run's task instead of the run's own (default: the run's)")
      ->check(existing_dir());
  cmd->add_option("--segments", req->segments,
                  "Number of segments (default: as trained; with --data, as many as keep the trained "
                  "segment length)")
      ->transform(int_range(1, int_max));
  cmd->add_option("--checkpoint", req->checkpoint, "best | last | a .safetensors file")->capture_default_str();
  cmd->add_option("--batch-size", req->batch_size, "Evaluation batch (default: the training batch)")
      ->transform(int_range(1, int_max));
  cmd->add_option("--samples", req->samples, "Evaluate only the first N samples (default: all)")
      ->transform(int_range(1));
  cmd->add_option("--threads", req->threads, "CPU threads (0 = all cores)")->transform(an_int());
  cmd->callback([req] { std::printf("%s\n", eval_run_json(evaluate_run(*req)).c_str()); });
}

namespace {

struct StepDumpArgs {
  std::string checkpoint, input, target, out, bptt = "all";
  int segments = 1, answer_size = 0, adam_steps = 0, segment_length = 0;
  double lr = 1e-3, clip = 0.25;
  bool update = false;
};

// `rmt step-dump --segment-length T`: language-model steps (lib/run/lm.h) over B streams of
// S x T positions, the training step's code; step<s>/ holds the parameters it started from, the
// new segment's logits [B, T, V], its loss and the gradients.
void step_dump_lm(const StepDumpArgs& args) {
  int64_t B = 0, cols = 0, B2 = 0, cols2 = 0;
  auto in64 = read_npy_int_matrix(args.input, B, cols);
  auto tg64 = read_npy_int_matrix(args.target, B2, cols2);
  if (B != B2 || cols != cols2) fail("--input is [{}, {}] but --target is [{}, {}]", B, cols, B2, cols2);
  if (B <= 0 || cols <= 0) fail("--input {} is empty ([{}, {}])", args.input, B, cols);
  if (B > 1000000 || cols > 100000000) fail("--input {} is [{}, {}]: too large", args.input, B, cols);
  const int T = args.segment_length;
  if (cols % T != 0)
    fail("--input {} has {} columns, not a whole number of segments of --segment-length {}",
         args.input, cols, T);
  const int64_t steps = cols / T;
  auto model = load_checkpoint(args.checkpoint, [&](const ModelConfig& c) {
    Workload w;
    w.batch = int(B);
    const int window = args.bptt == "all" ? 0 : std::stoi(args.bptt);
    w.seg_len.assign(size_t(c.num_mem_tokens > 0 ? std::min<int64_t>(window, steps - 1) + 1 : 1), T);
    w.training = true;
    check_memory_fits(estimate_memory(c, w), fmt::format("step-dump of {} (batch {})", args.checkpoint, B));
  });
  model->config.dropout = 0;  // deterministic: golden runs compare without dropout
  if (args.bptt == "all" && model->m > 0)
    fail("--bptt all: a language model's streams have no end to back-propagate to; give the "
         "number of earlier segments, --bptt k");
  const int window = model->m > 0 ? std::stoi(args.bptt) : 0;
  for (size_t i = 0; i < in64.size(); ++i)
    if (in64[i] < 0 || in64[i] >= model->V || tg64[i] < 0 || tg64[i] >= model->V)
      fail("{}: id {} at row {} is outside the checkpoint's vocabulary 0..{}",
           in64[i] < 0 || in64[i] >= model->V ? args.input : args.target,
           in64[i] < 0 || in64[i] >= model->V ? in64[i] : tg64[i], int64_t(i) / cols, model->V - 1);
  std::vector<int32_t> input(in64.begin(), in64.end()), target(tg64.begin(), tg64.end());
  LmSegmentSource source = [&](int64_t s, std::vector<int32_t>& in, std::vector<int32_t>& tg) {
    in.resize(size_t(B) * T);
    tg.resize(size_t(B) * T);
    for (int64_t b = 0; b < B; ++b) {
      std::copy_n(input.begin() + b * cols + s * T, T, in.begin() + b * T);
      std::copy_n(target.begin() + b * cols + s * T, T, tg.begin() + b * T);
    }
  };
  create_directories_or_fail(args.out);
  Backend& be = cpu_backend();
  Engine engine(*model, be);
  Adam adam(model->num_params());
  LmCarry carry(window);
  std::vector<double> losses;
  for (int64_t s = 0; s < steps; ++s) {
    const fs::path out = fs::path(args.out) / fmt::format("step{}", s);
    create_directories_or_fail(out.string());
    save_checkpoint((out / "params.safetensors").string(), *model, model->params);
    // training mode (dropout is 0): the step skips what training skips
    const double loss = lm_train_step(engine, carry, source, int(B), T, true, 0);
    if (!std::isfinite(loss))
      fail("the loss of {} at step {} is {}: the model's outputs are not finite numbers",
           args.checkpoint, s, loss);
    write_npy_float32(out / "logits.npy", {B, T, model->V}, engine.logits(engine.num_segments() - 1).data());
    write_file_atomic(out / "loss.json", nlohmann::json{{"loss", loss}}.dump() + "\n");
    save_checkpoint((out / "grads.safetensors").string(), *model, model->grads);
    losses.push_back(loss);
    if (args.update) {
      clip_grad_norm(be, model->grads, args.clip);
      adam.step(be, model->params, model->grads, float(args.lr));
    }
  }
  std::printf("losses %s; wrote %s\n", fmt::format("{:.8f}", fmt::join(losses, " ")).c_str(), args.out.c_str());
}

}  // namespace

void add_step_dump_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("step-dump",
      "Run one forward/backward on a given batch and write logits, loss and gradients "
      "(for golden tests against the PyTorch reference)");
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
  seg_len_opt->excludes(segments)->excludes(answer)->excludes(adam_steps);
  update->needs(seg_len_opt);
  cmd->add_option("--lr", args->lr, "Adam learning rate")->capture_default_str()->check(number_range(0, HUGE_VAL, true));
  cmd->add_option("--clip", args->clip, "Gradient-norm clip (0: none)")->capture_default_str()
      ->check(number_range(0, HUGE_VAL));
  cmd->add_option("--out", args->out, "Output directory")->required();
  cmd->callback([args, answer] {
    if (args->segment_length == 0 && answer->count() == 0) throw CLI::RequiredError("--answer-size");
    check_output_dir("--out", args->out);
    if (args->segment_length > 0) return step_dump_lm(*args);
    int64_t B = 0, T = 0, B2 = 0, T2 = 0;
    auto in64 = read_npy_int_matrix(args->input, B, T);
    auto tg64 = read_npy_int_matrix(args->target, B2, T2);
    if (B != B2 || T != T2) fail("--input is [{}, {}] but --target is [{}, {}]", B, T, B2, T2);
    if (B <= 0 || T <= 0) fail("--input {} is empty ([{}, {}])", args->input, B, T);
    if (B > 1000000 || T > 1000000) fail("--input {} is [{}, {}]: too large for one step", args->input, B, T);
    auto model = load_checkpoint(args->checkpoint, [&](const ModelConfig& c) {
      Workload w;
      w.batch = int(B);
      w.seg_len = segment_lengths(int(T), args->segments);
      w.training = true;
      check_memory_fits(estimate_memory(c, w), fmt::format("step-dump of {} (batch {})", args->checkpoint, B));
    });
    model->config.dropout = 0;  // deterministic: golden runs compare without dropout
    std::vector<int32_t> input(in64.begin(), in64.end()), target(tg64.begin(), tg64.end());
    if (args->answer_size < 1 || args->answer_size > T)
      fail("--answer-size {} must be in 1..{} (the columns of --input)", args->answer_size, T);
    // Every id that reaches the kernels indexes the embedding or the logits: check them all here.
    for (size_t i = 0; i < input.size(); ++i)
      if (in64[i] < 0 || in64[i] >= model->V)
        fail("{}: input id {} at row {} is outside the checkpoint's vocabulary 0..{}", args->input,
             in64[i], int64_t(i) / T, model->V - 1);
    for (size_t i = 0; i < target.size(); ++i)
      if (int64_t(i) % T >= T - args->answer_size && (tg64[i] < 0 || tg64[i] >= model->V))
        fail("{}: target id {} at row {} (a scored position) is outside the checkpoint's "
             "vocabulary 0..{}", args->target, tg64[i], int64_t(i) / T, model->V - 1);
    int bptt = -1;
    if (args->bptt != "all") bptt = std::stoi(args->bptt);  // checked by its validator
    auto seg_len = segment_lengths(int(T), args->segments);
    create_directories_or_fail(args->out);
    fs::path out(args->out);
    Backend& be = cpu_backend();
    Engine engine(*model, be);
    double loss = engine.forward(input.data(), target.data(), int(B), int(T), seg_len, args->answer_size, false, 0);
    if (!std::isfinite(loss))
      fail("the loss of {} on this batch is {}: the model's outputs are not finite numbers",
           args->checkpoint, loss);
    engine.backward(bptt);
    // logits [B, T, V], segments concatenated
    std::vector<float> logits(size_t(B * T * model->V));
    int t0 = 0;
    for (int s = 0; s < engine.num_segments(); ++s) {
      const int Ts = engine.segment_length(s);
      for (int b = 0; b < B; ++b)
        std::copy_n(engine.logits(s).begin() + int64_t(b) * Ts * model->V, Ts * model->V,
                    logits.begin() + (b * T + t0) * model->V);
      t0 += Ts;
    }
    write_npy_float32(out / "logits.npy", {B, T, model->V}, logits.data());
    write_file_atomic(out / "loss.json", nlohmann::json{{"loss", loss}}.dump() + "\n");
    save_checkpoint((out / "grads.safetensors").string(), *model, model->grads);
    if (args->adam_steps > 0) {
      Adam adam(model->num_params());
      std::vector<double> losses;
      for (int i = 0; i < args->adam_steps; ++i) {
        losses.push_back(engine.forward(input.data(), target.data(), int(B), int(T), seg_len, args->answer_size, false, 0));
        engine.backward(bptt);
        clip_grad_norm(be, model->grads, args->clip);
        adam.step(be, model->params, model->grads, float(args->lr));
      }
      write_file_atomic(out / "adam.json", nlohmann::json{{"losses", losses}}.dump() + "\n");
      save_checkpoint((out / "after.safetensors").string(), *model, model->params);
    }
    std::printf("loss %.8f; wrote %s\n", loss, out.string().c_str());
  });
}

}  // namespace rmt::cli
