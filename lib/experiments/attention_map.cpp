#include "lib/experiments/attention_map.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "lib/core/engine.h"
#include "lib/core/error.h"
#include "lib/experiments/process.h"
#include "lib/experiments/results_table.h"
#include "lib/files/io.h"
#include "lib/run/checkpoint.h"
#include "lib/run/run_directory.h"
#include "lib/run/run_family.h"

namespace rmt {

namespace fs = std::filesystem;
using json = nlohmann::json;

TrainedRun load_trained_run(const std::string& run_dir, const std::string& checkpoint,
                            const std::string& device) {
  // As `rmt eval` loads a run (apps/rmt/cmd_train.cpp): its config, then the checkpoint,
  // checked against it.
  const fs::path dir(run_dir);
  if (!fs::is_directory(dir)) fail("--run {}: no such directory", run_dir);
  const fs::path config_path = dir / "config.yaml";
  Config config = load_run_config(run_dir);
  family_of(config).check_command("rmt attn", run_dir, config);
  const bool config_sets_n_token = config.model.n_token != 0;
  TrainedRun t;
  t.run = prepare_run(config);
  std::string ck = checkpoint;
  if (ck == "best" || ck == "last") ck = (dir / (ck + ".safetensors")).string();
  if (!fs::exists(ck)) {
    if (checkpoint == "best" || checkpoint == "last")
      fail("checkpoint {} does not exist: the run has no checkpoint yet (rmt train writes one at "
           "each evaluation)", ck);
    fail("checkpoint {} does not exist", ck);
  }
  Backend& be = run_backend(device, t.run.config, run_dir);
  t.model = load_checkpoint(ck, [&](const ModelConfig& c) {
    check_checkpoint_fits_run(c, ck, t.run, config_sets_n_token, config_path.string());
  }, be);
  t.checkpoint_path = ck;
  return t;
}

const float* AttentionMaps::map(int s, int layer, int head) const {
  const SegmentAttention& a = segments[size_t(s)];
  return a.prob.data() + (int64_t(layer) * heads + head) * a.q * a.klen;
}

AttentionMaps compute_attention_maps(Model& model, const std::vector<std::string>& vocab,
                                     const int32_t* input, int T, const std::vector<int>& seg_len) {
  AttentionMaps maps;
  maps.kind = model.config.kind;
  maps.layers = model.L, maps.heads = model.H, maps.memory_tokens = model.num_mem;
  maps.mem_len = model.mem_len;
  maps.seg_len = seg_len;
  maps.input.assign(input, input + T);
  const int L = model.L, H = model.H;
  auto symbol = [&](int32_t id) {
    return id >= 0 && size_t(id) < vocab.size() ? vocab[size_t(id)] : fmt::format("<{}>", id);
  };

  Engine engine(model);
  RecurrentState state, next;
  engine.initial_state(state, 1);
  SegmentActivations a;
  std::vector<std::string> cache_labels;  // what each cached row was, in order
  int t0 = 0;
  for (size_t s = 0; s < seg_len.size(); ++s) {
    const int Ts = seg_len[s];
    // Evaluation mode (training = false): no dropout, and forward_segment runs every query row
    // of every layer, the last one included (its "live rows" are all rows outside training).
    engine.forward_segment(a, input + t0, nullptr, 1, Ts, state, next, false, 0, 0.f);
    const SegmentPlan& plan = a.plan;
    if (plan.live_begin != 0 || plan.live_end != plan.q)
      throw std::logic_error("attention maps: the last layer skipped rows in evaluation mode");
    if (int(cache_labels.size()) != plan.mlen)
      throw std::logic_error(fmt::format("attention maps: {} cache labels for {} cached rows",
                                         cache_labels.size(), plan.mlen));
    SegmentAttention sa;
    sa.segment = int(s);
    sa.first_position = t0;
    sa.q = plan.q, sa.klen = plan.klen;
    const int m = plan.m_read;  // read rows (armt has none: its memory rows are the write block)
    if (m > 0) sa.query_blocks.push_back({"read memory", 0, m});
    sa.query_blocks.push_back({"tokens", m, m + Ts});
    if (plan.m_write > 0) sa.query_blocks.push_back({"write memory", m + Ts, m + Ts + plan.m_write});
    if (plan.mlen > 0) sa.key_blocks.push_back({"cache", 0, plan.mlen});
    for (const AttentionBlock& b : sa.query_blocks)
      sa.key_blocks.push_back({b.name, b.begin + plan.mlen, b.end + plan.mlen});
    for (int i = 0; i < m; ++i) sa.query_labels.push_back(fmt::format("r{}", i));
    for (int t = 0; t < Ts; ++t) sa.query_labels.push_back(symbol(input[t0 + t]));
    for (int i = 0; i < plan.m_write; ++i) sa.query_labels.push_back(fmt::format("w{}", i));
    sa.key_labels = cache_labels;
    sa.key_labels.insert(sa.key_labels.end(), sa.query_labels.begin(), sa.query_labels.end());
    sa.mask = engine.segment_mask(a);
    // prob is [B, H, q, klen] per layer; B = 1.
    const int64_t per_layer = int64_t(H) * plan.q * plan.klen;
    sa.prob.resize(size_t(L * per_layer));
    for (int l = 0; l < L; ++l)
      a.layers[size_t(l)].attn.prob.read(0, sa.prob.data() + l * per_layer, per_layer);
    maps.segments.push_back(std::move(sa));
    // The next cache holds the last next.mlen rows of [cache; this segment] (engine.cpp).
    const std::vector<std::string>& keys = maps.segments.back().key_labels;
    cache_labels.assign(keys.end() - next.mlen, keys.end());
    std::swap(state, next);
    t0 += Ts;
  }
  return maps;
}

std::string attention_maps_json(const AttentionMaps& maps, const AttentionSelection& sel,
                                const std::string& about) {
  json j = about.empty() ? json::object() : json::parse(about);
  j["kind"] = maps.kind;
  j["layers"] = maps.layers;
  j["heads"] = maps.heads;
  j["memory_tokens"] = maps.memory_tokens;
  j["mem_len"] = maps.mem_len;
  j["segment_lengths"] = maps.seg_len;
  j["input"] = maps.input;
  auto blocks = [](const std::vector<AttentionBlock>& bs) {
    json out = json::array();
    for (const AttentionBlock& b : bs) out.push_back({{"name", b.name}, {"begin", b.begin}, {"end", b.end}});
    return out;
  };
  json segs = json::array();
  for (int s : sel.segments) {
    const SegmentAttention& a = maps.segments[size_t(s)];
    json js;
    js["segment"] = s;
    js["first_position"] = a.first_position;
    js["queries"] = a.q;
    js["keys"] = a.klen;
    js["query_blocks"] = blocks(a.query_blocks);
    js["key_blocks"] = blocks(a.key_blocks);
    js["query_labels"] = a.query_labels;
    js["key_labels"] = a.key_labels;
    json mask = json::array();
    for (int i = 0; i < a.q; ++i)
      mask.push_back(std::vector<int>(a.mask.begin() + int64_t(i) * a.klen,
                                      a.mask.begin() + int64_t(i + 1) * a.klen));
    js["mask"] = std::move(mask);
    json jm = json::array();
    for (int l : sel.layers)
      for (int h : sel.heads) {
        const float* p = maps.map(s, l, h);
        json rows = json::array();
        for (int i = 0; i < a.q; ++i)
          rows.push_back(std::vector<float>(p + int64_t(i) * a.klen, p + int64_t(i + 1) * a.klen));
        jm.push_back({{"layer", l}, {"head", h}, {"prob", std::move(rows)}});
      }
    js["maps"] = std::move(jm);
    segs.push_back(std::move(js));
  }
  j["segments"] = std::move(segs);
  return j.dump() + "\n";
}

namespace {


// Rough text width in pixels of the 8-point tick font (pngcairo, Sans).
int text_px(const std::string& s) { return int(s.size()) * 6 + 2; }

const char* short_name(const std::string& block) {
  if (block == "read memory") return "read";
  if (block == "write memory") return "write";
  return block == "cache" ? "cache" : "tokens";
}

// "set xtics (...)" body: every `step`-th label at its column.
std::string tic_list(const std::vector<std::string>& labels, int step) {
  std::string s;
  for (size_t i = 0; i < labels.size(); i += size_t(step))
    s += fmt::format("{}{} {}", s.empty() ? "" : ", ", gnuplot_string(labels[i]), i);
  return s;
}

}  // namespace

std::string attention_gnuplot_script(const AttentionMaps& maps, const AttentionSelection& sel,
                                     const std::string& format, const std::string& title) {
  if (format != "png" && format != "svg" && format != "pdf" && format != "eps")
    fail("unknown picture format '{}' (png, svg, pdf or eps)", format);
  // One cell size for every panel, so that positions line up across the grid.
  int max_q = 1, max_k = 1;
  size_t max_qlabel = 1, max_klabel = 1;
  for (int s : sel.segments) {
    const SegmentAttention& a = maps.segments[size_t(s)];
    max_q = std::max(max_q, a.q), max_k = std::max(max_k, a.klen);
    for (const auto& l : a.query_labels) max_qlabel = std::max(max_qlabel, l.size());
    for (const auto& l : a.key_labels) max_klabel = std::max(max_klabel, l.size());
  }
  const int cell = std::clamp(480 / std::max(max_q, max_k), 4, 22);
  const int step = std::max(1, (11 + cell - 1) / cell);  // tick labels 11 px apart at least
  const int left = 18 + int(max_qlabel) * 7, right = 16 + text_px("write memory"),
            top = 46, bottom = 16 + int(max_klabel) * 7;
  const int slot_w = left + cell * max_k + right, slot_h = top + cell * max_q + bottom;
  const int cols = int(sel.segments.size() * sel.heads.size()), rows = int(sel.layers.size());
  const int title_h = 62;
  // The legend in two lines: as one it made a single panel's picture twice the panel's width.
  const std::string legend[2] = {"rows: queries, columns: keys; darkness: attention probability (white 0, black 1)",
                                 "blue hatching: masked; red lines: block borders"};
  // Wide enough for the title and legend lines (about 7 px a character); the panels centred.
  const int W = std::max(cols * slot_w, 7 * int(std::max(title.size(), legend[0].size())) + 40),
            Hpx = title_h + rows * slot_h;
  const int grid_x = (W - cols * slot_w) / 2;
  if (W > 20000 || Hpx > 20000)
    fail("{} panels of {} x {} cells make a picture of {} x {} pixels; pick fewer with --layer, "
         "--head or --segment", rows * cols, max_q, max_k, W, Hpx);

  std::string g;
  if (format == "png")  // pngcairo where gnuplot has it, else libgd's png
    g += fmt::format(
        "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {{\n"
        "  set terminal pngcairo size {0},{1} noenhanced font 'Sans,9' background rgb 'white'\n"
        "}} else {{\n  set terminal png size {0},{1} noenhanced background rgb 'white'\n}}\n",
        W, Hpx);
  else
    g += gnuplot_terminal(format, W, Hpx, "noenhanced font 'Sans,9' background rgb 'white'");
  g += "set output\n";  // stdout: the caller writes the file atomically
  g += "set palette defined (0 'white', 1 'black')\nset cbrange [0:1]\nunset colorbox\nunset key\n";
  g += "set tics font ',8'\nset style line 1 lc rgb '#d62728' lw 1.5\n";
  g += "set multiplot\n";
  g += fmt::format("set label 1 {} at screen 0.5, screen {:.6f} center font ',11'\n", gnuplot_string(title),
                   1.0 - 16.0 / Hpx);
  for (int i = 0; i < 2; ++i)
    g += fmt::format("set label {} {} at screen 0.5, screen {:.6f} center\n", 2 + i, gnuplot_string(legend[i]),
                     1.0 - (34.0 + 15.0 * i) / Hpx);
  // Masked cells are not drawn (NaN): this hatching behind the map shows through, unlike any
  // grey level a probability can take.
  g += "set object 1 rectangle from graph 0,0 to graph 1,1 behind fillcolor rgb '#7f96bf' "
       "fillstyle pattern 5 noborder\n";
  // A vector picture draws each cell as a rectangle: an embedded bitmap is smoothed (blurred)
  // when the picture is scaled. A PNG is a bitmap anyway.
  const std::string image = format == "png" ? "with image" : "with image pixels";

  int panel = 0;
  for (size_t li = 0; li < sel.layers.size(); ++li) {
    const int l = sel.layers[li];
    int col = 0;
    for (int s : sel.segments) {
      const SegmentAttention& a = maps.segments[size_t(s)];
      for (int h : sel.heads) {
        const float* p = maps.map(s, l, h);
        const std::string name = fmt::format("$p{}", panel++);
        g += name + " << EOD\n";
        for (int i = 0; i < a.q; ++i) {
          for (int j = 0; j < a.klen; ++j) {
            if (j) g += ' ';
            if (a.mask[size_t(i) * a.klen + j]) g += "NaN";
            else g += fmt::format("{:.5g}", p[int64_t(i) * a.klen + j]);
          }
          g += '\n';
        }
        g += "EOD\n";
        // The panel's plot area in screen coordinates (y up), top-left in its slot.
        const double x0 = double(grid_x + col * slot_w + left), x1 = x0 + cell * a.klen;
        const double y_top = double(title_h + int(li) * slot_h + top), y_bot = y_top + cell * a.q;
        g += fmt::format("set lmargin at screen {:.6f}\nset rmargin at screen {:.6f}\n", x0 / W, x1 / W);
        g += fmt::format("set tmargin at screen {:.6f}\nset bmargin at screen {:.6f}\n",
                         1.0 - y_top / Hpx, 1.0 - y_bot / Hpx);
        g += fmt::format("set xrange [-0.5:{}]\nset x2range [-0.5:{}]\n", a.klen - 0.5, a.klen - 0.5);
        g += fmt::format("set yrange [{}:-0.5]\nset y2range [{}:-0.5]\n", a.q - 0.5, a.q - 0.5);
        g += "set xtics (" + tic_list(a.key_labels, step) + ") rotate by 90 right nomirror scale 0.4\n";
        g += "set ytics (" + tic_list(a.query_labels, step) + ") nomirror scale 0.4\n";
        // Block names: the keys' above (shortened where the block is too narrow), the queries'
        // on the right.
        std::string x2, y2;
        for (const AttentionBlock& b : a.key_blocks) {
          const int px = cell * (b.end - b.begin);
          std::string label = b.name;
          if (text_px(label) > px) label = short_name(b.name);
          if (text_px(label) > px) label = label.substr(0, 1);
          x2 += fmt::format("{}{} {}", x2.empty() ? "" : ", ", gnuplot_string(label), (b.begin + b.end - 1) / 2.0);
        }
        for (const AttentionBlock& b : a.query_blocks)
          y2 += fmt::format("{}{} {}", y2.empty() ? "" : ", ", gnuplot_string(b.name), (b.begin + b.end - 1) / 2.0);
        g += "set x2tics (" + x2 + ") scale 0 font ',9'\nset y2tics (" + y2 + ") scale 0 font ',9'\n";
        g += "unset arrow\n";
        for (size_t k = 1; k < a.key_blocks.size(); ++k)
          g += fmt::format("set arrow from {0}, graph 0 to {0}, graph 1 nohead front ls 1\n",
                           a.key_blocks[k].begin - 0.5);
        for (size_t k = 1; k < a.query_blocks.size(); ++k)
          g += fmt::format("set arrow from graph 0, first {0} to graph 1, first {0} nohead front ls 1\n",
                           a.query_blocks[k].begin - 0.5);
        g += fmt::format("set title {} offset 0,-0.3\n",
                         gnuplot_string(fmt::format("layer {}, head {}, segment {}", l, h, s)));
        g += "plot " + name + " matrix " + image + "\n";
        ++col;
      }
    }
  }
  g += "unset multiplot\n";
  return g;
}

std::string run_gnuplot(const std::string& script) {
  if (find_program("gnuplot").empty())
    fail("gnuplot is not installed; install it with `sudo apt-get install gnuplot-nox` (or `make "
         "deps`), or write the numbers with --dump FILE.json");
  // The script and gnuplot's messages go through temporary files; the image comes on stdout.
  const fs::path tmp = fs::temp_directory_path();
  std::string script_path = (tmp / "rmt_attn_XXXXXX.gp").string();
  int fd = mkstemps(script_path.data(), 3);
  if (fd < 0) fail("cannot create a temporary file in {}", tmp.string());
  ::close(fd);
  const std::string err_path = script_path + ".err";
  struct Cleanup {
    std::string a, b;
    ~Cleanup() {
      std::error_code ec;
      fs::remove(a, ec), fs::remove(b, ec);
    }
  } cleanup{script_path, err_path};
  write_file_atomic(script_path, script);
  const ToolResult r = run_tool("gnuplot", {script_path}, "", {}, 600, err_path);
  const std::string& image = r.output;
  const int status = r.status;
  if (status != 0 || image.empty()) {
    std::string err;
    try {
      err = read_file(err_path);
    } catch (const Error&) {
    }
    while (!err.empty() && (err.back() == '\n' || err.back() == ' ')) err.pop_back();
    for (char& ch : err)
      if (ch == '\n') ch = ' ';
    fail("gnuplot failed drawing the attention maps (exit status {}): {}", status, err.empty() ? "no message" : err);
  }
  return image;
}

}  // namespace rmt
