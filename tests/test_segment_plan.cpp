// SegmentPlan (lib/core/segment_plan.h): what each segment computes, against shapes counted
// by hand for every model kind; the engine runs the plan it states; and the benchmark's FLOP
// count and the memory estimate, which now derive their shapes from the plan, give exactly the
// numbers they gave before it existed.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "lib/core/engine.h"
#include "lib/core/model.h"
#include "lib/core/segment_plan.h"
#include "lib/experiments/bench.h"
#include "tests/source_manifest.h"

using namespace rmt;

namespace {

SegmentModel with_memory(int m, bool write_block, int mem_len = 0) { return {m, mem_len, write_block}; }

// The fields a test states, in the order of the struct.
struct Shape {
  int m_read, T, m_write, mlen, q, klen, live_begin, live_end;
  bool scored, logits, memory_out, run, backward;
  int next_mlen;
};

void check_plan(const SegmentPlan& p, const Shape& e) {
  CHECK(p.m_read == e.m_read);
  CHECK(p.T == e.T);
  CHECK(p.m_write == e.m_write);
  CHECK(p.mlen == e.mlen);
  CHECK(p.q == e.q);
  CHECK(p.klen == e.klen);
  CHECK(p.live_begin == e.live_begin);
  CHECK(p.live_end == e.live_end);
  CHECK(p.scored == e.scored);
  CHECK(p.logits == e.logits);
  CHECK(p.memory_out == e.memory_out);
  CHECK(p.run == e.run);
  CHECK(p.backward == e.backward);
  CHECK(p.next_mlen == e.next_mlen);
}

const std::vector<int> kThreeOfFour = {4, 4, 4};  // 12 positions in 3 segments of 4

}  // namespace

TEST_CASE("segment plan: rmt, 2 memory tokens, 3 segments of 4") {
  const SegmentModel rmt = with_memory(2, true);
  // Training, the last 4 positions scored (segment 2 only). Segments 0 and 1 pass memory on:
  // q = 2 read + 4 tokens + 2 write = 8, the last layer runs only the write rows [6, 8). The
  // last segment passes nothing on: no write block (q = 6), live rows the tokens [2, 6).
  std::vector<SegmentPlan> p = plan_forward(rmt, kThreeOfFour, 8, true, false);
  REQUIRE(p.size() == 3);
  //               m  T  mw mlen q klen live  scored logits memory run   backward next_mlen
  check_plan(p[0], {2, 4, 2, 0, 8, 8, 6, 8, false, false, true, true, true, 0});
  check_plan(p[1], {2, 4, 2, 0, 8, 8, 6, 8, false, false, true, true, true, 0});
  check_plan(p[2], {2, 4, 0, 0, 6, 6, 2, 6, true, true, false, true, true, 0});
  CHECK(p[0].mem_out_row == 6);
  // The last 6 positions scored: segment 1 also needs its token rows, live [2, 8).
  p = plan_forward(rmt, kThreeOfFour, 6, true, false);
  check_plan(p[1], {2, 4, 2, 0, 8, 8, 2, 8, true, true, true, true, true, 0});
  // A language model carries the state on: the last segment keeps its write block.
  p = plan_forward(rmt, kThreeOfFour, 8, true, true);
  check_plan(p[2], {2, 4, 2, 0, 8, 8, 2, 8, true, true, true, true, true, 0});
  // Evaluation: every row of every segment, the write block included.
  p = plan_forward(rmt, kThreeOfFour, 8, false, false);
  for (const SegmentPlan& s : p) {
    CHECK(s.q == 8);
    CHECK(s.live_begin == 0);
    CHECK(s.live_end == 8);
  }
  CHECK(p[0].logits);
  CHECK(p[2].memory_out);
}

TEST_CASE("segment plan: armt, 2 memory tokens at the end only, 3 segments of 4") {
  const SegmentModel armt = {2, 0, true, false};  // write block, no read block (docs/armt.md)
  // Training, the last 4 positions scored: segments 0 and 1 write A and z from their memory
  // rows, q = 4 tokens + 2 memory rows, the last layer runs only the memory rows [4, 6); the
  // last segment writes nothing: its tokens only, live [0, 4).
  std::vector<SegmentPlan> p = plan_forward(armt, kThreeOfFour, 8, true, false);
  REQUIRE(p.size() == 3);
  //               m  T  mw mlen q klen live  scored logits memory run   backward next_mlen
  check_plan(p[0], {0, 4, 2, 0, 6, 6, 4, 6, false, false, true, true, true, 0});
  check_plan(p[1], {0, 4, 2, 0, 6, 6, 4, 6, false, false, true, true, true, 0});
  check_plan(p[2], {0, 4, 0, 0, 4, 4, 0, 4, true, true, false, true, true, 0});
  CHECK(p[0].mem_out_row == 4);
  // Evaluation: every row, the memory rows included.
  p = plan_forward(armt, kThreeOfFour, 8, false, false);
  for (const SegmentPlan& s : p) {
    CHECK(s.q == 6);
    CHECK(s.live_end == 6);
    CHECK(s.memory_out);
  }
}

TEST_CASE("segment plan: mt passes its read rows on") {
  const SegmentModel mt = with_memory(2, false);
  std::vector<SegmentPlan> p = plan_forward(mt, kThreeOfFour, 8, true, false);
  // No write block: q = 2 + 4; the memory passed on is the read rows' output [0, 2).
  check_plan(p[0], {2, 4, 0, 0, 6, 6, 0, 2, false, false, true, true, true, 0});
  CHECK(p[0].mem_out_row == 0);
  check_plan(p[2], {2, 4, 0, 0, 6, 6, 2, 6, true, true, false, true, true, 0});
  p = plan_forward(mt, kThreeOfFour, 6, true, false);  // segment 1 scored: memory and tokens
  check_plan(p[1], {2, 4, 0, 0, 6, 6, 0, 6, true, true, true, true, true, 0});
}

TEST_CASE("segment plan: xl with mem_len 4, and baseline") {
  const SegmentModel xl = {0, 4, false};
  // Unscored segments run only for the next cache (no live rows, no backward); the cache grows
  // to min(mem_len, klen) rows.
  std::vector<SegmentPlan> p = plan_forward(xl, kThreeOfFour, 8, true, false);
  check_plan(p[0], {0, 4, 0, 0, 4, 4, 0, 0, false, false, false, true, false, 4});
  check_plan(p[1], {0, 4, 0, 4, 4, 8, 0, 0, false, false, false, true, false, 4});
  check_plan(p[2], {0, 4, 0, 4, 4, 8, 0, 4, true, true, false, true, true, 4});
  CHECK_FALSE(p[2].cache_out);  // nothing reads the last segment's cache
  p = plan_forward({0, 6, false}, kThreeOfFour, 8, true, false);  // mem_len 6: 4, then 6 rows
  CHECK(p[1].mlen == 4);
  CHECK(p[2].mlen == 6);
  CHECK(p[2].klen == 10);
  // baseline: unscored segments feed nothing and are not run.
  p = plan_forward({0, 0, false}, kThreeOfFour, 8, true, false);
  check_plan(p[0], {0, 4, 0, 0, 4, 4, 0, 0, false, false, false, false, false, 0});
  check_plan(p[2], {0, 4, 0, 0, 4, 4, 0, 4, true, true, false, true, true, 0});
}

TEST_CASE("segment plan: xl_rmt, 2 memory tokens and mem_len 4") {
  const SegmentModel xl_rmt = with_memory(2, true, 4);
  std::vector<SegmentPlan> p = plan_forward(xl_rmt, kThreeOfFour, 8, true, false);
  check_plan(p[0], {2, 4, 2, 0, 8, 8, 6, 8, false, false, true, true, true, 4});
  check_plan(p[1], {2, 4, 2, 4, 8, 12, 6, 8, false, false, true, true, true, 4});
  check_plan(p[2], {2, 4, 0, 4, 6, 10, 2, 6, true, true, false, true, true, 4});
  // From a carried state with a full cache (a language model's steady state).
  p = plan_forward(xl_rmt, {4}, 0, true, true, 4);
  check_plan(p[0], {2, 4, 2, 4, 8, 12, 2, 8, true, true, true, true, true, 4});
  // The largest shapes, the memory estimate's bound: evaluation with a full cache.
  const SegmentPlan big = plan_largest_segment(xl_rmt, 4);
  check_plan(big, {2, 4, 2, 4, 8, 12, 0, 8, false, true, true, true, true, 4});
}

TEST_CASE("segment plan: the engine runs the plan it states") {
  for (const char* kind : {"baseline", "mt", "xl", "rmt", "xl_rmt", "armt"}) {
    CAPTURE(kind);
    ModelConfig c;
    c.kind = kind;
    c.n_token = 7, c.n_layer = 1, c.n_head = 1, c.d_head = 4, c.d_model = 8, c.d_inner = 8;
    c.d_mem = 2;
    c.dropout = 0;
    c.mem_len = traits_of(kind).has_cache ? 4 : 0;
    c.num_mem_tokens = traits_of(kind).has_memory ? 2 : 0;
    Model model(c);
    model.init_weights(1);
    Engine engine(model);
    RecurrentState state, next;
    engine.initial_state(state, 2);
    SegmentActivations a;
    const std::vector<int32_t> tokens(8, 1), targets(8, 2);
    for (int s = 0; s < 3; ++s) {  // training, memory asked for, no logits
      const SegmentPlan want = plan_segment(segment_model(c), 4, state.mlen, true, {false, true});
      engine.forward_segment(a, tokens.data(), targets.data(), 2, 4, state, next, true, 0, 1.f,
                             {false, true});
      CHECK(a.plan.q == want.q);
      CHECK(a.plan.klen == want.klen);
      CHECK(a.plan.live_begin == want.live_begin);
      CHECK(a.plan.live_end == want.live_end);
      CHECK(next.mlen == want.next_mlen);
      CHECK(a.h0.size() == int64_t(want.q) * 2 * c.d_model);
      if (want.memory_out && !traits_of(kind).has_assoc)
        CHECK(next.mem.size() == int64_t(want.m_read) * 2 * c.d_model);
      if (want.memory_out && traits_of(kind).has_assoc)  // A [6 d_mem, d] and z [6 d_mem] a sample
        CHECK((next.assoc.size() == int64_t(2) * (12 * c.d_model + 12) && next.assoc_written));
      state = next;
    }
  }
}

namespace {
// A bench workload of each kind with a cache and memory of every size the test asks for (bench
// models exist only for baseline, xl and rmt).
BenchWorkload custom_workload(const std::string& kind, bool lm) {
  BenchWorkload w = bench_workload(lm ? "lm_rmt" : "rmt", true);
  w.model.kind = kind;
  w.model.n_layer = 2;
  w.model.num_mem_tokens = traits_of(kind).has_memory ? 3 : 0;
  w.model.mem_len = traits_of(kind).has_cache ? 5 : 0;
  if (lm) {
    w.lm_window = w.model.num_mem_tokens > 0 ? 2 : 0;
    w.lm_segment = 6;
  } else {
    w.copy_length = 7;  // 21 positions in segments 6, 5, 5, 5
    w.segments = 4;
  }
  return w;
}
}  // namespace

// The expected numbers below were printed by the code before SegmentPlan existed (main at
// 024444a: forward_flops, step_flops and estimate_memory(...).activations, built into a small
// program linked against that commit's librmtlib.a), and pasted here unchanged.
TEST_CASE("segment plan: the bench's FLOP count is what it was") {
  struct Case {
    const char* model;
    bool tiny;
    double forward, step;
  };
  const Case cases[] = {
    {"baseline", true, 373248, 746496},
    {"xl", true, 480768, 1069056},
    {"rmt", true, 1313280, 2207232},
    {"lm_baseline", true, 212992, 638976},
    {"lm_xl", true, 253952, 761856},
    {"lm_rmt", true, 263168, 868352},
    {"copy120_baseline", true, 368640, 737280},
    {"copy120_xl", true, 422400, 898560},
    {"copy120_rmt", true, 797184, 1486080},
    {"repro_copy_rmt", true, 1064448, 2142720},
    {"repro_retrieval_rmt", true, 623360, 959232},
    {"baseline", false, 3989569536, 7979139072},
    {"xl", false, 5436604416, 13315866624},
    {"rmt", false, 13992984576, 33884209152},
    {"lm_baseline", false, 21407727616, 64223182848},
    {"lm_xl", false, 28252831744, 84758495232},
    {"lm_rmt", false, 24960434176, 141401210880},
    {"copy120_baseline", false, 26736721920, 53473443840},
    {"copy120_xl", false, 32619233280, 77797785600},
    {"copy120_rmt", false, 70430883840, 171544412160},
    {"repro_copy_rmt", false, 61267968, 150134784},
    // fig4_retrieval.yaml's run (d_model 32, 2 heads, batch 128) since issue 58, counted by this
    // commit's formula, which the cases above pin; 024444a's typed shape (d_model 64, 4 heads,
    // batch 32) gave 132259840, 291790848.
    {"repro_retrieval_rmt", false, 137830400, 299630592},
  };
  for (const Case& c : cases) {
    CAPTURE(c.model);
    CAPTURE(c.tiny);
    const BenchWorkload w = bench_workload(c.model, c.tiny, 0, kSourceManifest);
    CHECK(forward_flops(w) == c.forward);
    CHECK(step_flops(w) == c.step);
  }
  struct KindCase {
    const char* kind;
    double forward, step;
  };
  const KindCase copy[] = {  // every kind, uneven segments, cache 5, memory 3
    {"baseline", 827136, 1762560},
    {"mt", 1357056, 3677184},
    {"xl", 1084416, 2649600},
    {"rmt", 1942272, 4582656},
    {"xl_rmt", 2268672, 5475456},
  };
  for (const KindCase& c : copy) {
    CAPTURE(c.kind);
    const BenchWorkload w = custom_workload(c.kind, false);
    CHECK(forward_flops(w) == c.forward);
    CHECK(step_flops(w) == c.step);
  }
  // The language model with a window of 2 earlier segments. Before the plan, the LM count
  // assumed what holds for the bench's lm_* models only: that the earlier segments have no cache
  // (rmt) and that their live rows are the write block (not mt's read block). For mt and xl_rmt
  // it counted less than the engine runs; the plan counts what the engine runs. The mt
  // difference by hand (B 2, d 16, H 2, Dh 8, d_inner 32, klen 9): a last-layer row costs
  // 6*B*H*klen*Dh + 2*B*H*Dh*d + 4*B*d*d_inner = 6848; 2 earlier segments x 3 memory rows x 3
  // (forward and backward) + the new segment's 3 memory rows once = 21 rows = 143808.
  const KindCase lm[] = {
    {"baseline", 216576, 649728},
    {"mt", 286080, 1697280},  // before: 1553472, the earlier segments' 3 memory rows uncounted
    {"xl", 263936, 791808},
    {"rmt", 362496, 2055552},
    {"xl_rmt", 421376, 2513472},  // before: 2212032, the earlier segments' cache of 5 uncounted
  };
  for (const KindCase& c : lm) {
    CAPTURE(c.kind);
    const BenchWorkload w = custom_workload(c.kind, true);
    CHECK(forward_flops(w) == c.forward);
    CHECK(step_flops(w) == c.step);
  }
}

TEST_CASE("segment plan: the memory estimate is what it was") {
  struct Case {
    const char* kind;
    int mode;  // 1 training, 2 training with bptt_recompute, 4 training without dropout
    double activations;
  };
  const Case cases[] = {
    {"baseline", 1, 4055062},
    {"baseline", 2, 1596029},
    {"baseline", 4, 3425302},
    {"mt", 1, 5921065},
    {"mt", 2, 2318000},
    {"mt", 4, 5007913},
    {"xl", 1, 6603958},
    {"xl", 2, 2755765},
    {"xl", 4, 5971126},
    {"rmt", 1, 7758322},
    {"rmt", 2, 2999669},
    {"rmt", 4, 6561778},
    {"xl_rmt", 1, 10537762},
    {"xl_rmt", 2, 4236253},
    {"xl_rmt", 4, 9338146},
  };
  for (const Case& c : cases) {
    CAPTURE(c.kind);
    CAPTURE(c.mode);
    ModelConfig m;
    m.kind = c.kind;
    m.n_token = 50, m.mem_len = 8, m.num_mem_tokens = 3;
    if (c.mode == 4) m.dropout = 0;
    Workload w;
    w.batch = 5;
    w.seg_len = {7, 7, 6};
    w.training = true;
    w.recompute = c.mode == 2;
    CHECK(estimate_memory(m, w).activations == c.activations);
  }
}

TEST_CASE("segment plan: evaluation's memory estimate does not grow with the number of segments") {
  // Evaluation runs one segment at a time (lib/run/evaluate.cpp); greedy decoding adds one more.
  for (const char* kind : {"baseline", "mt", "xl", "rmt", "xl_rmt"}) {
    CAPTURE(kind);
    ModelConfig m;
    m.kind = kind;
    m.n_token = 50, m.mem_len = 8, m.num_mem_tokens = 3;
    Workload w;
    w.batch = 5;
    w.seg_len = {7, 7, 6};
    const double three = estimate_memory(m, w).activations;
    w.seg_len.assign(256, 7);
    CHECK(estimate_memory(m, w).activations == three);
    w.seg_len = {7};  // the longest segment decides
    CHECK(estimate_memory(m, w).activations == three);
    w.seg_len = {7, 7, 6};
    w.decoding = true;  // greedy decoding: a second segment's activations, at most twice
    const double decoding = estimate_memory(m, w).activations;
    CHECK(decoding > three);
    CHECK(decoding <= 2 * three);
  }
}
