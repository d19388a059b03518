// `rmt data import` (tasks/import.h): a sorting task of one's own, from .npy arrays to a trained
// and evaluated run, read back by every reader of a dataset; int32 input, a vocabulary file, a
// start token outside the answer. The refusals are catalogue cases (tests/catalogue_import.cpp).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/files/io.h"
#include "tasks/check.h"
#include "tasks/dataset.h"
#include "tasks/family.h"
#include "tests/cli.h"
#include "tests/import_fixtures.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

TEST_CASE("rmt data import: a sorting task of one's own, checked, shown, trained in 2 segments and evaluated") {
  const fs::path root = fresh_dir("rmt_test_import", "sort");
  const SortSplits s = sort_task();
  fs::create_directories(root / "src");
  write_sort_task((root / "src").string(), s);
  const std::string data = (root / "d").string();

  Run imp = rmt_run("data import " + (root / "src").string() + " --out " + data);
  REQUIRE_MESSAGE(imp.status == 0, imp.output);
  CHECK(imp.output.find("imported task sort into " + data + ": train 120, val 16, test 16 samples; X [N, 6], y [N, 6]") !=
        std::string::npos);
  CHECK(imp.output.find("vocabulary: 10 ids, shown as \"0\"..\"9\"") != std::string::npos);
  CHECK(imp.output.find("model input: X then y (11 positions); scored: the last 6 ids of y (all of it)") !=
        std::string::npos);

  // meta.yaml states what rmt cannot derive; every reader sees it.
  const std::string meta_text = rmt::read_file(data + "/meta.yaml");
  for (const char* line : {"task: sort\n", "kind: imported\n", "file_prefix: sort\n", "options: {pad_id: -1}\n",
                           "len_x: 6\n", "len_y: 6\n", "input_length: 11\n", "answer_size: 6\n", "stacked: true\n",
                           "counts: {train: 120, val: 16, test: 16}\n", "  sort_test_y.npy: "})
    CHECK_MESSAGE(meta_text.find(line) != std::string::npos, line);
  CHECK(meta_text.find("seed:") == std::string::npos);  // nothing was drawn
  CHECK(meta_text.find("source:") != std::string::npos);
  const rmt::DatasetMeta m = rmt::load_dataset_meta(data);
  CHECK(m.kind == "imported");
  CHECK(m.task == "sort");
  CHECK(m.vocab.size() == 10);
  CHECK(m.vocab[7] == "7");
  CHECK(m.stacked);
  CHECK(m.answer_size == 6);
  CHECK(m.input_length == 11);
  CHECK(m.pad_id == -1);
  // The arrays written are the source's ids, int64, row for row.
  rmt::SampleSplit val = rmt::load_sample_split(data, m, "val");
  REQUIRE(val.n == 16);
  for (int i = 0; i < 6; i++) {
    CHECK(val.input[size_t(i)] == s.x[1][size_t(i)]);
    CHECK(val.target[size_t(5 + i)] == s.y[1][size_t(i)]);  // target = concat(X, y)[1:]: y from position 5
  }
  CHECK(rmt::dataset_fingerprint(data).size() == 64);

  Run check = rmt_run("data check " + data);
  CHECK_MESSAGE(check.status == 0, check.output);
  CHECK(check.output.find("sort train: OK 120 rows, X [120, 6] y [120, 6] int64, sha256 ok") != std::string::npos);
  Run show = rmt_run("data show " + data + " -n 2 --split test");
  REQUIRE_MESSAGE(show.status == 0, show.output);
  CHECK(show.output.find("sort test split: 16 samples, X [16, 6], y [16, 6]; answer = last 6 target ids of y") !=
        std::string::npos);
  std::string row0_x, row0_y;
  for (int i = 0; i < 6; i++) row0_x += std::to_string(s.x[2][size_t(i)]), row0_y += std::to_string(s.y[2][size_t(i)]);
  CHECK_MESSAGE(show.output.find("#0   X: " + row0_x + "   y: " + row0_y + "\n") != std::string::npos, show.output);

  // Train an RMT for a few steps in 2 segments, then evaluate it.
  const std::string config = (root / "rmt.yaml").string();
  rmt::write_file_atomic(config, "data: " + data + "\nsegments: 2\n"
                                 "model: {kind: rmt, n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16, "
                                 "num_mem_tokens: 2}\n"
                                 "train: {batch_size: 8, max_steps: 4, eval_every: 4, log_every: 2, threads: 1}\n");
  const std::string run = (root / "run").string();
  Run train = rmt_run("train --config " + config + " --out " + run);
  REQUIRE_MESSAGE(train.status == 0, train.output);
  const json results = json::parse(rmt::read_file(run + "/results.json"));
  CHECK(results["segments"] == 2);
  CHECK(results["steps"] == 4);
  CHECK(results["solve_rate"].is_null());  // no solve rate for a kind without one
  Run eval = rmt_run("eval --run " + run + " --split test");
  REQUIRE_MESSAGE(eval.status == 0, eval.output);
  const json ev = json::parse(eval.output);
  CHECK(ev["samples"] == 16);
  CHECK(ev["acc_teacher_forced"].is_number());

  // The same dataset again: refused without --force, written again with it.
  Run again = rmt_run("data import " + (root / "src").string() + " --out " + data);
  CHECK(again.status == 1);
  CHECK(again.output.find("already exists; pass --force to overwrite the dataset in " + data) != std::string::npos);
  CHECK(rmt_run("data import " + (root / "src").string() + " --out " + data + " --force").status == 0);
  fs::remove_all(root);
}

TEST_CASE("rmt data import: int32 arrays, a vocabulary file, a start token outside the answer, a padding id") {
  const fs::path root = fresh_dir("rmt_test_import", "int32");
  SortSplits s = sort_task(40, 8, 8);
  // y starts with a start token (id 10, "<go>"): y = <go> then the sorted digits.
  for (int k = 0; k < 3; k++) {
    std::vector<int64_t> with_go;
    for (int64_t r = 0; r < s.n[k]; r++) {
      with_go.push_back(10);
      with_go.insert(with_go.end(), s.y[k].begin() + r * 6, s.y[k].begin() + (r + 1) * 6);
    }
    s.y[k] = with_go;
  }
  fs::create_directories(root / "src");
  for (int k = 0; k < 3; k++)
    for (auto [which, ids, cols] : {std::tuple{"X", &s.x[k], 6}, std::tuple{"y", &s.y[k], 7}})
      rmt::write_file_atomic(root / "src" / fmt::format("sort_{}_{}.npy", kSortSplitNames[k], which),
                             npy_bytes_int32({s.n[k], cols}, *ids));
  rmt::write_file_atomic(root / "symbols.txt", "zero\none\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\n<go>\n");
  const std::string data = (root / "d").string();
  Run imp = rmt_run("data import " + (root / "src").string() + " --out " + data + " --vocab " +
                    (root / "symbols.txt").string() + " --answer-size 6 --pad-id 0");
  REQUIRE_MESSAGE(imp.status == 0, imp.output);
  CHECK(imp.output.find("vocabulary: 11 ids from " + (root / "symbols.txt").string()) != std::string::npos);
  CHECK(imp.output.find("scored: the last 6 ids of y\n") != std::string::npos);
  CHECK(imp.output.find("padding id: 0 ('zero')") != std::string::npos);
  CHECK(imp.output.find("converted to int64: sort_train_X.npy int32 (<i4)") != std::string::npos);
  const rmt::DatasetMeta m = rmt::load_dataset_meta(data);
  CHECK(m.vocab.size() == 11);
  CHECK(m.vocab[10] == "<go>");
  CHECK(m.len_y == 7);
  CHECK(m.answer_size == 6);
  CHECK(m.input_length == 12);
  CHECK(m.pad_id == 0);
  // The files written are int64 (what every reader of rmt's layout takes).
  CHECK(rmt::read_npy_header(data + "/sort_train_X.npy").dtype == rmt::NpyDtype::int64);
  CHECK(rmt::check_dataset(data).ok);
  Run show = rmt_run("data show " + data + " -n 1");
  REQUIRE(show.status == 0);
  CHECK(show.output.find("   y: <go> | ") != std::string::npos);  // the start token before the answer
  fs::remove_all(root);
}

TEST_CASE("rmt data import --aligned: input X, target y of one width") {
  const fs::path root = fresh_dir("rmt_test_import", "aligned");
  const SortSplits s = sort_task(30, 5, 5);
  fs::create_directories(root / "src");
  write_sort_task((root / "src").string(), s);
  const std::string data = (root / "d").string();
  Run imp = rmt_run("data import " + (root / "src").string() + " --out " + data + " --aligned --answer-size 3");
  REQUIRE_MESSAGE(imp.status == 0, imp.output);
  const rmt::DatasetMeta m = rmt::load_dataset_meta(data);
  CHECK_FALSE(m.stacked);
  CHECK(m.input_length == 6);
  CHECK(m.answer_size == 3);
  const rmt::SampleSplit train = rmt::load_sample_split(data, m, "train");
  CHECK(train.seq_len == 6);
  CHECK(std::vector<int32_t>(train.target.begin(), train.target.begin() + 6) ==
        std::vector<int32_t>(s.y[0].begin(), s.y[0].begin() + 6));
  fs::remove_all(root);
}

TEST_CASE("rmt data import --aligned: unscored targets (-1, and -100 read as -1) score nothing") {
  const fs::path root = fresh_dir("rmt_test_import", "unscored");
  const SortSplits s = sort_task(60, 8, 8);
  // masked: y's first 3 columns unscored (-100 in train, as PyTorch's ignore_index; -1 in val and
  // test); plain: the same rows, --answer-size 3 scoring those same last 3 columns.
  SortSplits masked = s;
  int64_t marked = 0;
  for (int k = 0; k < 3; k++)
    for (int64_t r = 0; r < s.n[k]; r++)
      for (int c = 0; c < 3; c++, marked++) masked.y[k][size_t(r * 6 + c)] = k == 0 ? -100 : -1;
  fs::create_directories(root / "src_masked");
  fs::create_directories(root / "src_plain");
  write_sort_task((root / "src_masked").string(), masked);
  write_sort_task((root / "src_plain").string(), s);
  const std::string data = (root / "masked").string(), plain = (root / "plain").string();
  Run imp = rmt_run("data import " + (root / "src_masked").string() + " --out " + data + " --aligned");
  REQUIRE_MESSAGE(imp.status == 0, imp.output);
  CHECK(imp.output.find(fmt::format("unscored: {} positions of y are -1 or -100 (written as -1)", marked)) !=
        std::string::npos);
  REQUIRE(rmt_run("data import " + (root / "src_plain").string() + " --out " + plain + " --aligned --answer-size 3")
              .status == 0);
  CHECK(rmt::read_file(data + "/meta.yaml").find("\nunscored_targets: true\n") != std::string::npos);
  CHECK(rmt::read_file(plain + "/meta.yaml").find("unscored_targets") == std::string::npos);
  const rmt::DatasetMeta m = rmt::load_dataset_meta(data);
  CHECK(m.unscored_targets);
  CHECK(m.answer_size == 6);
  CHECK_FALSE(rmt::load_dataset_meta(plain).unscored_targets);
  const rmt::SampleSplit train = rmt::load_sample_split(data, m, "train");
  for (int c = 0; c < 6; c++) CHECK(train.target[size_t(c)] == (c < 3 ? -1 : s.y[0][size_t(c)]));
  CHECK(rmt::check_dataset(data).ok);
  Run show = rmt_run("data show " + data + " -n 1 --split test");
  REQUIRE_MESSAGE(show.status == 0, show.output);
  CHECK_MESSAGE(show.output.find(fmt::format("   y: · · · {} {} {}\n", s.y[2][3], s.y[2][4], s.y[2][5])) !=
                    std::string::npos, show.output);

  // Training and evaluation score the same positions as --answer-size 3: the same test metrics,
  // up to float rounding (the two take different paths through the engine: an answer of 6 positions,
  // 3 unscored, and one of 3); scoring the -1s, or dividing by all 6, would move the loss far more.
  const std::string model = "model: {kind: rmt, n_layer: 1, n_head: 1, d_head: 8, d_model: 8, d_inner: 16, "
                            "num_mem_tokens: 2}\ntrain: {batch_size: 8, max_steps: 6, eval_every: 6, log_every: 2, "
                            "threads: 1}\n";
  json ev[2];
  for (int i = 0; i < 2; i++) {
    const std::string config = (root / fmt::format("c{}.yaml", i)).string();
    rmt::write_file_atomic(config, "data: " + (i ? plain : data) + "\nsegments: 2\n" + model);
    const std::string run = (root / fmt::format("run{}", i)).string();
    Run train_run = rmt_run("train --config " + config + " --out " + run);
    REQUIRE_MESSAGE(train_run.status == 0, train_run.output);
    Run eval = rmt_run("eval --run " + run + " --split test");
    REQUIRE_MESSAGE(eval.status == 0, eval.output);
    ev[i] = json::parse(eval.output);
  }
  CHECK(ev[0]["loss"].get<double>() == doctest::Approx(ev[1]["loss"].get<double>()).epsilon(1e-5));
  CHECK(ev[0]["acc_teacher_forced"] == ev[1]["acc_teacher_forced"]);
  CHECK(ev[0]["samples"] == 8);
  // predictions list the scored positions, 3..5 of each row
  const std::string predictions = (root / "predictions.jsonl").string();
  Run pr = rmt_run("eval --run " + (root / "run0").string() + " --split test --predictions " + predictions);
  REQUIRE_MESSAGE(pr.status == 0, pr.output);
  const json first = json::parse(rmt::read_file(predictions).substr(0, rmt::read_file(predictions).find('\n')));
  CHECK(first["positions"] == json::array({3, 4, 5}));
  CHECK(first["target"] == fmt::format("{}{}{}", s.y[2][3], s.y[2][4], s.y[2][5]));
  fs::remove_all(root);
}

// `cd DIR && COMMAND`: its output (stdout and stderr) and status.
static Run run_in(const fs::path& dir, const std::string& command) {
  return shell_run("cd '" + dir.string() + "' && " + command + " 2>&1");
}

TEST_CASE("docs/datasets.md, \"Your own task\": the numpy example and the rmt commands give what the page shows") {
  const std::string page = rmt::read_file(fs::path(RMT_SOURCE_DIR) / "docs/datasets.md");
  const size_t section = page.find("## Your own task");
  REQUIRE(section != std::string::npos);
  const size_t py = page.find("```python\n", section);
  REQUIRE(py != std::string::npos);
  const size_t py_end = page.find("```\n", py + 10);
  const fs::path dir = fresh_dir("rmt_test_import", "docs");
  rmt::write_file_atomic(dir / "make_sort.py", page.substr(py + 10, py_end - py - 10));
  Run made = run_in(dir, "/usr/bin/python3 make_sort.py");
  REQUIRE_MESSAGE(made.status == 0, made.output);
  // The shell block after it: "$ rmt ..." lines, each followed by its output.
  const size_t shell = page.find("```\n$ rmt", py_end);
  REQUIRE(shell != std::string::npos);
  const std::string block = page.substr(shell + 4, page.find("```\n", shell + 4) - shell - 4);
  std::vector<std::pair<std::string, std::string>> commands;  // command -> the output shown
  size_t at = 0;
  while (at < block.size()) {
    const size_t eol = block.find('\n', at);
    const std::string line = block.substr(at, eol - at);
    if (line.rfind("$ rmt ", 0) == 0) commands.push_back({line.substr(2), ""});
    else if (!line.empty() && !commands.empty()) commands.back().second += line + "\n";
    at = eol + 1;
  }
  REQUIRE(commands.size() == 3);
  for (auto& [command, shown] : commands) {
    Run r = run_in(dir, std::string(RMT_BINARY) + command.substr(3));
    CAPTURE(command);
    CHECK(r.status == 0);
    CHECK(r.output == shown);
  }
  fs::remove_all(dir);
}
