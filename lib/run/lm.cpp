#include "lib/run/lm.h"

#include <algorithm>
#include <cmath>

#include "lib/core/error.h"
#include "lib/core/mixer.h"
#include "lib/run/checkpoint.h"

namespace rmt {

void LmCarry::restore(int64_t next_segment, std::deque<RecurrentState> stored) {
  if (next_segment < 0 || int64_t(stored.size()) > std::min<int64_t>(next_segment, window_ + 1))
    fail("a language-model state at segment {} cannot hold {} carried states (window {})",
         next_segment, stored.size(), window_);
  if (next_segment > 0 && stored.empty())
    fail("a language-model state at segment {} holds no carried state", next_segment);
  next_ = next_segment;
  stored_ = std::move(stored);
}

int LmCarry::window_segments() const { return int(std::min<int64_t>(window_, next_)); }

const RecurrentState* LmCarry::window_start() const {
  const int64_t first = next_ - window_segments();
  if (first == 0) return nullptr;
  const int64_t first_stored = next_ - int64_t(stored_.size()) + 1;
  if (first < first_stored) fail("internal: the state entering segment {} was not kept", first);
  return &stored_[size_t(first - first_stored)];
}

void LmCarry::hand_on(const RecurrentState& after) {
  RecurrentState slot;
  if (int64_t(stored_.size()) > window_) {  // the oldest falls out of the window: reuse it
    slot = std::move(stored_.front());
    stored_.pop_front();
  }
  slot = after;  // copies into slot's buffers (DeviceArray keeps its capacity)
  stored_.push_back(std::move(slot));
  ++next_;
}

namespace {

// The window's tokens and targets, [B, n*T] (n = window_segments() + 1; only the last segment is
// scored), as a StepBatch that starts from the carried state and hands the next one on.
struct LmWindow {
  std::vector<int32_t> input, target;
  std::vector<int> seg_len;
  StepBatch batch;  // points into the vectors above
  LmWindow(const LmWindow&) = delete;
  LmWindow(const LmCarry& carry, const LmSegmentSource& source, int B, int T) {
    const int64_t s = carry.next_segment();
    const int w = carry.window_segments(), n = w + 1;
    input.resize(size_t(B) * n * T);
    target.resize(size_t(B) * n * T);
    std::vector<int32_t> in, tg;
    for (int j = 0; j < n; ++j) {
      source(s - w + j, in, tg);
      if (in.size() != size_t(B) * T || tg.size() != size_t(B) * T)
        fail("internal: segment {} has {} inputs, expected {} x {}", s - w + j, in.size(), B, T);
      for (int b = 0; b < B; ++b) {
        std::copy_n(in.begin() + int64_t(b) * T, T, input.begin() + (int64_t(b) * n + j) * T);
        std::copy_n(tg.begin() + int64_t(b) * T, T, target.begin() + (int64_t(b) * n + j) * T);
      }
    }
    seg_len.assign(size_t(n), T);
    batch = {input.data(), target.data(), B, n * T, &seg_len, T, Carry{carry.window_start(), true}};
  }
};

}  // namespace

double lm_forward_backward(Engine& engine, LmCarry& carry, const LmSegmentSource& source, int B,
                           int T, bool training, uint64_t dropout_seed) {
  const LmWindow window(carry, source, B, T);
  // through the whole window: only its last segment is scored
  const double loss = forward_backward(engine, window.batch, -1, training, dropout_seed);
  carry.hand_on(engine.state(engine.num_segments()));
  return loss;
}

StepResult lm_train_step(Engine& engine, Model& model, Backend& be, Adam& adam, LmCarry& carry,
                         const LmSegmentSource& source, int B, int T, const StepSettings& settings,
                         StepCapture* capture) {
  const LmWindow window(carry, source, B, T);
  StepSettings s = settings;
  s.bptt = -1;  // through the whole window: only its last segment is scored
  const StepResult r = train_step(engine, model, be, adam, window.batch, s, capture);
  carry.hand_on(engine.state(engine.num_segments()));
  return r;
}

LmSegmentSource text_segment_source(const TextStreams& streams, int T) {
  return [&streams, T](int64_t index, std::vector<int32_t>& input, std::vector<int32_t>& target) {
    TextSegment seg = text_segment(streams, T, index);
    if (seg.len != T) fail("internal: segment {} has {} positions, not {}", index, seg.len, T);
    input = std::move(seg.input);
    target = std::move(seg.target);
  };
}

EvalResult evaluate_lm(Engine& engine, const TextStreams& streams, int T, int64_t max_positions) {
  const int B = streams.batch;
  int64_t segments = text_segment_count(streams, T);
  if (max_positions > 0)
    segments = std::min(segments, (max_positions + int64_t(B) * T - 1) / (int64_t(B) * T));
  RecurrentState state, next;
  engine.initial_state(state, B);
  SegmentActivations a;
  double loss_sum = 0;
  int64_t correct = 0, positions = 0;
  for (int64_t s = 0; s < segments; ++s) {
    TextSegment seg = text_segment(streams, T, s);
    engine.forward_segment(a, seg.input.data(), seg.target.data(), B, seg.len, state, next, false, 0, 1.f);
    for (float l : a.loss_rows.download()) loss_sum += l;
    const std::vector<float> logits = engine.segment_logits(a);  // [B, len, V]
    const int64_t V = int64_t(logits.size()) / (int64_t(B) * seg.len);
    for (int64_t i = 0; i < int64_t(B) * seg.len; ++i) {  // logits [B, len, V], targets [B, len]
      const float* row = logits.data() + i * V;
      correct += std::max_element(row, row + V) - row == seg.target[size_t(i)];
    }
    positions += int64_t(B) * seg.len;
    std::swap(state, next);
  }
  EvalResult r;
  r.loss = loss_sum / double(positions);
  if (!std::isfinite(r.loss))
    fail("the loss over {} positions is {}: the model's outputs are not finite numbers", positions, r.loss);
  r.bpc = r.loss / std::log(2.0);
  r.acc_teacher_forced = double(correct) / double(positions);
  r.samples = positions;
  r.positions = positions;
  r.streams = B;
  return r;
}

void add_lm_carry(const LmCarry& carry, const Model& model, int B, std::vector<TensorRef>& refs,
                  std::map<std::string, std::string>& metadata,
                  std::deque<std::vector<float>>& host) {
  auto on_host = [&](const DeviceArray<float>& x) { return host.emplace_back(x.download()).data(); };
  metadata["lm.next_segment"] = std::to_string(carry.next_segment());
  metadata["lm.states"] = std::to_string(carry.stored().size());
  for (size_t i = 0; i < carry.stored().size(); ++i) {
    const RecurrentState& st = carry.stored()[i];
    const std::string name = fmt::format("lm.state.{}", i);
    metadata[name + ".mlen"] = std::to_string(st.mlen);
    if (model.num_mem > 0) refs.push_back({name + ".mem", {model.num_mem, B, model.d}, on_host(st.mem)});
    if (st.mlen > 0)
      for (size_t l = 0; l < st.cache.size(); ++l)
        refs.push_back({fmt::format("{}.cache.{}", name, l), {st.mlen, B, model.d}, on_host(st.cache[l])});
    if (!st.mixer.empty())  // deltanet, gated_deltanet: every layer's S and convolution rows
      refs.push_back({name + ".mixer", {st.mixer.size()}, on_host(st.mixer)});
  }
}

void restore_lm_carry(const SafetensorsFile& f, const std::string& path, const Model& model, int B,
                      LmCarry& carry) {
  auto md = [&](const std::string& key) -> int64_t {
    auto it = f.metadata.find(key);
    if (it == f.metadata.end()) fail("{}: missing metadata '{}' (the language model's carried state)", path, key);
    try {
      size_t used = 0;
      const long long v = std::stoll(it->second, &used);
      if (used == it->second.size() && v >= 0) return v;
    } catch (const std::logic_error&) {
    }
    fail("{}: metadata '{}' is '{}', not a count", path, key, it->second);
  };
  auto tensor = [&](const std::string& name, int64_t numel) -> const std::vector<float>& {
    auto it = f.tensors.find(name);
    if (it == f.tensors.end()) fail("{}: missing '{}' (the language model's carried state)", path, name);
    if (it->second.numel() != numel)
      fail("{}: '{}' has {} values, expected {} (was the config changed?)", path, name, it->second.numel(), numel);
    check_finite(path, name, it->second.data.data(), numel);
    return it->second.data;
  };
  const int64_t next = md("lm.next_segment"), n = md("lm.states");
  if (n > carry.window() + 1)
    fail("{}: {} carried states, but the run's window keeps at most {}", path, n, carry.window() + 1);
  std::deque<RecurrentState> stored;
  for (int64_t i = 0; i < n; ++i) {
    const std::string name = fmt::format("lm.state.{}", i);
    RecurrentState st;
    st.mlen = int(md(name + ".mlen"));
    if (st.mlen > model.mem_len)
      fail("{}: {}.mlen is {}, more than the model's cache of {}", path, name, st.mlen, model.mem_len);
    if (model.num_mem > 0)
      st.mem.upload(model.backend, tensor(name + ".mem", int64_t(model.num_mem) * B * model.d));
    st.cache.resize(size_t(model.mem_len > 0 ? model.L : 0));
    if (st.mlen > 0)
      for (int l = 0; l < model.L; ++l)
        st.cache[size_t(l)].upload(model.backend, tensor(fmt::format("{}.cache.{}", name, l),
                                                         int64_t(st.mlen) * B * model.d));
    if (const int64_t mixer = mixer_state_floats(model, B); mixer > 0)
      st.mixer.upload(model.backend, tensor(name + ".mixer", mixer));
    stored.push_back(std::move(st));
  }
  try {
    carry.restore(next, std::move(stored));
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

}  // namespace rmt
