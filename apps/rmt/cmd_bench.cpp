// rmt bench: training-step throughput, FLOPs, MFU and memory of the paper's copy models and of
// a byte-level language model (lib/experiments/bench.h has the workloads).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/rmt/cli_checks.h"
#include "apps/rmt/commands.h"
#include "lib/core/backend.h"
#include "lib/core/model.h"
#include "lib/experiments/bench.h"

namespace rmt::cli {

static std::string ms_or_dash(double ms) { return ms >= 0 ? fmt::format("{:.1f}", ms) : "-"; }

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench", "Time full training steps (forward, backward, clip, Adam) of the paper's copy "
               "models and of its enwik8 language model (a stated smaller batch); report tokens/s, "
               "FLOPs, MFU and peak memory");
  struct Args {
    std::string model = "all", device = kDefaultDevice, manifest = kReproManifest;
    int threads = 0, reps = 10, warmup = 3, gemm_size = 2048, batch = 0, pack = 1;
    bool json = false, tiny = false, no_eval = false, no_capture = false, peak_only = false, list = false;
    bool diagonal = false;
    int diagonal_layers = 4, diagonal_segments = 1024;
    double peak_gflops = 0;
  };
  auto args = std::make_shared<Args>();
  std::vector<std::string> models = bench_models();
  for (const std::string& group : bench_groups()) models.push_back(group);
  cmd->add_option("--model", args->model,
                  "baseline | xl | rmt (copy task, 72 positions) | lm_baseline | lm_xl | lm_rmt "
                  "(byte-level language model, carried state) | copy120_baseline | copy120_xl | "
                  "copy120_rmt (the paper's copy120 task: 360 positions in 3 segments of 120, "
                  "cache / memory 60) | repro_copy_rmt | repro_retrieval_rmt (the RMT runs `rmt reproduce` "
                  "trains in fig4_copy and fig4_retrieval with the most segments, read from --manifest) | "
                  "copy | lm | copy120 | repro (those groups) | all (copy and lm)")
      ->check(one_of(models))->capture_default_str();
  cmd->add_option("--manifest", args->manifest,
                  "The reproduction manifest the repro_* models' runs are read from (as `rmt reproduce "
                  "--manifest`)")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0 = all cores)")
      ->transform(thread_count())->capture_default_str();
  auto* reps = cmd->add_option("--reps", args->reps,
                               "Timed training steps (min and median reported; --diagonal: timed "
                               "evaluations of each schedule, default 3)")
                   ->transform(int_range(1, 100000))->capture_default_str();
  auto* warmup = cmd->add_option("--warmup", args->warmup, "Untimed steps first (--diagonal: evaluations of each schedule, default and at least 1)")
                     ->transform(int_range(0, 100000))->capture_default_str();
  auto* batch = cmd->add_option(
      "--batch", args->batch,
      "Samples per step (language model: streams); default the workload's: copy and copy120 "
      "32 (the paper's), lm 2, --tiny 4 (copy) / 2 (lm)")
      ->transform(int_range(1, 65536));
  auto* pack = cmd->add_option("--pack", args->pack,
                               "Runs of the model packed into one computation, each with its own weights and "
                               "batches (rmt sweep --pack); the figures are of all of them together, steps_per_s "
                               "counting each run's step; --threads runs that many at a time on the CPU. Not for "
                               "the language models")
                   ->transform(int_range(1, 4096))->capture_default_str();
  cmd->add_flag("--json", args->json, "One JSON object per model, one per line");
  cmd->add_option("--peak-gflops", args->peak_gflops,
                  "fp32 peak for the MFU (default: measure a GEMM through our matmul)")
      ->check(number_range(0, HUGE_VAL, true));
  cmd->add_option("--gemm-size", args->gemm_size, "Largest n of the n x n x n peak GEMM (n/2, n/4 also tried)")
      ->transform(int_range(16, 16384))->capture_default_str();  // 3 n^2 floats: 3.2 GB at most
  auto* peak_only = cmd->add_flag("--peak-only", args->peak_only, "Only measure the GEMM peak")
                        ->excludes(batch)->excludes(pack);
  cmd->add_flag("--no-eval", args->no_eval, "Skip timing the greedy free-running evaluation");
  cmd->add_flag("--no-capture", args->no_capture,
                "On a device that can capture a step (cuda): time the copy steps uncaptured, one "
                "launch per kernel (default: captured once warm and replayed, when dropout is 0)");
  cmd->add_flag("--tiny", args->tiny, "A tiny model of the same structure (for tests)");
  auto* diagonal = cmd->add_flag(
      "--diagonal", args->diagonal,
      "Instead of training steps, time armt's teacher-forced evaluation of one batch segment by "
      "segment and by diagonals of the (segment, layer) grid (rmt eval --schedule; docs/armt.md): "
      "d_model 64, segments of 16 tokens, batch 8 (--batch)");
  cmd->add_option("--diagonal-layers", args->diagonal_layers, "--diagonal: layers")
      ->transform(int_range(1, 64))->capture_default_str()->needs(diagonal);
  cmd->add_option("--diagonal-segments", args->diagonal_segments, "--diagonal: segments")
      ->transform(int_range(1, 1 << 20))->capture_default_str()->needs(diagonal);
  add_device_option(cmd, args->device, kDefaultDevice);
  auto* list = cmd->add_flag("--list", args->list,
                "Describe the selected models' workloads (sizes, batch, parameters, FLOPs per "
                "step) as JSON lines without running them")
      ->excludes(peak_only);

  diagonal->excludes(peak_only)->excludes(pack)->excludes(list);
  cmd->callback([args, reps, warmup] {
    check_threads(args->threads, "--threads");
    set_num_threads(args->threads);
    if (args->diagonal) {
      DiagonalBenchOptions o;
      o.layers = args->diagonal_layers;
      o.segments = args->diagonal_segments;
      o.batch = args->batch;
      o.tiny = args->tiny;
      o.device = args->device;
      if (reps->count() > 0) o.reps = args->reps;
      if (warmup->count() > 0) o.warmup = args->warmup;
      const DiagonalBenchResult r = run_diagonal_bench(o);
      std::printf("%s", args->json ? (diagonal_bench_json(r) + "\n").c_str() : diagonal_bench_text(r).c_str());
      return;
    }
    if (args->peak_only) {
      GemmPeak g = measure_gemm_gflops(args->gemm_size, 10, args->device);
      if (args->json)
        std::printf("%s\n", nlohmann::json{{"engine", "rmt"}, {"threads", num_threads()},
                                           {"gemm_n", g.n}, {"gemm_gflops", g.gflops}}.dump().c_str());
      else
        std::printf("fp32 GEMM %d^3 through rmt's matmul, %d threads: %.1f GFLOP/s\n", g.n,
                    num_threads(), g.gflops);
      return;
    }
    const std::vector<std::string> kinds = bench_selection(args->model);
    if (args->list) {
      for (const auto& k : kinds)
        std::printf("%s\n", bench_workload_json(k, args->tiny, args->batch, args->manifest).c_str());
      return;
    }
    BenchOptions opt;
    opt.threads = args->threads;
    opt.reps = args->reps;
    opt.warmup = args->warmup;
    opt.batch = args->batch;
    opt.tiny = args->tiny;
    opt.manifest = args->manifest;
    opt.device = args->device;
    opt.eval = !args->no_eval;
    opt.capture = !args->no_capture;
    opt.pack = args->pack;
    if (opt.pack > 1) opt.eval = false;  // a packed run evaluates as it would alone
    std::vector<BenchResult> results;
    for (const auto& k : kinds) results.push_back(run_bench(k, opt));
    // The peak is measured after the models so that its buffers do not count in their RSS.
    double peak = args->peak_gflops;
    std::string source = "given (--peak-gflops)";
    if (peak <= 0) {
      GemmPeak g = measure_gemm_gflops(args->gemm_size, 10, args->device);
      peak = g.gflops;
      source = fmt::format("rmt matmul {}^3", g.n);
    }
    for (auto& r : results) set_peak(r, peak);

    if (args->json) {
      for (const auto& r : results) std::printf("%s\n", bench_json(r, source).c_str());
      return;
    }
    std::printf("fp32 peak %.1f GFLOP/s (%s), device %s, %d threads, %d timed steps after %d warm-up\n",
                peak, source.c_str(), results.front().device.c_str(), results.front().threads, args->reps,
                args->warmup);
    std::printf("FLOPs: %s\n", flop_formula());
    if (std::any_of(results.begin(), results.end(),
                    [](const BenchResult& r) { return r.model.find("deltanet") != std::string::npos; }))
      std::printf("       %s\n", delta_flop_formula());
    for (const char* workload : {"copy", "copy120", "lm", "repro_copy", "repro_retrieval", "seg64", "seg256"}) {
      bool header = false;
      for (const auto& r : results) {
        if (r.workload != workload) continue;
        if (!header) {
          header = true;
          if (r.workload == "copy")
            std::printf("\ncopy workload: batch %d, %d positions in %d segments\n", r.batch,
                        r.seq_len, r.segments);
          else if (r.workload == "copy120")
            std::printf("\ncopy120 workload (the paper's copy of 120 symbols): batch %d, %d "
                        "positions in %d segments, xl cache / rmt memory %d\n", r.batch, r.seq_len,
                        r.segments, bench_workload("copy120_rmt", args->tiny).model.num_mem_tokens);
          else if (r.workload == "repro_copy" || r.workload == "repro_retrieval") {
            const BenchWorkload w = bench_workload(r.model, args->tiny, 0, args->manifest);
            const ModelConfig& m = w.model;
            const std::string task = w.retrieval_pairs > 0
                                         ? fmt::format("associative retrieval, {} pairs", w.retrieval_pairs)
                                         : fmt::format("copy of {} symbols", w.copy_length);
            std::printf("\n%s (the RMT run with the most segments `rmt reproduce` trains in %s): %d layers, "
                        "d_model %d, %d heads, %d memory tokens, bptt %s; batch %d, %d positions in %d segments\n",
                        task.c_str(), w.retrieval_pairs > 0 ? "fig4_retrieval" : "fig4_copy", m.n_layer, m.d_model,
                        m.n_head, m.num_mem_tokens, w.bptt < 0 ? "all" : std::to_string(w.bptt).c_str(), r.batch,
                        r.seq_len, r.segments);
          }
          else
            std::printf("\nlanguage model (byte level, the paper's 12-layer enwik8 model): %d "
                        "streams, one new segment of %d bytes per step, the cache and memory "
                        "carried; lm_rmt re-runs %d earlier segment(s) (BPTT); warm-up at least "
                        "until the carried state is full\n",
                        r.batch, r.seq_len, bench_workload("lm_rmt", args->tiny).lm_window);
          if (r.pack > 1)
            std::printf("%d runs packed into one computation (%d at a time%s): a step is one step of each, "
                        "steps/s counts every run's\n",
                        r.pack, r.threads, r.merged_runs ? ", one launch per pass for all" : "");
          std::printf("%-20s %10s %10s %10s %12s %10s %8s %7s %9s %12s %12s\n", "model", "step ms",
                      "median", "steps/s", "tokens/s", "GFLOP/st", "GFLOP/s", "MFU", "RSS MB", "greedy ms",
                      "re-run ms");
        }
        std::printf("%-20s %10.2f %10.2f %10.1f %12.0f %10.3f %8.1f %6.1f%% %9.1f %12s %12s\n",
                    r.model.c_str(), r.step_ms_min, r.step_ms_median, r.steps_per_s, r.tokens_per_s,
                    r.gflop_per_step, r.gflops, 100 * r.mfu, r.peak_rss_mb,
                    ms_or_dash(r.workload == "lm" ? r.sample_ms : r.eval_free_running_ms).c_str(),
                    ms_or_dash(r.eval_free_running_rerun_ms).c_str());
      }
    }
    std::printf("\nstep ms = min over steps; tokens/s = positions trained per step / min step "
                "time; RSS = process high-water mark after the model (cumulative with several "
                "models); greedy ms = one copy batch of free-running evaluation with cached "
                "keys/values, re-run ms = the same re-running each answer segment per generated "
                "token; for a language model greedy ms = rmt sample's path, one segment of "
                "bytes generated after a one-segment prompt\n");
  });
}

}  // namespace rmt::cli
