// Catalogue of bad inputs (tests/catalogue.h) for `rmt reproduce`: the manifest and the options.
// Nothing trains: every case fails while the manifest is read or the options are checked.
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/catalogue.h"

namespace {

// {dir}/m.yaml = a one-item manifest whose item is `item` (YAML lines, indented by 4), with a
// paper file and a sweep file beside it so that only the item is at fault.
void manifest(const std::string& dir, const std::string& item) {
  std::ofstream(dir + "/paper.yaml") << "x:\n  seq_len: 4\n  rows:\n    baseline: {1: 1.0}\n";
  std::ofstream(dir + "/s.yaml") << "data: {task: copy, length: 4, train: 20, val: 5, test: 5}\n"
                                    "base: {}\ngrid:\n  - {model.kind: [baseline], segments: [1]}\n";
  std::ofstream(dir + "/m.yaml") << "paper: paper.yaml\nitems:\n  a:\n" << item;
}

const std::string kLmItem = "    kind: lm\n    title: t\n    paper_says: p\n    sweep: s.yaml\n";

const std::string kSweepItem =
    "    kind: sweep\n    title: t\n    paper_says: p\n    sweep: s.yaml\n    metrics: [acc_teacher_forced]\n";

}  // namespace

RMT_CATALOGUE({
    // ---- taken on trust no more: bounds, item names, --list ----------------------------------
    {"reproduce", "claim with a NaN bound (it would hold on any value)",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: rmt, segments: [3], min: .nan}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0].min: expected a finite number (got .nan)"},
    {"reproduce", "claim with an infinite bound",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: rmt, segments: [3], max: .inf}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0].max: expected a finite number (got .inf)"},
    {"reproduce", "claim with min above max",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: rmt, segments: [3], min: 0.9, max: 0.2}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0]: min 0.9 is above max 0.2: no value can hold"},
    {"reproduce", "language-model claim with a NaN margin",
     [](const std::string& d) {
       manifest(d, kLmItem + "    claims: [{text: t, run: {model: rmt}, below: {model: baseline}, margin: .nan}]\n");
     },
     "reproduce --manifest {dir}/m.yaml --list", 1, "margin: expected a finite number (got .nan)"},
    {"reproduce", "item named as a path out of --out",
     [](const std::string& d) {
       manifest(d, kSweepItem);
       std::ofstream(d + "/m.yaml") << "paper: paper.yaml\nitems:\n  ../escape:\n" << kSweepItem;
     },
     "reproduce --manifest {dir}/m.yaml --list", 1,
     "items.../escape: an item name is a plain name of letters, digits, '_' and '-'"},
    {"reproduce", "--list of an unknown item", [](const std::string& d) { manifest(d, kSweepItem); },
     "reproduce --manifest {dir}/m.yaml --list nosuch", 1, "unknown reproduction 'nosuch' (in "},
    {"reproduce", "--report-only with item names", [](const std::string& d) { manifest(d, kSweepItem); },
     "reproduce --manifest {dir}/m.yaml --runs-dir {dir}/r --out {dir}/o --report-only a", 1,
     "--report-only rewrites the whole report; leave out the item names (a)"},
    {"reproduce", "manifest missing", nullptr, "reproduce --manifest {dir}/none.yaml --list", 1,
     "none.yaml: no such file"},
    {"reproduce", "manifest a directory (was \"no such file\")", nullptr, "reproduce --manifest {dir} --list", 1,
     "--manifest {dir}: is a directory, expected a file"},
    {"reproduce", "manifest is the REPORT.md the command writes",
     [](const std::string& d) {
       manifest(d, kSweepItem);
       std::filesystem::create_directories(d + "/o");
       std::filesystem::copy_file(d + "/m.yaml", d + "/o/REPORT.md");
       std::filesystem::copy_file(d + "/paper.yaml", d + "/o/paper.yaml");
       std::filesystem::copy_file(d + "/s.yaml", d + "/o/s.yaml");
     },
     "reproduce --manifest {dir}/o/REPORT.md --runs-dir {dir}/r --out {dir}/o --report-only", 1,
     "--out {dir}/o/REPORT.md: is also the input --manifest {dir}/o/REPORT.md"},
    {"reproduce", "unknown item", [](const std::string& d) { manifest(d, kSweepItem); },
     "reproduce --manifest {dir}/m.yaml --runs-dir {dir}/r --out {dir}/o b", 1,
     "unknown reproduction 'b' (in "},
    {"reproduce", "unknown key in an item", [](const std::string& d) { manifest(d, kSweepItem + "    colour: red\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a: unknown key 'colour'"},
    {"reproduce", "unknown item kind", [](const std::string& d) { manifest(d, "    kind: film\n    title: t\n    paper_says: p\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.kind: unknown kind 'film' (kinds: sweep, attention, length, lm, bench)"},
    {"reproduce", "claim without a bound",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: rmt, segments: [3]}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0]: a claim needs paper, min, max or above"},
    {"reproduce", "claim with the paper's value and no tolerance",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: rmt, segments: [3], paper: 1.0}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "claim 't' gives the paper's value: the top level needs tolerance"},
    {"reproduce", "claim with the paper's value and a bound",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: rmt, segments: [3], paper: 1.0, min: 0.9}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0]: a claim with the paper's value is checked within the tolerance"},
    {"reproduce", "reading with an unknown placeholder",
     [](const std::string& d) { manifest(d, kSweepItem + "    notes: \"RMT got {{accuracy model=rmt}}\"\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.notes: unknown placeholder {{accuracy model=rmt}}"},
    {"reproduce", "reading placeholder with an unknown key",
     [](const std::string& d) { manifest(d, kSweepItem + "    notes: \"RMT got {{test model=rmt segments=3 sed=1}}\"\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "unknown key 'sed' (test takes: model, segments, seed, metric, digits)"},
    {"reproduce", "claim on a metric the item lacks",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: rmt, segments: [3], min: 0.5, metric: loss}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "claim 't' uses metric loss, which is not in the item's metrics"},
    {"reproduce", "segments not integers",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: rmt, segments: [three], min: 0.5}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0].segments[0]: expected an integer"},
    {"reproduce", "sweep file missing", [](const std::string& d) {
       manifest(d, "    kind: sweep\n    title: t\n    paper_says: p\n    sweep: gone.yaml\n    metrics: [loss]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "gone.yaml is not a file"},
    {"reproduce", "attention item reading a later item", [](const std::string& d) {
       manifest(d, "    kind: attention\n    title: t\n    paper_says: p\n    from: a\n    runs: [{model: rmt, segments: 3}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.from: 'a' is not a sweep item given before this one"},
    {"reproduce", "manifest not YAML", [](const std::string& d) { std::ofstream(d + "/m.yaml") << "paper: [1\n"; },
     "reproduce --manifest {dir}/m.yaml --list", 1, "not valid YAML"},
    {"reproduce", "lm claim without a run", [](const std::string& d) {
       manifest(d, kLmItem + "    claims: [{text: t, below: {model: xl}}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0].run: expected a map {model, cache, memory, bptt}"},
    {"reproduce", "lm claim selector with an unknown key", [](const std::string& d) {
       manifest(d, kLmItem + "    claims: [{text: t, run: {model: rmt, mem: 4}, below: {model: xl}}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0].run: unknown key 'mem'"},
    {"reproduce", "lm claim on an unknown model kind", [](const std::string& d) {
       manifest(d, kLmItem + "    claims: [{text: t, run: {model: rmt}, below: {model: lstm}}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0].below.model: unknown model kind 'lstm'"},
    {"reproduce", "lm claim with a negative cache", [](const std::string& d) {
       manifest(d, kLmItem + "    claims: [{text: t, run: {model: xl, cache: -4}, below: {model: baseline}}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.claims[0].run.cache: must be in 0.."},
    {"reproduce", "lm item with metrics", [](const std::string& d) { manifest(d, kLmItem + "    metrics: [bpc]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a: unknown key 'metrics'"},
    {"reproduce", "jobs zero", [](const std::string& d) { manifest(d, kSweepItem); },
     "reproduce --manifest {dir}/m.yaml -j 0", 1, "-j"},
    // ---- issue 58: a placeholder or a bound that says nothing -------------------------------
    {"reproduce", "reading counting an end reason that does not exist (was 0 of N)",
     [](const std::string& d) { manifest(d, kSweepItem + "    notes: \"{{ended reason=nosuch}} ended so\"\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1,
     "items.a.notes: {{ended reason=nosuch}}: reason=nosuch is no end reason (end reasons: solved, max_steps, "
     "unmastered)"},
    {"reproduce", "placeholder under outside_records (was printed raw)",
     [](const std::string& d) { manifest(d, kSweepItem + "    outside_records: \"by hand: {{test model=baseline segments=1}}\"\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1,
     "items.a.outside_records: {{test model=baseline segments=1}}: a placeholder is filled from the item's results"},
    {"reproduce", "bench item with a min_speedup that can never fail",
     [](const std::string& d) {
       manifest(d, "    kind: bench\n    title: t\n    paper_says: p\n    beyond_the_paper: true\n    bench: diagonal\n"
                   "    threads: [1]\n    min_speedup: -1\n");
     },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.a.min_speedup: -1 can never fail (a speed-up is above 0)"},
    {"reproduce", "claim min 0 on an accuracy (can never fail)",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: baseline, segments: [1], min: 0}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1,
     "items.a.claims[0].min: claim 't': min 0 on acc_teacher_forced can never fail (an accuracy is at least 0)"},
    {"reproduce", "claim max 1 on an accuracy (can never fail)",
     [](const std::string& d) { manifest(d, kSweepItem + "    claims: [{text: t, model: baseline, segments: [1], max: 1}]\n"); },
     "reproduce --manifest {dir}/m.yaml --list", 1,
     "items.a.claims[0].max: claim 't': max 1 on acc_teacher_forced can never fail (an accuracy is at most 1)"},
    {"reproduce", "length claim max above 1 (can never fail)",
     [](const std::string& d) {
       manifest(d, kSweepItem + "  b:\n    kind: length\n    title: t\n    paper_says: p\n    from: a\n    runs: all\n"
                                "    lengths: [8]\n    claims: [{text: u, model: baseline, segments: [2], max: 1.5}]\n");
     },
     "reproduce --manifest {dir}/m.yaml --list", 1, "items.b.claims[0].max: claim 'u': max 1.5 on acc_teacher_forced"},
});
