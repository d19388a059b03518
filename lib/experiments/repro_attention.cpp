// The attention items of `rmt reproduce` (docs/paper.md §4, Figures 6 and 8): attention maps of
// chosen runs of a sweep item on one test sample, and how RMT's write memory takes its tokens.
#include <fmt/format.h>

#include "lib/core/error.h"
#include "lib/experiments/attention_map.h"
#include "lib/experiments/repro_figures.h"
#include "lib/experiments/repro_items.h"
#include "lib/files/io.h"
#include "lib/run/evaluate.h"
#include "lib/run/eval_run.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

class AttentionHandler : public FromItemHandler {
 public:
  AttentionHandler(const ReproItem& item, ReproContext& context)
      : FromItemHandler(item, context, "drawing attention maps", "maps.md"), part_(std::get<AttentionItem>(item.part)) {}

 private:
  const AttentionItem& part_;
  void compute() const override;
};

// maps.md: each picked run's maps (one PNG) and the write order measured on them.
void AttentionHandler::compute() const {
  const ReproItem& from = *ctx_.manifest.find(item_.from);
  const fs::path dir = ctx_.out_dir(item_);
  create_directories_or_fail(dir);
  std::string md;
  for (size_t i = 0; i < part_.runs.size(); ++i) {
    const RunPick& p = part_.runs[i];
    const SweepRun* run = ctx_.pick_run(from, p, fmt::format("items.{}.runs[{}]", item_.name, i));
    if (run_state(*run) != RunState::done) {
      md += fmt::format("- {} at {} segments (seed {}): not trained yet (`{}`)\n", p.model, p.segments,
                        p.seed, ctx_.command_of(from));
      continue;
    }
    TrainedRun trained = load_trained_run(run->dir.string(), "best");
    SampleSplit split = load_sample_split(trained.run.config.data, trained.run.meta, "test");
    if (p.sample >= split.n) fail("{}: sample {} is beyond the test split ({} samples)", item_.name, p.sample, split.n);
    AttentionMaps maps = compute_attention_maps(*trained.model, trained.run.meta.vocab,
                                                split.input.data() + int64_t(p.sample) * split.seq_len,
                                                split.seq_len, trained.run.seg_len);
    AttentionSelection sel;
    const int nseg = int(maps.segments.size());
    if (p.segment >= nseg) fail("{}: segment {} is beyond the run's {} segments", item_.name, p.segment, nseg);
    if (p.segment >= 0) sel.segments = {p.segment};
    else for (int s = 0; s < nseg; ++s) sel.segments.push_back(s);
    for (int l = 0; l < maps.layers; ++l) sel.layers.push_back(l);
    for (int h = 0; h < maps.heads; ++h) sel.heads.push_back(h);
    const std::string stem = fmt::format("{}_{}seg_seed{}", p.model, p.segments, p.seed);
    const fs::path png = dir / (stem + ".png");
    std::string title = fmt::format("{} - {}, {} segments, test sample {}", item_.title, p.model, p.segments, p.sample);
    write_file_atomic(png, run_gnuplot(attention_gnuplot_script(maps, sel, "png", title)));
    md += fmt::format("**{} at {} segments** (run {}, test sample {}):\n\n![{}]({}/{})\n\n", p.model, p.segments,
                      run->run_id, p.sample, stem, item_.name, png.filename().string());
    std::string order = write_order_text(maps, 0);
    if (!order.empty()) md += "Measured on this sample, " + order + ".\n\n";
  }
  write_file_atomic(dir / "maps.md", md);
}

}  // namespace

std::unique_ptr<ItemHandler> make_attention_handler(const ReproItem& item, ReproContext& context) {
  return std::make_unique<AttentionHandler>(item, context);
}

}  // namespace rmt
