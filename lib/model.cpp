#include "lib/model.h"

#include <fmt/format.h>

#include "lib/error.h"
#include "lib/random.h"

namespace rmt {

ModelKind parse_model_kind(const std::string& kind) {
  if (kind == "baseline") return ModelKind::baseline;
  if (kind == "xl") return ModelKind::xl;
  if (kind == "rmt") return ModelKind::rmt;
  if (kind == "mt") return ModelKind::mt;
  if (kind == "xl_rmt") return ModelKind::xl_rmt;
  fail("unknown model kind '{}' (expected baseline, xl, rmt, mt or xl_rmt)", kind);
}

Model::Model(const ModelConfig& c) : config(c), kind(parse_model_kind(c.kind)) {
  V = c.n_token, L = c.n_layer, H = c.n_head, Dh = c.d_head, d = c.d_model, d_inner = c.d_inner;
  if (V <= 0 || L <= 0 || H <= 0 || Dh <= 0 || d <= 0 || d_inner <= 0)
    fail("model sizes must be positive (n_token {}, n_layer {}, n_head {}, d_head {}, d_model {}, "
         "d_inner {})", V, L, H, Dh, d, d_inner);
  if (d % 2 != 0) fail("model.d_model must be even for the sinusoid position embedding, got {}", d);
  bool has_cache = kind == ModelKind::xl || kind == ModelKind::xl_rmt;
  bool has_memory = kind == ModelKind::rmt || kind == ModelKind::mt || kind == ModelKind::xl_rmt;
  mem_len = has_cache ? c.mem_len : 0;
  m = has_memory ? c.num_mem_tokens : 0;
  write_block = kind == ModelKind::rmt || kind == ModelKind::xl_rmt;
  if (has_cache && mem_len <= 0) fail("model.kind={} needs model.mem_len > 0", c.kind);
  if (has_memory && m <= 0) fail("model.kind={} needs model.num_mem_tokens > 0", c.kind);

  // Layout, in the order of the authors' state_dict.
  int64_t offset = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    param_info.push_back({std::move(name), std::move(shape), offset, n});
    offset += n;
  };
  const int HD = H * Dh;
  if (m > 0) add("mem_tokens", {m, 1, d});
  add("r_w_bias", {H, Dh});
  add("r_r_bias", {H, Dh});
  add("word_emb.emb_layers.0.weight", {V, d});
  for (int l = 0; l < L; ++l) {
    std::string p = fmt::format("layers.{}.", l);
    add(p + "dec_attn.qkv_net.weight", {3 * HD, d});
    add(p + "dec_attn.o_net.weight", {d, HD});
    add(p + "dec_attn.layer_norm.weight", {d});
    add(p + "dec_attn.layer_norm.bias", {d});
    add(p + "dec_attn.r_net.weight", {HD, d});
    add(p + "pos_ff.CoreNet.0.weight", {d_inner, d});
    add(p + "pos_ff.CoreNet.0.bias", {d_inner});
    add(p + "pos_ff.CoreNet.3.weight", {d, d_inner});
    add(p + "pos_ff.CoreNet.3.bias", {d});
    add(p + "pos_ff.layer_norm.weight", {d});
    add(p + "pos_ff.layer_norm.bias", {d});
  }
  add("crit.out_layers.0.bias", {V});
  params.assign(size_t(offset), 0.f);
  grads.assign(size_t(offset), 0.f);

  auto bind = [&](float* base) {
    auto at = [&](const std::string& name) { return base + find(name)->offset; };
    Weights w;
    w.mem = m > 0 ? at("mem_tokens") : nullptr;
    w.u = at("r_w_bias");
    w.v = at("r_r_bias");
    w.emb = at("word_emb.emb_layers.0.weight");
    w.out_bias = at("crit.out_layers.0.bias");
    for (int l = 0; l < L; ++l) {
      std::string p = fmt::format("layers.{}.", l);
      w.layers.push_back({at(p + "dec_attn.qkv_net.weight"), at(p + "dec_attn.r_net.weight"),
                          at(p + "dec_attn.o_net.weight"), at(p + "dec_attn.layer_norm.weight"),
                          at(p + "dec_attn.layer_norm.bias"), at(p + "pos_ff.CoreNet.0.weight"),
                          at(p + "pos_ff.CoreNet.0.bias"), at(p + "pos_ff.CoreNet.3.weight"),
                          at(p + "pos_ff.CoreNet.3.bias"), at(p + "pos_ff.layer_norm.weight"),
                          at(p + "pos_ff.layer_norm.bias")});
    }
    return w;
  };
  W = bind(params.data());
  G = bind(grads.data());
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
  for (const auto& p : param_info) {
    float* x = params.data() + p.offset;
    const std::string& n = p.name;
    bool is_bias = n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
    bool is_ln = n.find("layer_norm") != std::string::npos;
    if (n == "mem_tokens" && config.mem_init == "normal") {
      normal(x, p.numel, 0.0, std);
    } else if (n == "mem_tokens") {
      normal(x, d, 0.0, 1.0);  // one vector, repeated m times
      for (int i = 1; i < m; ++i) std::copy(x, x + d, x + int64_t(i) * d);
    } else if (is_ln && !is_bias) {
      normal(x, p.numel, 1.0, std);
    } else if (is_bias) {
      std::fill(x, x + p.numel, 0.f);
    } else {
      normal(x, p.numel, 0.0, std);
    }
  }
}

double model_param_count(const ModelConfig& c) {
  const ModelKind kind = parse_model_kind(c.kind);
  const bool has_memory = kind == ModelKind::rmt || kind == ModelKind::mt || kind == ModelKind::xl_rmt;
  const double d = c.d_model, HD = double(c.n_head) * c.d_head, di = c.d_inner, V = c.n_token;
  const double per_layer = 3 * HD * d + d * HD + HD * d + di * d + di + d * di + d + 4 * d;
  return (has_memory ? double(c.num_mem_tokens) * d : 0.0) + 2 * HD + V * d + V +
         double(c.n_layer) * per_layer;
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
