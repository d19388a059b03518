// train.weight_decay (AdamW's decoupled weight decay, docs/training.md "Weight decay"): which
// tensors decay, the update against a double-precision recompute of torch.optim.AdamW's
// algorithm, weight_decay 0 as Adam bit for bit, the skipped tensors untouched by it, and the CUDA
// backend's drivers (run on the host) giving the CPU's bits.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/model.h"
#include "lib/core/optim.h"
#include "lib/cuda/host_backend.h"
#include "tests/kernel_checks.h"

using namespace rmt;

TEST_CASE("weight decay: biases, norms and A_log skip it; weights, embeddings and memory decay") {
  for (const char* name : {"word_emb.emb_layers.0.weight", "mem_tokens", "layers.0.dec_attn.qkv_net.weight",
                           "layers.1.pos_ff.CoreNet.0.weight", "layers.0.attn.q_proj.weight",
                           "layers.0.W_mk.weight", "layers.0.attn.q_conv1d.weight"}) {
    CAPTURE(name);
    CHECK(decays_by_name(name));
  }
  for (const char* name : {"crit.out_layers.0.bias", "r_w_bias", "r_r_bias", "layers.0.pos_ff.CoreNet.0.bias",
                           "layers.0.pos_ff.layer_norm.weight", "layers.0.dec_attn.layer_norm.bias",
                           "layers.0.attn.A_log", "layers.0.attn.dt_bias", "layers.0.attn.o_norm.weight",
                           "layers.0.attn_layer_norm.weight", "layers.0.W_mb.bias"}) {
    CAPTURE(name);
    CHECK_FALSE(decays_by_name(name));
  }
  // Every tensor of each model kind gets its flag in the layout, and the ranges cover exactly
  // the decaying ones.
  for (const char* kind : {"rmt", "armt", "xl", "gated_deltanet"}) {
    ModelConfig c;
    c.kind = kind, c.n_token = 7, c.n_layer = 2, c.n_head = 2, c.d_head = 4, c.d_model = 8, c.d_inner = 16;
    c.num_mem_tokens = 2, c.mem_len = 3, c.d_mem = 2;
    Model m(c);
    CAPTURE(kind);
    std::vector<char> covered(size_t(m.num_params()), 0);
    for (const ParamRange& r : decaying_ranges(m.param_info))
      for (int64_t i = r.offset; i < r.offset + r.n; ++i) covered[size_t(i)] = 1;
    int decaying = 0, skipped = 0;
    for (const ParamInfo& p : m.param_info) {
      CAPTURE(p.name);
      CHECK(p.decays == decays_by_name(p.name));
      for (int64_t i = p.offset; i < p.offset + p.numel; ++i) CHECK(covered[size_t(i)] == char(p.decays));
      (p.decays ? decaying : skipped) += 1;
    }
    CHECK(decaying > 0);
    CHECK(skipped > 0);
  }
}

namespace {

// A layout of three tensors: w [3] decays, b (a bias) [2] does not, u [2] decays.
std::vector<ParamInfo> small_layout() {
  std::vector<ParamInfo> layout;
  int64_t offset = 0;
  for (auto [name, n] : std::vector<std::pair<std::string, int64_t>>{{"w", 3}, {"x.bias", 2}, {"u", 2}}) {
    layout.push_back({name, {n}, offset, n, decays_by_name(name)});
    offset += n;
  }
  return layout;
}

const std::vector<float> kStart = {0.5f, -1.25f, 2.f, 0.75f, -0.3f, 1.5f, -2.5f};
// The gradient of step s (1-based) at i.
float grad_at(int s, int i) { return float(0.3 * std::sin(1.7 * i + 0.9 * s) + 0.05 * i - 0.1); }

// `steps` Adam steps of lr_at(s) with weight decay wd on small_layout(), in float through the
// backend; the parameters after them.
template <class Lr>
std::vector<float> run_float(int steps, double wd, Lr lr_at, bool set_decay = true, Backend& b = be()) {
  Adam adam(b, int64_t(kStart.size()));
  if (set_decay) adam.set_weight_decay(wd, small_layout());
  DeviceArray<float> p, g;
  p.upload(b, kStart);
  std::vector<float> host_g(kStart.size());
  for (int s = 1; s <= steps; ++s) {
    for (size_t i = 0; i < host_g.size(); ++i) host_g[i] = grad_at(s, int(i));
    g.upload(b, host_g);
    adam.step(b, p, g, float(lr_at(s)));
  }
  return p.download();
}

}  // namespace

TEST_CASE("AdamW: steps with a changing lr match torch.optim.AdamW's algorithm recomputed in double") {
  const double wd = 0.2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  const int steps = 5;
  auto lr_at = [](int s) { return 0.05 / s; };  // decay uses the step's (scheduled) lr
  const std::vector<float> got = run_float(steps, wd, lr_at);
  const std::vector<ParamInfo> layout = small_layout();
  std::vector<double> p(kStart.begin(), kStart.end()), m(p.size(), 0), v(p.size(), 0);
  for (int s = 1; s <= steps; ++s) {
    const double lr = double(float(lr_at(s)));
    for (const ParamInfo& t : layout)
      for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
        const double gi = grad_at(s, int(i));
        if (t.decays) p[size_t(i)] *= 1 - lr * wd;  // torch: param.mul_(1 - lr * weight_decay), first
        m[size_t(i)] = beta1 * m[size_t(i)] + (1 - beta1) * gi;
        v[size_t(i)] = beta2 * v[size_t(i)] + (1 - beta2) * gi * gi;
        const double denom = std::sqrt(v[size_t(i)]) / std::sqrt(1 - std::pow(beta2, s)) + eps;
        p[size_t(i)] -= lr / (1 - std::pow(beta1, s)) * m[size_t(i)] / denom;
      }
  }
  for (size_t i = 0; i < p.size(); ++i) {
    CAPTURE(i);
    CHECK(double(got[i]) == doctest::Approx(p[i]).epsilon(1e-6));
  }
  // The decay is visible: without it the decaying entries land elsewhere (by more than the
  // tolerance above), the bias where it did.
  const std::vector<float> adam = run_float(steps, 0, lr_at);
  for (const ParamInfo& t : layout)
    for (int64_t i = t.offset; i < t.offset + t.numel; ++i) {
      CAPTURE(i);
      if (t.decays) CHECK(std::fabs(double(adam[size_t(i)]) - p[size_t(i)]) > 1e-4 * std::fabs(p[size_t(i)]));
      else CHECK(adam[size_t(i)] == got[size_t(i)]);  // skipped: not touched by the decay, bit for bit
    }
}

TEST_CASE("AdamW: weight_decay 0 is Adam bit for bit") {
  auto lr_at = [](int s) { return 1e-2 * s; };
  const std::vector<float> plain = run_float(4, 0, lr_at, /*set_decay=*/false);
  CHECK(run_float(4, 0, lr_at) == plain);
  CHECK(run_float(4, 1e-3, lr_at) != plain);
}

TEST_CASE("AdamW: the CUDA backend's drivers, run on the host, give the CPU's bits") {
  auto lr_at = [](int s) { return 0.03 / s; };
  cuda::HostDriverBackend cuda_host;
  CHECK(run_float(5, 0.2, lr_at, true, cuda_host) == run_float(5, 0.2, lr_at));
}
