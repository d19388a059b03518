#include "tasks/family.h"

#include "lib/core/error.h"
#include "tasks/dataset.h"
#include "tasks/text.h"

namespace rmt {

namespace {

class AlgorithmicFamily : public DatasetFamily {
 public:
  const char* name() const override { return "algorithmic"; }
  FamilyKind kind() const override { return FamilyKind::samples; }
  DatasetTask task(const std::string& dir) const override {
    const DatasetMeta meta = read_dataset_meta(dir);
    return {meta.task, meta.input_length};
  }
  DatasetMeta samples_meta(const std::string& dir) const override { return load_dataset_meta(dir); }
  CheckResult check(const std::string& dir, int max_violations) const override {
    return check_task_dataset(dir, max_violations);
  }
  std::string fingerprint(const std::string& dir) const override { return task_dataset_fingerprint(dir); }
  std::vector<std::string> show(const std::string& dir, const ShowRequest& r) const override {
    if (r.bytes) fail("--bytes is for text datasets (meta.yaml kind: text); {} is not one: use -n", dir);
    return show_samples(dir, r.split.value_or("train"), r.samples.value_or(5));
  }
};

class TextFamily : public DatasetFamily {
 public:
  const char* name() const override { return "text"; }
  FamilyKind kind() const override { return FamilyKind::text; }
  DatasetTask task(const std::string&) const override { return {"text", 0}; }
  DatasetMeta samples_meta(const std::string& dir) const override {
    fail("{} is a byte-level text dataset (meta.yaml kind: text, from `rmt generate text`), not a dataset of "
         "the algorithmic tasks (copy, reverse, retrieval, sqeq, memorize, detect_memorize, reasoning)", dir);
  }
  CheckResult check(const std::string& dir, int) const override {
    const TextCheckResult t = check_text_dataset(dir);
    return CheckResult{t.ok, t.summary, t.violations};
  }
  std::string fingerprint(const std::string& dir) const override { return text_dataset_fingerprint(dir); }
  std::vector<std::string> show(const std::string& dir, const ShowRequest& r) const override {
    if (r.samples) fail("-n counts the samples of an algorithmic dataset; {} is a text dataset: use --bytes", dir);
    std::vector<std::string> splits = {"train", "val", "test"};
    if (r.split) splits = {*r.split};
    return show_text(dir, splits, r.bytes.value_or(400));
  }
};

}  // namespace

const DatasetFamily& dataset_family(const std::string& dir) {
  static const AlgorithmicFamily algorithmic;
  static const TextFamily text;
  if (is_text_dataset(dir)) return text;
  return algorithmic;
}

CheckResult check_dataset(const std::string& dir, int max_violations) {
  return dataset_family(dir).check(dir, max_violations);
}

std::string dataset_fingerprint(const std::string& dir) { return dataset_family(dir).fingerprint(dir); }

std::vector<std::string> show_dataset(const std::string& dir, const ShowRequest& request) {
  return dataset_family(dir).show(dir, request);
}

}  // namespace rmt
