// `rmt attn` on tiny trained runs (rmt and xl): the dumped maps are probability rows over the
// keys the mask of docs/paper.md §2 leaves open, every row of every layer (the last layer's
// included), the blocks match the config, and the picture is written.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "lib/files/io.h"
#include "tests/cli.h"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// copy L 5 with 4 symbols: 15 input positions in 3 segments of 5. Dropout 0.1, so a map that
// were computed in training mode would differ from run to run.
struct AttnRuns {
  std::string root, data;
  AttnRuns() {
    root = fresh_tmp("rmt_test_attn", "root");
    fs::create_directories(root);
    data = root + "/data";
    Run g = rmt_run("generate copy --length 5 --symbols 4 --train 200 --val 20 --test 20 --out " + data);
    REQUIRE_MESSAGE(g.status == 0, g.output);
    train("rmt", "{kind: rmt, n_layer: 2, n_head: 2, d_head: 4, d_model: 8, d_inner: 16, dropout: 0.1, "
                 "num_mem_tokens: 2}");
    train("xl", "{kind: xl, n_layer: 2, n_head: 2, d_head: 4, d_model: 8, d_inner: 16, dropout: 0.1, "
                "mem_len: 3}");
  }
  void train(const std::string& name, const std::string& model) const {
    const std::string config = root + "/" + name + ".yaml";
    std::ofstream(config) << "data: " << data << "\nsegments: 3\nmodel: " << model << "\n"
                          << "train: {batch_size: 8, lr: 1.0e-3, max_steps: 12, eval_every: 6, "
                             "log_every: 6, seed: 3, threads: 1}\n";
    Run r = rmt_run("train --config " + config + " --out " + run(name));
    REQUIRE_MESSAGE(r.status == 0, r.output);
  }
  std::string run(const std::string& name) const { return root + "/" + name; }
};

const AttnRuns& runs() {
  static AttnRuns r;
  return r;
}

json dump(const std::string& args) {
  Run r = rmt_run("attn " + args + " --dump -", true);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  return json::parse(r.output);
}

// The mask of docs/paper.md §2 from the blocks alone (read_mem_from_cache true, the default):
// whether query row i may see key column j.
bool open_key(const json& seg, int i, int j) {
  auto block_of = [](const json& blocks, int k) {
    for (const json& b : blocks)
      if (k >= b["begin"].get<int>() && k < b["end"].get<int>()) return b;
    FAIL("position " << k << " is in no block");
    return json();
  };
  const json qb = block_of(seg["query_blocks"], i), kb = block_of(seg["key_blocks"], j);
  const std::string q = qb["name"], k = kb["name"];
  if (k == "cache") return true;  // every row sees the cache
  if (q == "read memory") return k == "read memory";
  if (q == "tokens") {  // causal: the read block, earlier tokens and itself, never the write block
    if (k == "read memory") return true;
    if (k == "write memory") return false;
    return j - kb["begin"].get<int>() <= i - qb["begin"].get<int>();
  }
  return true;  // write rows: everything, their own block included
}

// The checks every dumped segment must pass.
void check_maps(const json& d) {
  for (const json& seg : d["segments"]) {
    const int q = seg["queries"], klen = seg["keys"];
    CAPTURE(seg["segment"].get<int>());
    REQUIRE(seg["mask"].size() == size_t(q));
    REQUIRE(seg["query_labels"].size() == size_t(q));
    REQUIRE(seg["key_labels"].size() == size_t(klen));
    for (int i = 0; i < q; ++i)
      for (int j = 0; j < klen; ++j) {
        CAPTURE(i);
        CAPTURE(j);
        CHECK(seg["mask"][size_t(i)][size_t(j)].get<int>() == (open_key(seg, i, j) ? 0 : 1));
      }
    for (const json& m : seg["maps"]) {
      CAPTURE(m["layer"].get<int>());
      CAPTURE(m["head"].get<int>());
      REQUIRE(m["prob"].size() == size_t(q));
      for (int i = 0; i < q; ++i) {
        double sum = 0;
        for (int j = 0; j < klen; ++j) {
          const double p = m["prob"][size_t(i)][size_t(j)];
          if (seg["mask"][size_t(i)][size_t(j)].get<int>()) {
            CHECK(p == 0.0);  // exactly: a masked key gets no weight at all
          } else {
            CHECK(p >= 0.0);
            sum += p;
          }
        }
        CAPTURE(i);
        CHECK(std::abs(sum - 1.0) < 1e-5);  // every row, the last layer's included
      }
    }
  }
}

json block(const std::string& name, int begin, int end) {
  return json{{"name", name}, {"begin", begin}, {"end", end}};
}

void check_picture(const std::string& run, const std::string& name, const std::string& block_name) {
  const std::string png = run + "/pics/" + name + ".png", svg = run + "/pics/" + name + ".svg";
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    // Without gnuplot the message says what to install, and --dump still writes the numbers.
    Run r = rmt_run("attn --run " + run + " --out " + png + " --dump " + run + "/pics/nogp.json");
    CHECK(r.status == 1);
    CHECK(r.output.find("apt-get install gnuplot-nox") != std::string::npos);
    CHECK(fs::exists(run + "/pics/nogp.json"));
    return;
  }
  Run r = rmt_run("attn --run " + run + " --out " + png);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::string bytes = rmt::read_file(png);
  CHECK(bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  CHECK(bytes.size() > 20000);  // 12 panels of heat maps with their labels, not an empty canvas
  r = rmt_run("attn --run " + run + " --layer 1 --head 0 --out " + svg);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  const std::string text = rmt::read_file(svg);
  CHECK(text.find("<svg") != std::string::npos);
  CHECK(text.find("layer 1, head 0, segment 2") != std::string::npos);
  CHECK(text.find("layer 0,") == std::string::npos);  // only the layer asked for
  CHECK(text.find(block_name) != std::string::npos);
  // Crisp when scaled: every cell a rectangle of its own, no embedded bitmap to be smoothed.
  CHECK(text.find("<image") == std::string::npos);
  // For a paper: a PDF (gnuplot's pdfcairo) of one panel.
  const std::string pdf = run + "/pics/" + name + ".pdf";
  r = rmt_run("attn --run " + run + " --layer 1 --head 0 --segment 0 --out " + pdf);
  REQUIRE_MESSAGE(r.status == 0, r.output);
  CHECK(rmt::read_file(pdf).compare(0, 5, "%PDF-") == 0);
  // Written atomically: nothing but the three pictures is left in the directory.
  int files = 0;
  for (const auto& e : fs::directory_iterator(run + "/pics")) files += e.is_regular_file();
  CHECK(files == 3);
}

}  // namespace

TEST_CASE("attn: rmt maps are probability rows under the paper's mask, blocks as configured") {
  const AttnRuns& t = runs();
  const json d = dump("--run " + t.run("rmt"));
  CHECK(d["kind"] == "rmt");
  CHECK(d["layers"] == 2);
  CHECK(d["heads"] == 2);
  CHECK(d["segment_lengths"] == json::array({5, 5, 5}));
  CHECK(d["split"] == "test");
  CHECK(d["sample"] == 0);
  REQUIRE(d["segments"].size() == 3);
  for (const json& seg : d["segments"]) {
    CHECK(seg["maps"].size() == 4);  // 2 layers x 2 heads
    CHECK(seg["queries"] == 9);      // read 2, tokens 5, write 2
    CHECK(seg["keys"] == 9);         // no cache
    CHECK(seg["query_blocks"] == json::array({block("read memory", 0, 2), block("tokens", 2, 7),
                                              block("write memory", 7, 9)}));
    CHECK(seg["key_blocks"] == seg["query_blocks"]);
    CHECK(seg["query_labels"][0] == "r0");
    CHECK(seg["query_labels"][8] == "w1");
  }
  // Tick labels: the input symbols, as the vocabulary names them (copy: <go> starts the answer).
  std::vector<std::string> tokens;
  for (const json& seg : d["segments"])
    for (int i = 2; i < 7; ++i) tokens.push_back(seg["query_labels"][size_t(i)]);
  CHECK(tokens[5] == "<go>");
  for (int i = 0; i < 5; ++i) CHECK(tokens[size_t(6 + i)] == tokens[size_t(i)]);  // the copy
  check_maps(d);

  // Evaluation mode: the same maps every time (dropout 0.1 would change them), and one selected
  // map is the same as in the full dump.
  CHECK(dump("--run " + t.run("rmt")) == d);
  const json one = dump("--run " + t.run("rmt") + " --segment 2 --layer 1 --head 0 --sample 0");
  REQUIRE(one["segments"].size() == 1);
  REQUIRE(one["segments"][0]["maps"].size() == 1);
  CHECK(one["segments"][0]["segment"] == 2);
  CHECK(one["segments"][0]["maps"][0]["prob"] == d["segments"][2]["maps"][2]["prob"]);
  // Another sample, another map.
  CHECK(dump("--run " + t.run("rmt") + " --sample 3")["segments"] != d["segments"]);
  check_picture(t.run("rmt"), "rmt", "write memory");
}

TEST_CASE("attn: xl maps attend over the cache of the previous segment") {
  const AttnRuns& t = runs();
  const json d = dump("--run " + t.run("xl") + " --checkpoint last --split val --sample 1");
  CHECK(d["kind"] == "xl");
  CHECK(d["mem_len"] == 3);
  CHECK(d["split"] == "val");
  REQUIRE(d["segments"].size() == 3);
  // Segment 0 has no cache; later ones see the last 3 rows of the previous segment.
  CHECK(d["segments"][0]["key_blocks"] == json::array({block("tokens", 0, 5)}));
  for (int s = 1; s < 3; ++s) {
    const json& seg = d["segments"][size_t(s)];
    CHECK(seg["queries"] == 5);
    CHECK(seg["keys"] == 8);
    CHECK(seg["query_blocks"] == json::array({block("tokens", 0, 5)}));
    CHECK(seg["key_blocks"] == json::array({block("cache", 0, 3), block("tokens", 3, 8)}));
    const json& prev = d["segments"][size_t(s) - 1]["query_labels"];
    for (int j = 0; j < 3; ++j) CHECK(seg["key_labels"][size_t(j)] == prev[size_t(2 + j)]);
  }
  check_maps(d);
  check_picture(t.run("xl"), "xl", "cache");
}
