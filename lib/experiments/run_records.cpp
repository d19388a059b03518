// Finished runs' records beside a reproduce item's results (run_records.h).
#include "lib/experiments/run_records.h"

#include "lib/core/error.h"
#include "lib/files/io.h"

namespace rmt {

namespace fs = std::filesystem;

const char* const kRunRecordFiles[3] = {"config.yaml", "metrics.jsonl", "results.json"};

int save_run_records(const SweepPlan& plan, const fs::path& records_dir) {
  int saved = 0;
  for (const auto& run : plan.runs) {
    if (!fs::exists(run.dir / "results.json")) continue;  // not finished
    const fs::path record = records_dir / run.run_id;
    bool wrote = false;
    for (const char* name : kRunRecordFiles) {
      const std::string bytes = read_file(run.dir / name);
      const fs::path kept = record / name;
      if (fs::exists(kept) && read_file(kept) == bytes) continue;
      create_directories_or_fail(record);
      write_file_atomic(kept, bytes);
      wrote = true;
    }
    saved += wrote;
  }
  return saved;
}

int restore_run_records(const SweepPlan& plan, const fs::path& records_dir) {
  int restored = 0;
  for (const auto& run : plan.runs) {
    const fs::path record = records_dir / run.run_id;
    if (fs::exists(run.dir) || !fs::is_directory(record)) continue;
    bool whole = true;
    for (const char* name : kRunRecordFiles) whole = whole && fs::is_regular_file(record / name);
    if (!whole) continue;  // a record cut short: the run is trained again
    // Written beside the run directory and renamed into place, so that a restore cut short leaves
    // no half run directory (which the sweep would try to resume).
    fs::path staging = run.dir;
    staging += ".restoring";
    std::error_code ec;
    fs::remove_all(staging, ec);
    if (ec) fail("cannot remove {} (left by a restore cut short): {}", staging.string(), ec.message());
    create_directories_or_fail(staging);
    for (const char* name : kRunRecordFiles) write_file_atomic(staging / name, read_file(record / name));
    fs::rename(staging, run.dir, ec);
    if (ec) fail("cannot rename {} to {}: {}", staging.string(), run.dir.string(), ec.message());
    ++restored;
  }
  return restored;
}

}  // namespace rmt
