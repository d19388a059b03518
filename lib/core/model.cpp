#include "lib/core/model.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "lib/core/assoc_math.h"
#include "lib/core/assoc_memory.h"
#include "lib/core/mixer.h"
#include "lib/core/memory_tokens.h"
#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/core/random.h"
#include "lib/core/segment_plan.h"

namespace rmt {

Model::Model(const ModelConfig& c, Backend& be)
    : config(c), backend(be), kind(parse_model_kind(c.kind)) {
  V = c.n_token, L = c.n_layer, H = c.n_head, Dh = c.d_head, d = c.d_model, d_inner = c.d_inner;
  if (V <= 0 || L <= 0 || H <= 0 || Dh <= 0 || d <= 0 || d_inner <= 0)
    fail("model sizes must be positive (n_token {}, n_layer {}, n_head {}, d_head {}, d_model {}, "
         "d_inner {})", V, L, H, Dh, d, d_inner);
  const ModelKindTraits& kt = traits_of(kind);
  if (kt.mixer == Mixer::attention && d % 2 != 0)
    fail("model.d_model must be even for the sinusoid position embedding, got {}", d);
  mem_len = kt.has_cache ? c.mem_len : 0;
  num_mem = kt.has_memory ? c.num_mem_tokens : 0;
  write_block = kt.has_write_block;
  read_block = kt.has_read_block;
  if (kt.has_cache && mem_len <= 0) fail("model.kind={} needs model.mem_len > 0", c.kind);
  if (kt.has_memory && num_mem <= 0) fail("model.kind={} needs model.num_mem_tokens > 0", c.kind);
  if (kt.has_assoc) {
    if (c.d_mem <= 0 || c.d_mem > 4096) fail("model.kind={} needs model.d_mem in 1..4096, got {}", c.kind, c.d_mem);
    d_mem = c.d_mem;
    d_key = 2 * assoc::kNu * d_mem;  // DPFP doubles (relu of x and -x), then nu products
  }
  if (kt.has_mixer_state()) {
    if (c.expand_v < 0 || c.expand_v > 64) fail("model.expand_v must be in 0..64 (0: the kind's default), got {}", c.expand_v);
    if (c.short_conv < 0 || c.short_conv > 64) fail("model.short_conv must be in 0..64 (0: none), got {}", c.short_conv);
    Dv = Dh * resolved_expand_v(c);
    conv = c.short_conv;
    if (c.delta_chunk < 0 || c.delta_chunk > 1024)
      fail("model.delta_chunk must be in 0..1024 (0: the recurrent form), got {}", c.delta_chunk);
    wy_chunk = c.delta_chunk;
  }

  // Layout, in the order of the authors' state_dict.
  int64_t offset = 0;
  const AddParam add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    param_info.push_back({name, std::move(shape), offset, n, decays_by_name(name)});
    offset += n;
  };
  memory_tokens_params(*this, add);
  mixer_shared_params(*this, add);
  add("word_emb.emb_layers.0.weight", {V, d});
  for (int l = 0; l < L; ++l) {
    std::string p = fmt::format("layers.{}.", l);
    mixer_layer_params(*this, p, add);  // the mixer's, with the layer's first LayerNorm
    add(p + "pos_ff.CoreNet.0.weight", {d_inner, d});
    add(p + "pos_ff.CoreNet.0.bias", {d_inner});
    add(p + "pos_ff.CoreNet.3.weight", {d, d_inner});
    add(p + "pos_ff.CoreNet.3.bias", {d});
    add(p + "pos_ff.layer_norm.weight", {d});
    add(p + "pos_ff.layer_norm.bias", {d});
    assoc_layer_params(*this, p, add);  // armt's
  }
  add("crit.out_layers.0.bias", {V});
  params.zeroed(be, offset);
  grads.zeroed(be, offset);

  auto bind = [&](float* base) {
    const FindParam at = [&](const std::string& name) { return base + find(name)->offset; };
    Weights w;
    memory_tokens_bind(*this, at, w);
    mixer_bind(*this, at, w);
    w.emb = at("word_emb.emb_layers.0.weight");
    w.out_bias = at("crit.out_layers.0.bias");
    w.layers.resize(size_t(L));
    for (int l = 0; l < L; ++l) {
      std::string p = fmt::format("layers.{}.", l);
      LayerWeights& lw = w.layers[size_t(l)];
      mixer_bind_layer(*this, p, at, lw);
      lw.ff1_w = at(p + "pos_ff.CoreNet.0.weight"), lw.ff1_b = at(p + "pos_ff.CoreNet.0.bias");
      lw.ff2_w = at(p + "pos_ff.CoreNet.3.weight"), lw.ff2_b = at(p + "pos_ff.CoreNet.3.bias");
      lw.ln2_w = at(p + "pos_ff.layer_norm.weight"), lw.ln2_b = at(p + "pos_ff.layer_norm.bias");
      assoc_bind_layer(*this, p, at, lw.assoc);
    }
    return w;
  };
  W = bind(params.data());
  G = bind(grads.data());
}

bool decays_by_name(const std::string& name) {
  const bool bias_or_norm = name.find("bias") != std::string::npos || name.find("norm") != std::string::npos;
  const bool a_log = name.size() >= 5 && name.compare(name.size() - 5, 5, "A_log") == 0;
  return !bias_or_norm && !a_log;
}

std::vector<ParamRange> decaying_ranges(const std::vector<ParamInfo>& layout) {
  std::vector<ParamRange> ranges;
  for (const ParamInfo& p : layout) {
    if (!p.decays || p.numel == 0) continue;
    if (!ranges.empty() && ranges.back().offset + ranges.back().n == p.offset) ranges.back().n += p.numel;
    else ranges.push_back({p.offset, p.numel});
  }
  return ranges;
}

const ParamInfo* Model::find(const std::string& name) const {
  for (const auto& p : param_info)
    if (p.name == name) return &p;
  return nullptr;
}

void Model::init_weights(uint64_t seed) {
  SplitMixRng rng(seed);
  auto normal = [&](float* x, int64_t n, double mean, double std) {
    for (int64_t i = 0; i < n; ++i) x[i] = float(mean + std * rng.normal());
  };
  const double std = 0.02;
  std::vector<float> host(static_cast<size_t>(num_params()));
  for (const auto& p : param_info) {
    float* x = host.data() + p.offset;
    const std::string& n = p.name;
    if (mixer_init_param(*this, n, x, p.numel, rng)) continue;  // the mixer's own (fla's)
    bool is_bias = n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
    bool is_ln = n.find("layer_norm") != std::string::npos;
    if (n == "mem_tokens" && config.mem_init == "normal") {
      normal(x, p.numel, 0.0, std);
    } else if (n == "mem_tokens") {
      normal(x, d, 0.0, 1.0);  // one vector, repeated m times
      for (int i = 1; i < num_mem; ++i) std::copy(x, x + d, x + int64_t(i) * d);
    } else if (n.size() >= 11 && n.compare(n.size() - 11, 11, "W_mv.weight") == 0) {
      std::fill(x, x + p.numel, 0.f);  // authors' torch.nn.init.zeros_(self.W_mv.weight)
    } else if (is_ln && !is_bias) {
      normal(x, p.numel, 1.0, std);
    } else if (is_bias) {
      std::fill(x, x + p.numel, 0.f);
    } else {
      normal(x, p.numel, 0.0, std);
    }
  }
  params.upload(backend, host);
}

int resolved_expand_v(const ModelConfig& c) {
  const ModelKindTraits& kt = traits_of(c.kind);
  if (!kt.has_mixer_state()) return 0;
  if (c.expand_v > 0) return c.expand_v;
  return kt.mixer == Mixer::gated_delta_rule ? 2 : 1;  // fla's layers' defaults
}

double model_param_count(const ModelConfig& c) {
  const bool has_memory = traits_of(c.kind).has_memory;
  const double d = c.d_model, HD = double(c.n_head) * c.d_head, di = c.d_inner, V = c.n_token;
  if (traits_of(c.kind).has_mixer_state())  // the delta rule's mixer in place of attention
    return V * d + V + double(c.n_layer) * (delta_layer_param_count(c) + di * d + di + d * di + d + 2 * d);
  double per_layer = 3 * HD * d + d * HD + HD * d + di * d + di + d * di + d + 4 * d;
  if (traits_of(c.kind).has_assoc) per_layer += 2.0 * c.d_mem * d + d * d + d + 1;  // W_mq, W_mk, W_mv, W_mb
  return (has_memory ? double(c.num_mem_tokens) * d : 0.0) + 2 * HD + V * d + V +
         double(c.n_layer) * per_layer;
}

std::string MemoryEstimate::describe() const {
  std::string s = fmt::format("{} (weights and gradients {}", format_bytes(total()), format_bytes(weights));
  if (optimizer > 0) s += fmt::format(", Adam {}", format_bytes(optimizer));
  s += fmt::format(", activations {}", format_bytes(activations));
  if (data > 0) s += fmt::format(", data {}", format_bytes(data));
  return s + ")";
}

// Mirrors what Engine allocates (lib/core/engine.cpp), in doubles so that absurd sizes cannot
// overflow: per segment and layer the buffers of LayerActivations, per segment those of
// SegmentActivations, the states handed between segments, and backward's scratch. Each segment
// at the shapes of its largest plan (plan_largest_segment: every row, the write block, a full
// cache): an upper bound where the engine skips work (segments no loss needs in training).
MemoryEstimate estimate_memory(const ModelConfig& c, const Workload& w) {
  const SegmentModel model = segment_model(c);
  const double B = w.batch, d = c.d_model, HD = double(c.n_head) * c.d_head, di = c.d_inner,
               V = c.n_token, L = c.n_layer, H = c.n_head;
  const double m = model.num_mem, mlen = model.mem_len;
  // armt: the associative memory's key width and state per layer and sample (A, z), else 0
  const bool assoc = traits_of(c.kind).has_assoc;
  const double dm = assoc ? c.d_mem : 0, Dk = 2.0 * assoc::kNu * dm, F = assoc ? Dk * d + Dk : 0;
  // deltanet, gated_deltanet: the mixer's widths, chunks of the saved states, and the state
  const bool delta = traits_of(c.kind).has_mixer_state();
  const double HK = HD, HV = delta ? H * c.d_head * resolved_expand_v(c) : 0;
  const double S_head = delta ? double(c.d_head) * c.d_head * resolved_expand_v(c) : 0;
  const double Fm = delta ? H * S_head + std::max(c.short_conv - 1, 0) * (2 * HK + HV) : 0;
  const bool dropout = w.training && (c.dropout > 0 || c.dropatt > 0);
  const double f = 4;  // bytes per float; masks are bytes, ids int32

  MemoryEstimate e;
  e.training = w.training;
  const double P = model_param_count(c);
  e.weights = 2 * P * f;
  e.optimizer = w.training ? 2 * P * f : 0;

  auto segment_bytes = [&](int T_tokens) {
    const SegmentPlan p = plan_largest_segment(model, T_tokens);
    const double T = p.T, q = p.q, klen = p.klen, rows = q * B;
    double layer = klen * B * 3 * HD + klen * HD + B * H * q * klen + rows * HD +
                   4 * rows * d + rows * di + 4 * rows;
    if (delta)  // DeltaActivations in place of attention's (lib/core/activations.h)
      layer = rows * (6 * HK + 5 * HV + 7 * H) + std::ceil(q / 64.0) * B * H * S_head +
              4 * rows * d + rows * di + 4 * rows;
    if (p.mlen > 0) layer += klen * B * d;         // [cache; input]
    if (dropout) layer += rows * di + (2 * rows * d + rows * di) / f;  // f1_drop and masks
    if (assoc) layer += rows * (dm + Dk + 2 * d + 1) + m * B * (dm + Dk + 2 * d + 2);  // read, write
    double seg = L * layer * f;
    // h0, out, pos, logits, dlogits, a host copy of the logits (callers reading them), loss
    seg += (2 * rows * d + klen * d + 3 * T * B * V + T * B) * f;
    seg += 2 * T * B * 4 + q * klen + rows * d + (dropout ? rows * d + klen * d : 0);
    return seg;
  };
  int longest = 0;
  double all_segments = 0;
  for (int T : w.seg_len) {
    longest = std::max(longest, T);
    all_segments += segment_bytes(T);
  }
  const double N = double(w.seg_len.size());
  const double state = ((assoc ? 0 : m * B * d) + L * mlen * B * d + L * B * F + L * B * Fm) * f;
  double act = (N + 1) * state;
  if (!w.training) {
    // Evaluation runs one segment at a time (lib/run/evaluate.cpp): one segment's activations
    // and the states entering and leaving it, whatever the number of segments.
    act = 2 * state + segment_bytes(longest);
  } else if (w.recompute) {
    double logits = 0;
    for (int T : w.seg_len) logits += double(T) * B * V * f;
    act += segment_bytes(longest) + logits;  // one segment at a time, logits kept
  } else {
    act += all_segments;
  }
  if (w.training) {  // backward scratch: dh, dx, dtmp, dff, dav, dr, dqkv, dmem
    const SegmentPlan p = plan_largest_segment(model, longest);
    const double q = p.q, klen = p.klen, rows = q * B;
    act += (3 * rows * d + rows * di + rows * HD + klen * HD + klen * B * 3 * HD + 2 * m * B * d) * f;
    if (assoc) act += (2 * L * B * F + B * F + rows * (Dk + dm) + m * B * (2 * d + 1)) * f;  // armt's
    if (delta)  // the delta rule's: d(rows), the state's gradients, the rule's work (64-row chunks)
      act += (rows * (5 * HV + 6 * HK + 4 * H) + 2 * L * B * Fm + B * H * (66 * S_head + 2 * HV)) * f;
  }
  if (w.decoding) act += segment_bytes(longest);  // greedy decoding's own segment
  e.activations = act;
  e.data = w.data_bytes;
  e.runtime = 20e6;  // the binary, its libraries and OpenMP (measured: 15 MB for a tiny run)
  return e;
}

namespace {
// The first number on the line of /proc/meminfo (kB) or of a cgroup file; < 0 if none.
double read_number_file(const std::string& path, const std::string& key = "") {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!key.empty() && line.compare(0, key.size(), key) != 0) continue;
    std::istringstream ss(key.empty() ? line : line.substr(key.size()));
    double v;
    if (ss >> v) return v;
    return -1;  // "max": no limit
  }
  return -1;
}
}  // namespace

double available_memory_bytes(std::string* source) {
  double avail = read_number_file("/proc/meminfo", "MemAvailable:") * 1024;
  std::string why = "MemAvailable in /proc/meminfo";
  if (avail < 0) {
    avail = double(sysconf(_SC_AVPHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
    why = "free physical memory (sysconf)";
  }
  auto lower = [&](double limit, const std::string& what) {
    if (limit >= 0 && limit < avail) avail = limit, why = what;
  };
  // cgroup v2, then v1: the container's limit minus what it already uses
  double max2 = read_number_file("/sys/fs/cgroup/memory.max");
  if (max2 >= 0) lower(max2 - std::max(0.0, read_number_file("/sys/fs/cgroup/memory.current")), "the cgroup's memory.max");
  double max1 = read_number_file("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  if (max1 >= 0 && max1 < 1e18)
    lower(max1 - std::max(0.0, read_number_file("/sys/fs/cgroup/memory/memory.usage_in_bytes")),
          "the cgroup's memory.limit_in_bytes");
  for (auto [res, name] : {std::pair{RLIMIT_AS, "RLIMIT_AS (ulimit -v)"}, std::pair{RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)"}}) {
    struct rlimit rl {};
    if (getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) lower(double(rl.rlim_cur), name);
  }
  if (source) *source = why;
  return std::max(avail, 0.0);
}

void check_memory_fits(const MemoryEstimate& estimate, const std::string& what) {
  std::string source;
  const double avail = available_memory_bytes(&source);
  if (estimate.total() <= avail) return;
  fail("{} needs about {} of memory but {} is available ({}); {}", what, estimate.describe(), format_bytes(avail),
       source,
       estimate.training ? "reduce the model sizes, the batch size or the segment length, or set bptt_recompute: true"
                         : "evaluate a smaller batch (rmt eval --batch-size) or on a machine with more memory");
}

void check_threads(int threads, const std::string& key) {
  if (threads < 0 || threads > kMaxThreads)
    fail("{} {} is outside 0..{} (0 = all {} cores)", key, threads, kMaxThreads,
         sysconf(_SC_NPROCESSORS_ONLN));
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores > 0 && threads > cores)
    std::fprintf(stderr, "note: %s %d is more than the %ld cores: the threads share them (slower; "
                 "the results are those of %d threads)\n", key.c_str(), threads, cores, threads);
}

std::vector<int> segment_lengths(int T, int n) {
  if (n <= 0) fail("segments must be >= 1, got {}", n);
  if (n > T) fail("cannot split {} input positions into {} segments", T, n);
  std::vector<int> lengths(size_t(n), T / n);
  for (int i = 0; i < T % n; ++i) lengths[size_t(i)] += 1;
  return lengths;
}

std::string describe_segments(const std::vector<int>& lengths) {
  std::string s = fmt::format("{}", fmt::join(lengths, ","));
  for (int len : lengths)
    if (len != lengths.front()) return s + " (uneven)";
  return s;
}

}  // namespace rmt
