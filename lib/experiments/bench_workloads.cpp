// `rmt bench`'s workloads (bench.h): the models, their sizes and batches, and the model FLOPs
// a step of each stands for.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/core/model.h"
#include "lib/core/model_kind.h"
#include "lib/core/segment_plan.h"
#include "lib/experiments/bench.h"
#include "lib/experiments/repro_manifest.h"
#include "lib/experiments/sweep.h"
#include "tasks/task_kind.h"

namespace rmt {

const std::vector<std::string>& bench_models() {
  static const std::vector<std::string> models = [] {
    std::vector<std::string> copy, lm, copy120;
    for (ModelKind k : {ModelKind::baseline, ModelKind::xl, ModelKind::rmt}) {
      copy.push_back(traits_of(k).name);
      lm.push_back(std::string("lm_") + traits_of(k).name);
      copy120.push_back(std::string("copy120_") + traits_of(k).name);
    }
    copy.insert(copy.end(), lm.begin(), lm.end());
    copy.insert(copy.end(), copy120.begin(), copy120.end());
    for (const char* repro : {"repro_copy_rmt", "repro_retrieval_rmt"}) copy.push_back(repro);
    // the delta-rule kinds (docs/deltanet.md): the copy shape, then segments of 64 and 256
    for (const char* prefix : {"", "seg64_", "seg256_"})
      for (ModelKind k : {ModelKind::deltanet, ModelKind::gated_deltanet})
        copy.push_back(std::string(prefix) + traits_of(k).name);
    return copy;
  }();
  return models;
}

const std::vector<std::string>& bench_groups() {
  static const std::vector<std::string> groups = {"copy", "lm", "copy120", "repro", "delta", "all"};
  return groups;
}

namespace {
// copy | copy120 | lm | repro_copy | repro_retrieval | seg64 | seg256, from the model's name.
std::string workload_of(const std::string& name) {
  for (const char* prefix : {"lm", "copy120", "seg64", "seg256"})
    if (name.rfind(std::string(prefix) + "_", 0) == 0) return prefix;
  if (name.rfind("repro_", 0) == 0) return name.substr(0, name.rfind('_'));
  return "copy";
}
// The model kind of a bench model: its name after the workload's prefix.
std::string kind_of(const std::string& name) {
  const std::string workload = workload_of(name);
  return name.rfind(workload + "_", 0) == 0 ? name.substr(workload.size() + 1) : name;
}
// The group a model belongs to (--model GROUP): the delta-rule kinds' own, else its workload's.
std::string group_of(const std::string& name) {
  if (kind_has_mixer_state(kind_of(name))) return "delta";
  const std::string workload = workload_of(name);
  return workload.rfind("repro_", 0) == 0 ? "repro" : workload;
}
}  // namespace

std::vector<std::string> bench_selection(const std::string& m) {
  const std::vector<std::string>& all = bench_models();
  const std::vector<std::string>& groups = bench_groups();
  if (std::find(all.begin(), all.end(), m) == all.end() &&
      std::find(groups.begin(), groups.end(), m) == groups.end())
    fail("--model must be one of {}, {} (got '{}')", fmt::join(all, ", "), fmt::join(groups, ", "), m);
  std::vector<std::string> out;
  for (const std::string& name : all) {
    const std::string g = group_of(name);
    if (name == m || g == m || (m == "all" && (g == "copy" || g == "lm"))) out.push_back(name);
  }
  return out;
}

namespace {
// The RMT run with the most segments of manifest item `item`'s sweep, as `rmt reproduce` plans it
// (its runs directory does not matter: a plan only names the runs' folders).
SweepRun repro_cell(const std::string& manifest_path, const std::string& item, const std::string& bench_model) {
  const ReproManifest manifest = [&] {
    try {
      return load_manifest(manifest_path);
    } catch (const Error& e) {
      fail("rmt bench {} times the run `rmt reproduce {}` trains, read from its manifest (--manifest): {}",
           bench_model, item, e.what());
    }
  }();
  const ReproItem* it = manifest.find(item);
  if (!it || it->kind != "sweep")
    fail("rmt bench {} times the RMT run of the sweep item {} of {}, which has no such item", bench_model, item,
         manifest_path);
  const SweepPlan plan = plan_sweep(load_sweep(it->sweep), "runs/reproduce", 1);
  const SweepRun* cell = nullptr;
  for (const SweepRun& run : plan.runs)
    if (run.config.model.kind == "rmt" && (!cell || run.config.segments > cell->config.segments)) cell = &run;
  if (!cell) fail("rmt bench {}: {} ({}) trains no rmt run", bench_model, it->sweep, item);
  return *cell;
}
}  // namespace

BenchWorkload bench_workload(const std::string& name, bool tiny, int batch, const std::string& manifest) {
  const std::vector<std::string>& all = bench_models();
  if (std::find(all.begin(), all.end(), name) == all.end())
    fail("bench model must be one of {} (got '{}')", fmt::join(all, ", "), name);
  if (batch < 0) fail("--batch must be at least 1 (got {})", batch);
  BenchWorkload w;
  w.name = name;
  w.workload = workload_of(name);
  w.lm = w.workload == "lm";
  const std::string kind = kind_of(name);
  const ModelKindTraits& traits = traits_of(kind);
  ModelConfig& m = w.model;
  m.kind = kind;
  m.dropout = 0.1;
  m.dropatt = 0.0;
  if (w.lm) {
    m.n_token = 256;
    m.n_layer = 12, m.n_head = 8, m.d_head = 64, m.d_model = 512, m.d_inner = 2048;
    w.batch = 2;
    w.lm_segment = 128;
    w.lr = 2.5e-4;
    int memory = 10;
    if (tiny) {
      m.n_layer = 1, m.n_head = 2, m.d_head = 8, m.d_model = 16, m.d_inner = 32;
      w.lm_segment = 8;
      memory = 2;
    }
    m.mem_len = traits.has_cache ? w.lm_segment : 0;
    m.num_mem_tokens = traits.has_memory ? memory : 0;
    w.lm_window = traits.has_memory ? 1 : 0;
    w.segments = 1;
    w.bptt = w.lm_window;
    if (batch > 0) w.batch = batch;
    return w;
  }
  if (w.workload.rfind("repro_", 0) == 0) {  // the run `rmt reproduce` trains (bench.h)
    const bool retrieval = w.workload == "repro_retrieval";
    const SweepRun cell = repro_cell(manifest, retrieval ? "fig4_retrieval" : "fig4_copy", name);
    const Config& c = cell.config;
    const std::map<std::string, std::string>& data = cell.data_options;
    auto number = [&](const char* key) -> std::optional<int> {
      if (!data.count(key)) return std::nullopt;
      return std::stoi(data.at(key));  // the sweep's check has refused anything but an integer
    };
    const std::string task = data.count("task") ? data.at("task") : "";
    if (task != (retrieval ? "retrieval" : "copy"))
      fail("rmt bench {}: {}'s sweep trains task '{}', not {}", name, manifest, task, retrieval ? "retrieval" : "copy");
    const TaskOptions options = resolve_task(task, number("length"), number("symbols"), number("pairs"));
    m = c.model;
    m.n_token = int(task_vocab(options).size());
    w.copy_length = retrieval ? 0 : options.length;
    w.retrieval_pairs = retrieval ? options.pairs : 0;
    w.segments = c.segments;
    w.batch = c.train.batch_size;
    w.clip = c.train.clip;
    w.lr = c.train.lr;
    w.bptt = c.bptt;
    if (tiny) {
      m.n_layer = 1, m.n_head = 2, m.d_head = 8, m.d_model = 16, m.d_inner = 32;
      w.batch = 4;
    }
    if (batch > 0) w.batch = batch;
    return w;
  }
  // copy: 12 ids (10 symbols); copy120: 10 ids (8 symbols), L 120 (docs/paper.md §1); seg64,
  // seg256: the copy model on copy of 64 / 256 symbols, 3 segments of 64 / 256.
  const bool long_copy = w.workload == "copy120";
  m.n_token = long_copy ? 10 : 12;
  w.copy_length = long_copy ? 120 : w.workload == "seg64" ? 64 : w.workload == "seg256" ? 256 : 24;
  if (tiny) {
    m.n_layer = 1, m.n_head = 2, m.d_head = 8, m.d_model = 16, m.d_inner = 32;
    w.batch = 4;
    w.copy_length = 6;
  }
  if (batch > 0) w.batch = batch;
  const int seg = w.seq_len() / w.segments;
  const int memory = long_copy ? seg / 2 : seg;  // copy120: the paper's cache / memory 60
  m.mem_len = traits.has_cache ? memory : 0;
  m.num_mem_tokens = traits.has_memory ? memory : 0;
  return w;
}

int lm_fill_steps(const BenchWorkload& w) {
  if (!w.lm) return 0;
  const int per_step = w.model.num_mem_tokens + w.lm_segment;  // cache rows one segment adds
  const int cache_steps = w.model.mem_len > 0 ? (w.model.mem_len + per_step - 1) / per_step : 0;
  return std::max(w.lm_window, cache_steps);
}

namespace {
// Forward FLOPs of one layer for a segment with klen = cache + q key rows, of which n query
// rows run attention and what follows it (see forward_flops in bench.h).
double layer_flops(const BenchWorkload& w, double n, double klen) {
  const ModelConfig& c = w.model;
  const double B = w.batch, d = c.d_model, H = c.n_head, Dh = c.d_head, hd = H * Dh;
  const double di = c.d_inner;
  if (kind_has_mixer_state(c.kind)) {  // the delta rule over all q = klen rows (its state)
    const bool gated = traits_of(c.kind).mixer == Mixer::gated_delta_rule;
    const double q = klen, HV = hd * resolved_expand_v(c), Dv = Dh * resolved_expand_v(c);
    return 2 * B * q * d * (2 * hd + HV + H * (gated ? 2 : 1))  // q, k, v, b (a) projections
           + 2 * B * q * (2 * hd + HV) * c.short_conv          // the convolutions
           + 3 * 2 * B * H * q * Dh * Dv                       // S^T k, the update k u^T, S^T q
           + (gated ? 2 * B * q * d * HV : 0.0)                // g_proj (the output gate)
           + 2 * B * n * HV * d                                // o_proj
           + 2 * 2 * B * n * d * di;                           // FF in and out
  }
  return 2 * B * klen * d * 3 * hd        // qkv_net over [cache; segment]
         + 2 * klen * d * hd              // r_net over the position embeddings
         + 2 * 2 * B * H * n * klen * Dh  // (q+u)k^T and (q+v)r^T
         + 2 * B * H * n * klen * Dh      // prob * v
         + 2 * B * n * hd * d             // o_net
         + 2 * 2 * B * n * d * di;        // FF in and out
}

// A segment as planned (lib/core/segment_plan.h) through all layers: n_layer - 1 layers with
// every query row, the last with its live rows past its keys and values; plus the tied output
// layer over its token rows when it computes logits.
double segment_forward(const BenchWorkload& w, const SegmentPlan& p) {
  const ModelConfig& c = w.model;
  return (c.n_layer - 1) * layer_flops(w, p.q, p.klen) + layer_flops(w, p.live(), p.klen) +
         (p.logits ? 2.0 * w.batch * p.T * c.d_model * c.n_token : 0.0);
}

// A segment run only as far as the next cache needs: the input of every layer, i.e. all layers
// but the last (an xl segment without a loss).
double segment_cache_only(const BenchWorkload& w, const SegmentPlan& p) {
  return (w.model.n_layer - 1) * layer_flops(w, p.q, p.klen);
}

// The language model in the steady state: the cache full (xl), the window full (rmt).
struct LmFlops {
  double eval_forward = 0;  // one segment, every row, with the write block
  double step = 0;          // a training step (step_flops in bench.h)
};
LmFlops lm_flops(const BenchWorkload& w) {
  const SegmentModel model = segment_model(w.model);
  const int T = w.lm_segment;
  // A step's forward (lm_train_step): the lm_window earlier segments of the window, then the
  // new one, the only one scored, from a full cache (lm_fill_steps).
  const std::vector<int> window(size_t(w.lm_window) + 1, T);
  const int first_scored = w.lm_window * T;
  // As the step runs it: the state after the new segment is carried on (its write block) ...
  const std::vector<SegmentPlan> step = plan_forward(model, window, first_scored, true, true, model.mem_len);
  // ... and as its loss alone needs it (the new segment without its write block).
  const std::vector<SegmentPlan> loss =
      plan_forward(model, window, first_scored, true, false, model.mem_len);
  LmFlops f;
  f.eval_forward = segment_forward(w, plan_largest_segment(model, T));
  // The earlier segments: their live rows are the memory they pass on, no output layer.
  double earlier = 0;
  for (int s = 0; s < w.lm_window; ++s) earlier += segment_forward(w, step[size_t(s)]);
  const double scored = segment_forward(w, loss.back());
  // The new segment's write block, forward only: the memory the next step starts from.
  const double state = segment_forward(w, step.back()) - scored;
  f.step = 3 * (earlier + scored) + state;
  return f;
}

// The plan of every segment of a copy / retrieval sample. training: what a training step needs
// of each segment (the last segment passes no memory on, so rmt runs it without the write block;
// the last layer computes past its keys and values only the rows something reads; the output
// layer runs only for scored segments). Otherwise (evaluation) every row of every segment.
std::vector<SegmentPlan> sample_plan(const BenchWorkload& w, bool training) {
  return plan_forward(segment_model(w.model), segment_lengths(w.seq_len(), w.segments),
                      w.seq_len() - w.answer_size(), training, false);
}
}  // namespace

double forward_flops(const BenchWorkload& w) {
  if (w.lm) return lm_flops(w).eval_forward;
  double total = 0;
  for (const SegmentPlan& p : sample_plan(w, false)) total += segment_forward(w, p);
  return total;
}

double step_flops(const BenchWorkload& w) {
  if (w.lm) return lm_flops(w).step;
  double total = 0;
  for (const SegmentPlan& p : sample_plan(w, true)) {
    if (p.backward) total += 3 * segment_forward(w, p);      // forward + backward
    else if (p.run) total += segment_cache_only(w, p);       // forward for the cache
  }
  return total;
}

const char* delta_flop_formula() {
  return "deltanet / gated_deltanet, per layer over the q rows of a segment (n live rows past the "
         "mixer): 2B*q*d*(2HK + HV + H) (q, k, v, b projections; gated + H for a) + "
         "2B*q*(2HK + HV)*W (convolutions) + 3 x 2B*H*q*Dk*Dv (the rule: S^T k, k u^T, S^T q) + "
         "gated 2B*q*d*HV (g_proj) + 2B*n*HV*d (o_proj) + 4B*n*d*d_inner (FF); HK = H*Dk, "
         "HV = H*Dv, W = short_conv";
}

const char* flop_formula() {
  return "step = 3 x the forward of each segment the loss depends on (baseline/xl: segments with "
         "a scored position; xl adds n_layer-1 layers of an unscored segment for its cache); "
         "forward = sum over layers of [2B*klen*d*3hd (qkv) + 2*klen*d*hd (r_net) + "
         "3 x 2B*H*n*klen*Dh (AC, BD, prob*V) + 2B*n*hd*d (o_net) + 4B*n*d*d_inner (FF)] + "
         "2B*T_seg*d*V (output, scored segments); n = q query rows incl. memory, in the last "
         "layer only those something reads (scored tokens, memory passed on); rmt's last "
         "segment has no write block; klen = cache + q, hd = H*Dh. Language model (steady "
         "state): 3 x the forward of the BPTT window (earlier segments: live rows = the memory "
         "passed on, no output layer; the new segment without its write block) + the new "
         "segment's write block once (forward only: the next step's memory)";
}

std::string bench_workload_json(const std::string& name, bool tiny, int batch, const std::string& manifest) {
  const BenchWorkload w = bench_workload(name, tiny, batch, manifest);
  ModelConfig mc = w.model;
  resolve_kind(mc);
  nlohmann::ordered_json j;
  j["model"] = name;
  j["workload"] = w.workload;
  j["kind"] = mc.kind;
  j["n_layer"] = mc.n_layer;
  j["d_model"] = mc.d_model;
  j["n_head"] = mc.n_head;
  j["d_head"] = mc.d_head;
  j["d_inner"] = mc.d_inner;
  j["vocab"] = mc.n_token;
  j["mem_len"] = mc.mem_len;
  j["num_mem_tokens"] = mc.num_mem_tokens;
  j["dropout"] = mc.dropout;
  j["batch"] = w.batch;
  j["seq_len"] = w.seq_len();
  j["segments"] = w.segments;
  j["answer_size"] = w.answer_size();
  j["bptt_window"] = w.lm ? w.lm_window : 0;
  j["fill_steps"] = lm_fill_steps(w);
  j["clip"] = w.clip;
  j["lr"] = w.lr;
  j["params"] = int64_t(model_param_count(mc));
  j["gflop_per_step"] = step_flops(w) * 1e-9;
  j["gflop_forward"] = forward_flops(w) * 1e-9;
  return j.dump();
}
}  // namespace rmt
