#pragma once
// The numbers in an item's reading (its `notes` in the manifest), computed from the item's data
// rather than typed: a reading holds placeholders `{{NAME key=value ...}}` that the report fills
// in from the item's results.csv (one row per run, or per run and evaluated length) and its
// runs' learning curves. A number typed into a reading can drift from the data when the runs are
// trained again; a placeholder cannot.
//
// The placeholders (model = a model kind; segments = the run's number of segments, or the
// evaluated one in a length item; for test values and outcomes both may be lists, "2,4,6"; seed
// optional unless said: without it, every seed in order):
//   test model= segments= [seed=] [metric=] [digits=]   the test values, seed by seed: "0.79 / 0.48 / 0.67"
//   test_mean  model= segments= [metric=] [digits=]     their mean
//   test_range model= [segments=] [metric=] [digits=]   their range: "0.992-1.000"
//   solved     [model=] [segments=]                     runs that met the stopping rule: "2 of 3"
//   ended      reason= [model=] [segments=]             runs that ended so (max_steps, unmastered, solved): "1 of 3"
//   solved_steps [model=] [segments=]                   the steps the solved runs met it at: "2500 / 3000"
//   median_solved_step [model=] [segments=]             their median
//   val_range  model= segments= [seed=] [from=] [to=] [stage=] [digits=]
//              validation accuracy over the evaluations from step `from` to `to` (default: all)
//              measured at `stage` segments (default: the run's own, its last curriculum stage)
//   val_at     model= segments= seed= step= [stage=] [digits=]  the one evaluation at that step
//   val_slope  model= segments= seed= last= [stage=]    the least-squares slope of validation
//              accuracy over the run's last `last` evaluations (at `stage`), per 10000 steps: "-0.052"
// digits: decimals (default 2). A placeholder that is unknown, has a key it does not take, lacks
// one it needs, names what the item does not have (an end reason that does not exist, a model,
// segment count, seed or metric outside the item's runs: ReadingScope), or matches no data is an
// error naming the item: the report does not write a number it could not compute, and a typo
// would otherwise count nothing ("0 of 3").
#include <set>
#include <string>
#include <vector>

#include "lib/experiments/learning_curves.h"
#include "lib/experiments/results_table.h"

namespace rmt {

// What an item's placeholders are computed from.
struct ReadingData {
  const CsvTable* results = nullptr;  // model.kind, segments, train.seed, the metrics, status, ...
  std::string first_metric;           // test values' metric unless a placeholder names one
  std::vector<LearningCurve> curves;  // the runs' learning curves (none for a length item)
  // Some of the item's planned runs are not finished: a reading computed now would count the
  // finished ones as the whole ("1 of 1 solved"), so the report writes it once they all are.
  bool in_progress = false;
};

// What an item has for its placeholders to name: the models, segment counts and seeds of its
// planned runs (all of them, finished or not, so that an item in progress is no error) and the
// metrics of its results. An empty set is not checked.
struct ReadingScope {
  std::set<std::string> models, segments, seeds, metrics;
};

// Whether each model=, segments=, seed= and metric= of `text`'s placeholders names something of
// `scope`; fails naming `where`, the placeholder, the argument and what the item has.
void check_reading_scope(const std::string& text, const ReadingScope& scope, const std::string& where);

// `text` with every placeholder replaced by its value; `where` (items.NAME.notes) names the
// reading in errors.
std::string fill_reading(const std::string& text, const ReadingData& data, const std::string& where);
// Whether every placeholder of `text` is known and has the keys it needs (what the data alone
// can refuse is left to fill_reading): the manifest's check when it is read.
void check_reading(const std::string& text, const std::string& where);

}  // namespace rmt
