// Evaluation: teacher-forced against free-running accuracy on a trained model whose answer starts
// inside a segment; evaluate_run (`rmt eval`) on the run's own data and on longer data of its task.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/backend.h"
#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/core/optim.h"
#include "lib/core/random.h"
#include "lib/files/io.h"
#include "lib/run/evaluate.h"
#include "lib/run/eval_run.h"
#include "lib/run/run_family.h"
#include "lib/files/npy.h"
#include "lib/run/train.h"
#include "tasks/generate.h"
#include "tasks/task_kind.h"
#include "tests/cli.h"

using namespace rmt;

namespace {

// "Count on": row = noise (T - A + 1 tokens) | y0 | y0+1 | y0+2 ... (mod V), input = row[:-1],
// target = row[1:]. The answer (the last A targets) starts with y0, which nothing predicts (chance,
// 1/V); every later answer token is the previous one plus 1. Teacher forced, a model that learnt
// the rule gets (1/V + A - 1) / A; decoding freely it continues from its own guess of y0, so a
// sample is all right (y0 guessed) or all wrong: 1/V.
constexpr int V = 6, T = 8, A = 5;

void make_batch(SplitMixRng& rng, int B, std::vector<int32_t>& input, std::vector<int32_t>& target) {
  input.assign(size_t(B) * T, 0);
  target.assign(size_t(B) * T, 0);
  for (int b = 0; b < B; ++b) {
    std::vector<int32_t> row(T + 1);
    for (int t = 0; t <= T - A; ++t) row[size_t(t)] = int32_t(rng.below(V));
    row[T - A + 1] = int32_t(rng.below(V));
    for (int t = T - A + 2; t <= T; ++t) row[size_t(t)] = (row[size_t(t - 1)] + 1) % V;
    for (int t = 0; t < T; ++t) {
      input[size_t(b * T + t)] = row[size_t(t)];
      target[size_t(b * T + t)] = row[size_t(t + 1)];
    }
  }
}

// Tiny models run faster on one thread (and do not fight the other tests for the cores).
struct OneThread {
  int saved = num_threads();
  OneThread() { set_num_threads(1); }
  ~OneThread() { set_num_threads(saved); }
};

}  // namespace

TEST_CASE("free-running accuracy with the answer inside a segment: errors carry on, teacher forcing hides them") {
  OneThread one_thread;
  for (const char* kind : {"baseline", "rmt"}) {
    ModelConfig c;
    c.kind = kind;
    c.n_token = V;
    c.n_layer = 1;
    c.n_head = 2;
    c.d_head = 8;
    c.d_model = 16;
    c.d_inner = 32;
    c.dropout = 0;
    c.mem_init = "normal";
    c.num_mem_tokens = std::string(kind) == "rmt" ? 2 : 0;
    Model model(c);
    model.init_weights(3);
    Engine engine(model, cpu_backend());
    Adam adam(cpu_backend(), model.num_params());
    const std::vector<int> seg_len{5, 3};  // the answer starts at position 3, inside segment 0
    SplitMixRng rng(11);
    std::vector<int32_t> input, target;
    for (int step = 0; step < 150; ++step) {
      make_batch(rng, 32, input, target);
      forward_loss(engine, input.data(), target.data(), 32, T, seg_len, A, true, uint64_t(step));
      engine.backward(-1);
      clip_grad_norm(cpu_backend(), model.grads, 1.0);
      adam.step(cpu_backend(), model.params, model.grads, 1e-2f);
    }
    SampleSplit held_out;
    held_out.n = 600;
    held_out.seq_len = T;
    SplitMixRng test_rng(99);
    make_batch(test_rng, int(held_out.n), held_out.input, held_out.target);
    EvalOptions opt;
    opt.seg_len = seg_len;
    opt.answer_size = A;
    opt.batch_size = 64;
    opt.solve_positions = A;  // solved = the whole answer right: from greedy decoding
    // The predictions handed out are the ones scored: as many whole answers right as exact_match says.
    int64_t listed = 0, listed_exact = 0;
    opt.on_predictions = [&](int64_t start, int B, const int32_t*, const int32_t* target, const int32_t* pred) {
      CHECK(start == listed);
      for (int b = 0; b < B; ++b, ++listed)
        listed_exact += std::equal(target + int64_t(b) * T + (T - A), target + int64_t(b + 1) * T,
                                   pred + int64_t(b) * T + (T - A));
    };
    EvalResult r = evaluate(engine, held_out, opt);
    opt.on_predictions = nullptr;
    CHECK(listed == held_out.n);
    REQUIRE(r.exact_match.has_value());
    CHECK(double(listed_exact) / double(listed) == *r.exact_match);
    opt.kv_cache_decoding = false;
    EvalResult rerun = evaluate(engine, held_out, opt);
    opt.free_running = false;
    EvalResult tf_only = evaluate(engine, held_out, opt);
    CAPTURE(kind);
    MESSAGE(std::string(kind), ": teacher-forced ", r.acc_teacher_forced, ", free-running ",
            r.acc_free_running.value_or(-1), ", solved ", r.solve_rate.value_or(-1));
    const double chance = 1.0 / V;
    CHECK(r.acc_teacher_forced > (chance + A - 1) / A - 0.05);
    REQUIRE(r.acc_free_running.has_value());
    CHECK(*r.acc_free_running < chance + 0.06);
    CHECK(*r.acc_free_running > chance - 0.06);
    // all or nothing: the solve rate (all A right) equals the per-token accuracy
    CHECK(*r.solve_rate == doctest::Approx(*r.acc_free_running).epsilon(0.02));
    CHECK(rerun.acc_free_running == r.acc_free_running);
    CHECK(!tf_only.acc_free_running.has_value());
    CHECK(tf_only.acc_teacher_forced == r.acc_teacher_forced);
    // teacher-forced, the solve rate asks for y0 right as well: chance
    CHECK(*tf_only.solve_rate < chance + 0.06);
    // exact match: every answer position right, the solve rate's rule over the whole answer
    CHECK(*r.exact_match == *r.solve_rate);
    CHECK(*r.exact_match_teacher_forced == *r.solve_rate_teacher_forced);
    CHECK(!tf_only.exact_match.has_value());
    CHECK(*tf_only.exact_match_teacher_forced == *tf_only.solve_rate_teacher_forced);
  }
}

TEST_CASE("evaluation runs one segment at a time: the same loss and predictions as a forward of all segments") {
  // The reference is the evaluation as it was before it streamed: Engine::forward keeps every
  // segment, then every scored segment's logits are read back.
  OneThread one_thread;
  const std::vector<int> seg_len{3, 3, 2, 3, 3};  // 14 positions; the answer starts in segment 3
  const int n = 20, TT = 14, AA = 4, VV = 7;
  SplitMixRng rng(5);
  SampleSplit split;
  split.n = n, split.seq_len = TT;
  for (int64_t i = 0; i < int64_t(n) * TT; ++i) {
    split.input.push_back(int32_t(rng.below(VV)));
    split.target.push_back(int32_t(rng.below(VV)));
  }
  for (const char* kind : {"baseline", "mt", "xl", "rmt", "xl_rmt", "armt"}) {
    CAPTURE(kind);
    const std::string k = kind;
    ModelConfig c;
    c.kind = kind;
    c.n_token = VV, c.n_layer = 2, c.n_head = 2, c.d_head = 4, c.d_model = 8, c.d_inner = 16;
    c.dropout = 0;
    c.mem_init = "normal";
    c.num_mem_tokens = k == "rmt" || k == "mt" || k == "xl_rmt" || k == "armt" ? 2 : 0;
    c.mem_len = k == "xl" || k == "xl_rmt" ? 4 : 0;
    c.d_mem = 2;  // armt
    Model model(c);
    model.init_weights(9);
    Engine engine(model, cpu_backend());
    EvalOptions opt;
    opt.seg_len = seg_len, opt.answer_size = AA, opt.batch_size = 8, opt.free_running = false;
    const EvalResult streamed = evaluate(engine, split, opt);

    double loss_sum = 0;
    int64_t correct = 0;
    for (int start = 0; start < n; start += opt.batch_size) {
      const int B = std::min(opt.batch_size, n - start);
      const int32_t* target = split.target.data() + int64_t(start) * TT;
      loss_sum += forward_loss(engine, split.input.data() + int64_t(start) * TT, target, B, TT, seg_len, AA, false, 0) * B;
      int t0 = 0;
      for (int s = 0; s < engine.num_segments(); ++s) {
        const std::vector<float> logits = engine.logits(s);
        const int Ts = seg_len[size_t(s)];
        for (int b = 0; b < B; ++b)
          for (int j = 0; j < Ts; ++j) {
            if (t0 + j < TT - AA) continue;
            const float* row = logits.data() + (int64_t(b) * Ts + j) * VV;
            correct += int(std::max_element(row, row + VV) - row) == target[int64_t(b) * TT + t0 + j];
          }
        t0 += Ts;
      }
    }
    CHECK(streamed.loss == loss_sum / n);  // bit for bit
    CHECK(streamed.acc_teacher_forced == double(correct) / double(n * AA));
  }
}

namespace {

void generate(const std::string& task, int length, int64_t train, int64_t test, const std::string& out) {
  GenerateRequest r;
  r.task = resolve_task(task, length, 4);
  r.sizes = {train, 8, test};
  r.seed = 5;
  r.out_dir = out;
  r.force = true;
  generate_dataset(r);
}

// A run of `kind` on `data`, a few dozen steps of a tiny model.
std::string tiny_run(const std::string& root, const std::string& kind, const std::string& data,
                     int segments, int layers = 1) {
  Config c;
  c.data = data;
  c.segments = segments;
  c.model.kind = kind;
  c.model.n_layer = layers;
  c.model.n_head = 2;
  c.model.d_head = 4;
  c.model.d_model = 8;
  c.model.d_inner = 16;
  c.model.dropout = 0;
  c.model.mem_len = (kind == "xl" || kind == "xl_rmt") ? 4 : 0;
  c.model.num_mem_tokens = (kind == "rmt" || kind == "mt" || kind == "xl_rmt" || kind == "armt") ? 2 : 0;
  c.train.batch_size = 8;
  c.train.lr = 3e-3;
  c.train.schedule = "constant";
  c.train.max_steps = 30;
  c.train.eval_every = 30;
  c.train.log_every = 30;
  c.train.threads = 1;
  TrainOptions opt;
  opt.run_dir = root + "/" + kind + std::to_string(segments);
  train(c, opt);
  return opt.run_dir;
}

}  // namespace

TEST_CASE("evaluate_run: a run trained on copy 4 evaluates on copy 8 in segments of the trained length") {
  OneThread one_thread;
  const std::string root = fresh_tmp("rmt_test_evaluate", "length");
  generate("copy", 4, 160, 16, root + "/copy4");   // 12 input positions: 3 x 4
  generate("copy", 8, 8, 24, root + "/copy8");     // 24 input positions
  generate("reverse", 8, 8, 8, root + "/reverse8");
  for (const char* kind : {"baseline", "mt", "xl", "rmt", "xl_rmt"}) {
    CAPTURE(kind);
    const std::string run = tiny_run(root, kind, root + "/copy4", 3);
    EvalRunRequest req;
    req.run_dir = run;
    req.threads = 1;
    // On its own data: rmt train's final test metrics (the same checkpoint, batch and threads).
    EvalRunResult own = evaluate_run(req);
    const nlohmann::json results = nlohmann::json::parse(read_file(run + "/results.json"));
    CHECK(own.result.loss == results["loss"].get<double>());
    CHECK(own.result.acc_teacher_forced == results["acc_teacher_forced"].get<double>());
    CHECK(own.seg_len == std::vector<int>{4, 4, 4});
    CHECK(own.seq_len == 12);
    // On longer data: as many segments as keep the trained length.
    req.data_dir = root + "/copy8";
    EvalRunResult longer = evaluate_run(req);
    CHECK(longer.seg_len == std::vector<int>(6, 4));
    CHECK(longer.seq_len == 24);
    CHECK(longer.data_dir == root + "/copy8");
    CHECK(longer.result.samples == 24);
    CHECK(std::isfinite(longer.result.loss));
    for (double acc : {longer.result.acc_teacher_forced, longer.result.acc_free_running.value_or(-1)}) {
      CHECK(acc >= 0);
      CHECK(acc <= 1);
    }
    const nlohmann::json j = nlohmann::json::parse(eval_run_json(longer));
    CHECK(j["segment_lengths"] == nlohmann::json::array({4, 4, 4, 4, 4, 4}));
    CHECK(j["seq_len"] == 24);
    CHECK(j["data"] == root + "/copy8");
    // `rmt eval --data` prints the same object; --predictions lists every sample, as many right as
    // exact_match says.
    Run cli = rmt_run("eval --threads 1 --run " + run + " --data " + root + "/copy8 --predictions " + root + "/p.jsonl",
                      true);
    REQUIRE_MESSAGE(cli.status == 0, cli.output);
    CHECK(nlohmann::json::parse(cli.output) == j);
    std::istringstream lines(read_file(root + "/p.jsonl"));
    int listed = 0, right = 0;
    for (std::string line; std::getline(lines, line); ++listed) {
      const nlohmann::json p = nlohmann::json::parse(line);
      CHECK(p["sample"] == listed);
      CHECK(p["input"].get<std::string>().size() == 8);    // the 8 symbols of X
      CHECK(p["target"].get<std::string>().size() == 16);  // X twice
      CHECK(p["correct"] == (p["target"] == p["prediction"]));
      right += p["correct"].get<bool>();
    }
    CHECK(listed == 24);
    CHECK(double(right) / listed == j["exact_match"].get<double>());
    // --segments as given, on the other data
    req.segments = 4;
    CHECK(evaluate_run(req).seg_len == std::vector<int>(4, 6));
    req.segments = 0;
    // Another task is refused, naming both datasets.
    req.data_dir = root + "/reverse8";
    const std::string wrong = error_of([&] { evaluate_run(req); });
    CHECK(wrong.find("dataset " + root + "/reverse8 is task reverse, but run " + run +
                     " was trained on copy (dataset " + root + "/copy4)") != std::string::npos);
  }
  // Uneven trained segments (3,3,2,2,2): the longest one sets the length on the other data.
  EvalRunRequest req;
  req.run_dir = tiny_run(root, "rmt", root + "/copy4", 5);  // 12 = 3,3,2,2,2
  req.data_dir = root + "/copy8";
  req.threads = 1;
  EvalRunResult r = evaluate_run(req);
  CHECK(r.seg_len == std::vector<int>(8, 3));
  // The run's own dataset is gone: nothing to compare the task with.
  std::filesystem::rename(root + "/copy4", root + "/moved");
  CHECK(error_of([&] { evaluate_run(req); }).find("the dataset of run " + req.run_dir) != std::string::npos);
  std::filesystem::remove_all(root);
}

TEST_CASE("a split read a batch at a time: load_sample_split's rows, the same evaluation, ids checked as read") {
  OneThread one_thread;
  const std::string root = fresh_tmp("rmt_test_evaluate", "reader");
  const std::string dir = root + "/copy4";
  generate("copy", 4, 16, 37, dir);
  const DatasetMeta meta = load_dataset_meta(dir);
  const SampleSplit whole = load_sample_split(dir, meta, "test");
  SampleSplitReader reader(dir, meta, "test");
  REQUIRE(reader.n() == 37);
  REQUIRE(reader.seq_len() == whole.seq_len);
  const int64_t T = whole.seq_len;
  std::vector<int32_t> in, tg;
  for (auto [start, count] : {std::pair{0, 37}, std::pair{5, 8}, std::pair{36, 1}, std::pair{3, 0}}) {
    CAPTURE(start);
    reader.read(start, count, in, tg);
    CHECK(in == std::vector<int32_t>(whole.input.begin() + start * T, whole.input.begin() + (start + count) * T));
    CHECK(tg == std::vector<int32_t>(whole.target.begin() + start * T, whole.target.begin() + (start + count) * T));
  }
  CHECK(error_of([&] { reader.read(30, 8, in, tg); }).find("rows 30 to 37 of a split of 37") != std::string::npos);

  // Evaluation from the reader gives the numbers of evaluation from the split in memory (batch 8
  // does not divide 37; a sample limit inside a batch).
  ModelConfig c;
  c.kind = "rmt";
  c.n_token = int(meta.vocab.size()), c.n_layer = 1, c.n_head = 2, c.d_head = 4, c.d_model = 8, c.d_inner = 16;
  c.dropout = 0, c.num_mem_tokens = 2, c.mem_init = "normal";
  Model model(c);
  model.init_weights(3);
  Engine engine(model, cpu_backend());
  auto read = [&](int64_t start, int B, std::vector<int32_t>& input, std::vector<int32_t>& target) {
    reader.read(start, B, input, target);
  };
  for (int64_t samples : {0, 21}) {
    CAPTURE(samples);
    EvalOptions opt;
    opt.seg_len = {int(T) / 3, int(T) / 3, int(T) - 2 * (int(T) / 3)};
    opt.answer_size = meta.answer_size, opt.batch_size = 8, opt.max_samples = samples;
    const EvalResult a = evaluate(engine, whole, opt);
    const EvalResult b = evaluate(engine, reader.n(), reader.seq_len(), read, opt);
    CHECK(a.samples == (samples ? 21 : 37));
    CHECK(b.samples == a.samples);
    CHECK(b.loss == a.loss);
    CHECK(b.acc_teacher_forced == a.acc_teacher_forced);
    CHECK(b.acc_free_running == a.acc_free_running);
  }

  // An id outside the vocabulary in row 20 is found when that row is read, naming file and row;
  // a file cut short after the reader opened it says so.
  const std::string x_path = dir + "/copy_test_X.npy";
  std::string bytes = read_file(x_path);
  const uint64_t offset = read_npy_header(x_path).data_offset;
  const int64_t bad = 99;
  std::memcpy(bytes.data() + offset + (20 * meta.len_x + 1) * 8, &bad, 8);
  write_file_atomic(x_path, bytes);
  SampleSplitReader damaged(dir, meta, "test");
  damaged.read(0, 20, in, tg);  // rows before it are fine
  CHECK(error_of([&] { damaged.read(16, 8, in, tg); }) ==
        fmt::format("{}: id 99 at row 20 is outside the vocabulary [0, {}) of task copy", x_path, meta.vocab.size()));
  SampleSplitReader cut(dir, meta, "test");
  std::filesystem::resize_file(x_path, offset + 30 * meta.len_x * 8);
  CHECK(error_of([&] { cut.read(24, 8, in, tg); }).find(x_path + ": the file changed while it was read") !=
        std::string::npos);
  std::filesystem::remove_all(root);
}

TEST_CASE("rmt eval --schedule diagonal: an armt run's results bit for bit, other kinds refused") {
  OneThread one_thread;
  const std::string root = fresh_tmp("rmt_test_evaluate", "diagonal");
  generate("copy", 4, 160, 16, root + "/copy4");  // 12 input positions: 3 x 4
  generate("copy", 8, 8, 24, root + "/copy8");    // 24: 6 segments of 4, more than the 3 layers
  const std::string armt = tiny_run(root, "armt", root + "/copy4", 3, 3);
  for (const char* threads : {"1", "2"}) {
    CAPTURE(threads);
    const std::string eval = fmt::format("eval --threads {} --run {} --data {}/copy8", threads, armt, root);
    const Run sequential = rmt_run(eval, true);
    REQUIRE_MESSAGE(sequential.status == 0, sequential.output);
    const Run diagonal = rmt_run(eval + " --schedule diagonal", true);
    REQUIRE_MESSAGE(diagonal.status == 0, diagonal.output);
    CHECK(diagonal.output == sequential.output);  // every double printed to its last bit
  }
  const std::string rmt = tiny_run(root, "rmt", root + "/copy4", 3);
  const Run refused = rmt_run("eval --threads 1 --run " + rmt + " --schedule diagonal");
  CHECK(refused.status == 1);
  CHECK(refused.output.find("--schedule diagonal is for model.kind armt only, and run " + rmt + " is rmt") !=
        std::string::npos);
  const Run misspelt = rmt_run("eval --run " + rmt + " --schedule diagonals");
  CHECK(misspelt.status == 1);
  CHECK(misspelt.output.find("did you mean 'diagonal'?") != std::string::npos);
}

TEST_CASE("samples whose outputs are not finite: scored as wrong answers and counted, or the evaluation fails naming how many") {
  // Token X's embedding overflows once scaled by sqrt(d) (inf at the input, so NaN after the
  // first layer) while its logit stays finite and never the largest (the last LayerNorm's output
  // is 0 where X's tied output row is not): the samples that read X have outputs that are not
  // finite, the others are evaluated as usual (rows of a batch do not mix).
  OneThread one_thread;
  const std::vector<int> seg_len{4, 4, 4};
  const int n = 24, TT = 12, AA = 3, VV = 7, X = VV - 1;
  SplitMixRng rng(11);
  SampleSplit all, finite;  // every sample; those without X
  all.seq_len = finite.seq_len = TT;
  int64_t with_x = 0;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> in(TT), tg(TT);
    const bool reads_x = i % 3 == 0;
    for (int t = 0; t < TT; ++t) in[size_t(t)] = int32_t(rng.below(VV - 1)), tg[size_t(t)] = int32_t(rng.below(VV - 1));
    if (reads_x) in[TT - AA - 1] = X, ++with_x;  // in the answer's segment: every kind reads it
    for (SampleSplit* s : {&all, reads_x ? nullptr : &finite}) {
      if (!s) continue;
      s->input.insert(s->input.end(), in.begin(), in.end());
      s->target.insert(s->target.end(), tg.begin(), tg.end());
      ++s->n;
    }
  }
  for (const char* kind : {"baseline", "rmt", "armt"}) {
    CAPTURE(kind);
    ModelConfig c;
    c.kind = kind;
    c.n_token = VV, c.n_layer = 2, c.n_head = 2, c.d_head = 8, c.d_model = 64, c.d_inner = 32;
    c.dropout = 0;
    c.mem_init = "normal";
    c.num_mem_tokens = std::string(kind) == "baseline" ? 0 : 2;
    c.d_mem = 2;
    Model model(c);
    model.init_weights(4);
    std::fill_n(model.W.emb + int64_t(X) * c.d_model, c.d_model, 0.f);
    model.W.emb[int64_t(X) * c.d_model] = 5e37f;  // x 8 at the input: inf
    model.W.layers.back().ln2_w[0] = model.W.layers.back().ln2_b[0] = 0.f;
    model.W.out_bias[X] = -100.f;
    Engine engine(model, cpu_backend());
    EvalOptions opt;
    opt.seg_len = seg_len, opt.answer_size = AA, opt.batch_size = 5;
    // Without count_non_finite: an error naming how many, and the first.
    try {
      evaluate(engine, all, opt);
      FAIL("evaluated outputs that are not finite");
    } catch (const Error& e) {
      CHECK(std::string(e.what()).find(fmt::format("{} of {} samples (the first: sample 0) have answer outputs that "
                                                   "are not finite numbers", with_x, n)) != std::string::npos);
    }
    opt.count_non_finite = true;
    const EvalResult counted = evaluate(engine, all, opt);
    const EvalResult reference = evaluate(engine, finite, opt);
    CHECK(counted.non_finite_samples == with_x);
    CHECK(reference.non_finite_samples == 0);
    CHECK(!std::isfinite(counted.loss));
    CHECK(std::isfinite(reference.loss));
    // The samples without X score as they do alone; the others are wrong at every position.
    CHECK(std::llround(counted.acc_teacher_forced * n * AA) == std::llround(reference.acc_teacher_forced * finite.n * AA));
    CHECK(std::llround(*counted.acc_free_running * n * AA) == std::llround(*reference.acc_free_running * finite.n * AA));
    CHECK(std::llround(*counted.exact_match * n) == std::llround(*reference.exact_match * finite.n));
    // What --predictions lists: -1 (no prediction) at every answer position of a sample with X.
    int64_t no_prediction = 0;
    opt.on_predictions = [&](int64_t start, int B, const int32_t*, const int32_t*, const int32_t* pred) {
      for (int b = 0; b < B; ++b)
        for (int p = TT - AA; p < TT; ++p) no_prediction += pred[int64_t(b) * TT + p] < 0 && (start + b) % 3 == 0;
    };
    evaluate(engine, all, opt);
    CHECK(no_prediction == with_x * AA);
  }
}

TEST_CASE("results JSON: a loss made not finite by counted samples is null beside their number; any other is refused") {
  EvalResult r;
  r.samples = 10, r.acc_teacher_forced = 0.5, r.acc_free_running = 0.5, r.exact_match = 0.5;
  r.exact_match_teacher_forced = 0.5;
  r.loss = std::nan("");
  r.non_finite_samples = 3;
  const nlohmann::json j = nlohmann::json::parse(samples_family().result_json(r, {4, 4}));
  CHECK(j.at("loss").is_null());
  CHECK(j.at("non_finite_samples") == 3);
  CHECK(j.at("acc_teacher_forced") == 0.5);
  r.non_finite_samples = 0;
  CHECK_THROWS_WITH_AS(samples_family().result_json(r, {4, 4}), doctest::Contains("a non-finite evaluation metric"), Error);
  r.loss = 1.5;  // all finite: the count is there, 0 (issue 58: it was left out, as if not counted)
  CHECK(nlohmann::json::parse(samples_family().result_json(r, {4, 4})).at("non_finite_samples") == 0);
}
