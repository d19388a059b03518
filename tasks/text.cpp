// Byte-level text datasets: generation from a file, meta.yaml, checking, display, loading, and
// Transformer-XL's LM batching (tasks/text.h).
#include "tasks/text.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "build_info.h"
#include "lib/core/error.h"
#include "lib/core/messages.h"
#include "lib/core/system.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset_check.h"
#include "tasks/check.h"

namespace rmt {

namespace fs = std::filesystem;

namespace {

const char* const kTextSplits[3] = {"train", "val", "test"};

int split_index(const std::string& split) {
  for (int k = 0; k < 3; k++)
    if (split == kTextSplits[k]) return k;
  fail("unknown split '{}' (train, val, test)", split);
}

std::string shares_text(const TextShares& s) { return fmt::format("{},{},{}", s[0], s[1], s[2]); }

// "bytes A..B of FILE" for a split that starts at `start` and holds `n` bytes.
std::string where_text(const TextMeta& m, int64_t start, int64_t n) {
  return fmt::format("bytes {}..{} of {}", start, start + n - 1, m.source_file);
}

int64_t split_start(const TextMeta& m, int k) {
  int64_t start = 0;
  for (int i = 0; i < k; i++) start += m.counts[i];
  return start;
}

std::string meta_yaml_text(const TextMeta& m) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "rmt_version" << YAML::Value << RMT_VERSION;
  out << YAML::Key << "task" << YAML::Value << "text";
  out << YAML::Key << "kind" << YAML::Value << "text";
  out << YAML::Key << "generator_version" << YAML::Value << m.generator_version;
  out << YAML::Key << "source" << YAML::Comment("the first `used` bytes of `file`; sha256 of those bytes")
      << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "file" << YAML::Value << m.source_file;
  out << YAML::Key << "size" << YAML::Value << m.source_size;
  out << YAML::Key << "used" << YAML::Value << m.used;
  out << YAML::Key << "sha256" << YAML::Value << m.source_sha256;
  out << YAML::EndMap;
  out << YAML::Key << "split" << YAML::Comment("percent: val and test get floor(used * share / 100), train the rest")
      << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (int k = 0; k < 3; k++) out << YAML::Key << kTextSplits[k] << YAML::Value << m.shares[k];
  out << YAML::EndMap;
  out << YAML::Key << "vocab_size" << YAML::Value << kTextVocab;
  out << YAML::Key << "counts" << YAML::Comment("bytes, in source order: train, val, test") << YAML::Value
      << YAML::Flow << YAML::BeginMap;
  for (int k = 0; k < 3; k++) out << YAML::Key << kTextSplits[k] << YAML::Value << m.counts[k];
  out << YAML::EndMap;
  out << YAML::Key << "sha256" << YAML::Value << YAML::BeginMap;
  for (auto& [name, hex] : m.sha256) out << YAML::Key << name << YAML::Value << hex;
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

// The layout of one split file against its count: present, an .npy header, dtype uint8, 1-D of
// `count` bytes, and the file exactly that long. Returns the data offset, or 0 after a violation.
size_t check_split_layout_text(const std::string& path, int64_t count, Violations& v) {
  if (const std::string problem = not_a_regular_file(path); !problem.empty()) {
    v.add(fs::exists(fs::symlink_status(path)) ? fmt::format("{}: {}", path, problem)
                                               : fmt::format("{}: missing split file", path));
    return 0;
  }
  NpyHeader h;
  uint64_t size = 0;
  try {
    std::error_code ec;
    size = fs::file_size(path, ec);
    if (ec) fail("{}: cannot read its size: {}", path, ec.message());
    h = read_header_only(path);
  } catch (const Error& e) {
    v.add(e.what());
    return 0;
  }
  if (h.dtype != NpyDtype::uint8) {
    v.add(fmt::format("{}: dtype is {}, expected uint8 (|u1): one byte per token", path, dtype_name(h.dtype)));
    return 0;
  }
  if (h.shape.size() != 1) {
    v.add(fmt::format("{}: shape is {}, expected [bytes] (1-D)", path, shape_text(h.shape)));
    return 0;
  }
  const int64_t n = h.shape[0];
  if (n != count) {
    v.add(fmt::format("{}: shape is {}, but meta.yaml counts {} bytes for this split", path, shape_text(h.shape),
                      count));
    return 0;
  }
  if (size != h.data_offset + uint64_t(n)) {
    const uint64_t holds = size >= h.data_offset ? size - h.data_offset : 0;
    v.add(fmt::format("{}: shape {} needs {} bytes of data, the file holds {} ({})", path, shape_text(h.shape), n,
                      holds, holds < uint64_t(n) ? "truncated" : "bytes after the data"));
    return 0;
  }
  return h.data_offset;
}

// Streams a split file whose layout was checked: returns the sha256 of the whole file and hands
// the data bytes to sink(const uint8_t*, size_t) in order. Fails if the file changed meanwhile.
template <typename Sink>
std::string read_split_data(const std::string& path, size_t data_offset, int64_t count, Sink sink) {
  require_regular_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}", path);
  Sha256 sha;
  std::vector<char> buf(1 << 20);
  std::string head(data_offset, '\0');
  if (read_some(in, head.data(), head.size(), path) != head.size()) fail("{}: the file changed while it was read", path);
  sha.update(head.data(), head.size());
  int64_t done = 0;
  while (done < count) {
    const size_t want = size_t(std::min<int64_t>(count - done, int64_t(buf.size())));
    const size_t got = read_some(in, buf.data(), want, path);
    if (got == 0) fail("{}: the file changed while it was read", path);
    sha.update(buf.data(), got);
    sink(reinterpret_cast<const uint8_t*>(buf.data()), got);
    done += int64_t(got);
  }
  char extra;
  if (read_some(in, &extra, 1, path) != 0) fail("{}: the file changed while it was read", path);
  return sha.hex();
}

// Length of the valid UTF-8 sequence at p (at most n bytes), or 0.
int utf8_length(const uint8_t* p, size_t n, uint32_t& cp) {
  const uint8_t c = p[0];
  int len = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte (no overlongs, no surrogates)
  if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
  else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (size_t(len) > n) return 0;
  for (int i = 1; i < len; i++) {
    const uint8_t b = p[i];
    if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  return len;
}

// Code points a terminal would act on or hide rather than show: C1 controls, zero-width and
// direction marks, line and paragraph separators, direction embeddings and isolates, the BOM.
bool invisible(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202E) ||
         (cp >= 0x2060 && cp <= 0x206F) || cp == 0xFEFF;
}

}  // namespace


bool is_text_dataset(const std::string& dir) {
  std::error_code ec;
  const fs::path path = fs::path(dir) / "meta.yaml";
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    const YAML::Node y = YAML::LoadFile(path.string());
    return y.IsMap() && y["kind"].IsScalar() && y["kind"].Scalar() == "text";
  } catch (const YAML::Exception&) {
    return false;
  }
}

std::string text_split_file(const std::string& dir, const std::string& split) {
  return (fs::path(dir) / fmt::format("text_{}.npy", split)).string();
}

TextGenerateResult generate_text_dataset(const TextGenerateRequest& r) {
  const auto started = std::chrono::steady_clock::now();
  // The input: a non-empty regular file.
  std::error_code ec;
  const fs::file_status st = fs::status(r.input, ec);
  if (!fs::exists(st)) fail("--input {}: no such file", r.input);
  if (fs::is_directory(st)) fail("--input {} is a directory; give the text file itself", r.input);
  if (!fs::is_regular_file(st)) fail("--input {} is not a regular file (a pipe or device cannot be split by size)", r.input);
  const uint64_t size = fs::file_size(r.input, ec);
  if (ec) fail("--input {}: cannot read its size: {}", r.input, ec.message());
  if (size == 0) {
    // A /proc or /sys file reports size 0 yet has content (made as it is read): not "empty".
    std::ifstream probe(r.input, std::ios::binary);
    char byte;
    if (probe.read(&byte, 1))
      fail("--input {} reports a size of 0 bytes but has content (a /proc or /sys file, made as it "
           "is read, cannot be split by size); copy it to a regular file first", r.input);
    fail("--input {} is empty", r.input);
  }
  std::ifstream in(r.input, std::ios::binary);
  if (!in) fail("--input {}: cannot open it for reading", r.input);
  int64_t used = int64_t(size);
  if (r.bytes) {
    if (*r.bytes < 1) fail("--bytes must be at least 1 (got {})", *r.bytes);
    if (uint64_t(*r.bytes) > size) fail("--bytes {} is more than {} holds ({} bytes)", *r.bytes, r.input, size);
    used = *r.bytes;
  }
  TextMeta m;
  m.source_file = fs::path(r.input).filename().string();
  m.source_size = int64_t(size);
  m.used = used;
  m.shares = r.shares;
  m.counts = text_split_sizes(used, r.shares);
  const std::string of = used == int64_t(size) ? fmt::format("{} has {} bytes", r.input, size)
                                               : fmt::format("the first {} bytes of {} (--bytes)", used, r.input);
  for (int k = 0; k < 3; k++)
    if (m.counts[size_t(k)] < kTextMinSplitBytes)
      fail("{}: --split {} gives the {} split {} byte{}; every split needs at least {} (an input byte and its "
           "next-byte target)", of, shares_text(r.shares), kTextSplits[k], m.counts[size_t(k)],
           m.counts[size_t(k)] == 1 ? "" : "s", kTextMinSplitBytes);
  // One split is held at a time.
  const int64_t largest = *std::max_element(m.counts.begin(), m.counts.end());
  const uint64_t ram = sys::physical_memory_bytes();
  if (ram > 0 && double(largest) > double(ram) / 2)
    fail("the largest split ({} bytes) would need {} of memory to write; this machine has {}", largest,
         format_bytes(double(largest)), format_bytes(double(ram)));
  const std::optional<uint64_t> free_bytes = free_disk_bytes(r.out_dir);
  if (free_bytes && double(used) + 3 * 256.0 > double(*free_bytes))
    fail("the dataset needs about {} of disk, but {} has {} free", format_bytes(double(used)), r.out_dir,
         format_bytes(double(*free_bytes)));
  const std::string meta_path = (fs::path(r.out_dir) / "meta.yaml").string();
  std::vector<std::string> targets = {meta_path};
  for (const char* split : kTextSplits) targets.push_back(text_split_file(r.out_dir, split));
  refuse_existing_outputs(targets, r.out_dir, r.force);
  if (r.check_only) return TextGenerateResult{m, {}, 0};

  prepare_out_dir(r.out_dir);
  // The old meta goes first: until the new one is written last, the directory is visibly incomplete.
  fs::remove(meta_path, ec);

  TextGenerateResult result;
  Sha256 source;
  for (int k = 0; k < 3; k++) {
    const int64_t n = m.counts[size_t(k)];
    std::string bytes = npy_header_uint8({n});
    const size_t head = bytes.size();
    bytes.resize(head + size_t(n));
    if (read_some(in, bytes.data() + head, size_t(n), r.input) != size_t(n))
      fail("--input {}: the file got shorter while it was read", r.input);
    source.update(bytes.data() + head, size_t(n));
    const std::string path = text_split_file(r.out_dir, kTextSplits[k]);
    write_file_atomic(path, bytes);
    m.sha256.push_back({fs::path(path).filename().string(), sha256_hex(bytes)});
    result.files.push_back(path);
  }
  m.source_sha256 = source.hex();
  write_file_atomic(meta_path, meta_yaml_text(m));
  result.files.push_back(meta_path);
  result.meta = m;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

TextMeta read_text_meta(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail_no_dataset_dir(dir);
  const std::string path = (fs::path(dir) / "meta.yaml").string();
  if (!fs::exists(fs::symlink_status(path, ec))) fail("{}: missing meta.yaml", dir);
  require_regular_file(path);
  YAML::Node y;
  try {
    y = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    fail("{}: not valid YAML: {}", path, e.what());
  }
  const std::vector<std::string> required = {"task",  "kind",       "generator_version", "source", "split",
                                             "vocab_size", "counts", "sha256"};
  std::vector<std::string> known = required;
  known.push_back("rmt_version");  // provenance only
  auto e = meta_map(y, path, "", known, required);
  TextMeta m;
  for (const char* key : {"task", "kind"}) {
    const std::string v = meta_string(e[key], path, key);
    if (v != "text") fail("{}: '{}' is '{}', but a byte-level text dataset has 'text'", path, key, v);
  }
  if (e.count("rmt_version")) meta_string(e["rmt_version"], path, "rmt_version");
  m.generator_version = int(meta_int(e["generator_version"], path, "generator_version", 1, INT32_MAX));
  if (m.generator_version != kTextGeneratorVersion)
    fail("{}: 'generator_version' is {}, but this rmt reads version {} (regenerate with `rmt generate text`)", path,
         m.generator_version, kTextGeneratorVersion);
  auto s = meta_map(e["source"], path, "source.", {"file", "size", "used", "sha256"}, {"file", "size", "used", "sha256"});
  m.source_file = meta_string(s["file"], path, "source.file");
  m.source_size = meta_int(s["size"], path, "source.size", 1, INT64_MAX);
  m.used = meta_int(s["used"], path, "source.used", 1, INT64_MAX);
  m.source_sha256 = meta_string(s["sha256"], path, "source.sha256");
  if (!is_hex64(m.source_sha256))
    fail("{}: 'source.sha256' must be 64 lowercase hex digits, got '{}'", path, m.source_sha256);
  auto sp = meta_map(e["split"], path, "split.", {"train", "val", "test"}, {"train", "val", "test"});
  auto c = meta_map(e["counts"], path, "counts.", {"train", "val", "test"}, {"train", "val", "test"});
  for (int k = 0; k < 3; k++) {
    m.shares[size_t(k)] = int(meta_int(sp[kTextSplits[k]], path, std::string("split.") + kTextSplits[k], 1, 100));
    m.counts[size_t(k)] = meta_int(c[kTextSplits[k]], path, std::string("counts.") + kTextSplits[k], 0, INT64_MAX);
  }
  const int64_t vocab = meta_int(e["vocab_size"], path, "vocab_size", INT32_MIN, INT32_MAX);
  if (vocab != kTextVocab) fail("{}: 'vocab_size' is {}, but a byte-level dataset has {}", path, vocab, kTextVocab);
  m.sha256 = meta_sha256_map(e["sha256"], path);
  return m;
}

TextCheckResult check_text_dataset(const std::string& dir) {
  const TextMeta m = read_text_meta(dir);
  const std::string meta_path = (fs::path(dir) / "meta.yaml").string();
  Violations v;
  // meta.yaml against itself.
  const int share_sum = m.shares[0] + m.shares[1] + m.shares[2];
  if (share_sum != 100)
    v.add(fmt::format("{}: split {} sums to {}, expected 100 (percent)", meta_path, shares_text(m.shares), share_sum));
  if (m.used > m.source_size)
    v.add(fmt::format("{}: source.used is {}, more than source.size {}", meta_path, m.used, m.source_size));
  bool counts_ok = share_sum == 100;
  if (share_sum == 100) {
    const std::array<int64_t, 3> want = text_split_sizes(m.used, m.shares);
    for (int k = 0; k < 3; k++)
      if (m.counts[size_t(k)] != want[size_t(k)]) {
        v.add(fmt::format("{}: counts.{} is {}, but split {} of source.used {} bytes gives {}", meta_path,
                          kTextSplits[k], m.counts[size_t(k)], shares_text(m.shares), m.used, want[size_t(k)]));
        counts_ok = false;
      }
  }
  std::vector<std::string> names;
  for (const char* split : kTextSplits) names.push_back(fs::path(text_split_file(dir, split)).filename().string());
  for (const std::string& f : names) {
    bool found = false;
    for (auto& [name, _] : m.sha256) found = found || name == f;
    if (!found) v.add(fmt::format("{}: sha256 has no entry for {}", meta_path, f));
  }
  for (auto& [name, _] : m.sha256)
    if (std::find(names.begin(), names.end(), name) == names.end())
      v.add(fmt::format("{}: sha256 names '{}', which is not a file of this dataset", meta_path, name));

  // The files; the source hash over the splits' data in order, while every split reads whole.
  TextCheckResult result;
  Sha256 source;
  bool all_read = true;
  for (int k = 0; k < 3; k++) {
    const std::string path = text_split_file(dir, kTextSplits[k]);
    const int64_t before = v.total;
    const int64_t n = m.counts[size_t(k)];
    const size_t offset = check_split_layout_text(path, n, v);
    if (offset > 0 && n < kTextMinSplitBytes)
      v.add(fmt::format("{}: {} byte{}; a split needs at least {} (an input byte and its next-byte target)", path, n,
                        n == 1 ? "" : "s", kTextMinSplitBytes));
    if (v.total > before) {
      all_read = false;
      continue;
    }
    try {
      const std::string got = read_split_data(path, offset, n, [&](const uint8_t* p, size_t len) { source.update(p, len); });
      for (auto& [name, hex] : m.sha256)
        if (name == names[size_t(k)] && got != hex)
          v.add(fmt::format("{}: sha256 differs from meta.yaml (meta.yaml {}..., file {}...): the file is corrupt",
                            path, hex.substr(0, 12), got.substr(0, 12)));
    } catch (const Error& e) {
      v.add(e.what());
    }
    if (v.total > before) {
      all_read = false;
      continue;
    }
    result.summary.push_back(fmt::format("text {}: OK {} bytes ({}{}), uint8, sha256 ok", kTextSplits[k], n,
                                         counts_ok ? where_text(m, split_start(m, k), n) : "",
                                         counts_ok ? "" : "counts disagree with the split"));
  }
  if (all_read) {
    const std::string got = source.hex();
    if (got != m.source_sha256)
      v.add(fmt::format("{}: train + val + test do not put back the source: their sha256 is {}..., source.sha256 {}...",
                        meta_path, got.substr(0, 12), m.source_sha256.substr(0, 12)));
    else
      result.summary.push_back(
          m.used == m.source_size
              ? fmt::format("text: train + val + test = {} ({} bytes), source sha256 ok", m.source_file, m.used)
              : fmt::format("text: train + val + test = the first {} of the {} bytes of {}, source sha256 ok", m.used,
                            m.source_size, m.source_file));
  }
  result.ok = v.total == 0;
  result.violations = v.list;
  if (v.total > int64_t(v.list.size())) result.violations.push_back(fmt::format("... {} violations in all", v.total));
  return result;
}

TextMeta load_text_meta(const std::string& dir) {
  const TextCheckResult r = check_text_dataset(dir);
  if (!r.ok) fail("{}", invalid_dataset_message(dir, r.violations));
  return read_text_meta(dir);
}

std::vector<uint8_t> load_text_split(const std::string& dir, const TextMeta& meta, const std::string& split) {
  const int k = split_index(split);
  const std::string path = text_split_file(dir, split);
  const int64_t n = meta.counts[size_t(k)];
  Violations v;
  const size_t offset = check_split_layout_text(path, n, v);
  if (v.total > 0) fail("{}", invalid_dataset_message(dir, v.list));
  std::vector<uint8_t> out;
  out.reserve(size_t(n));
  const std::string got = read_split_data(path, offset, n, [&](const uint8_t* p, size_t len) { out.insert(out.end(), p, p + len); });
  const std::string name = fs::path(path).filename().string();
  bool listed = false;
  for (auto& [file, hex] : meta.sha256)
    if (file == name) {
      listed = true;
      if (got != hex)
        fail("{}", invalid_dataset_message(dir, {fmt::format("{}: sha256 differs from meta.yaml (meta.yaml {}..., file "
                                                             "{}...): the file is corrupt", path, hex.substr(0, 12),
                                                             got.substr(0, 12))}));
    }
  if (!listed) fail("{}", invalid_dataset_message(dir, {fmt::format("meta.yaml: sha256 has no entry for {}", name)}));
  return out;
}

std::string text_dataset_fingerprint(const std::string& dir) {
  std::string text = "rmt text dataset fingerprint v1\n";
  for (const char* split : kTextSplits) {
    const std::string path = text_split_file(dir, split);
    if (!fs::exists(fs::symlink_status(path)))
      fail("{}: missing dataset file (needed for the dataset's fingerprint)", path);
    require_regular_file(path);  // present but a directory, a FIFO ...: say what it is
    text += fmt::format("{} {}\n", fs::path(path).filename().string(), file_sha256_hex(path));
  }
  return sha256_hex(text);
}

std::string escape_text_bytes(const uint8_t* p, size_t n) {
  std::string out;
  for (size_t i = 0; i < n;) {
    const uint8_t c = p[i];
    if (c == '\n') out += '\n';
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c >= 0x20 && c < 0x7F) out += char(c);
    else {
      uint32_t cp = 0;
      const int len = c >= 0x80 ? utf8_length(p + i, n - i, cp) : 0;
      if (len > 0 && !invisible(cp)) {
        out.append(reinterpret_cast<const char*>(p + i), size_t(len));
        i += size_t(len);
        continue;
      }
      out += fmt::format("\\x{:02x}", c);
    }
    i++;
  }
  return out;
}

std::vector<std::string> show_text(const std::string& dir, const std::vector<std::string>& splits, int64_t bytes) {
  const TextMeta m = read_text_meta(dir);
  std::vector<std::string> lines;
  for (const std::string& split : splits) {
    const int k = split_index(split);
    const std::string path = text_split_file(dir, split);
    const int64_t n = m.counts[size_t(k)];
    // The layout must hold (it says where the bytes are); the bytes are shown as they are, so a
    // corrupt split can be looked at.
    Violations v;
    const size_t offset = check_split_layout_text(path, n, v);
    if (v.total > 0) fail("{}", invalid_dataset_message(dir, v.list));
    const int64_t shown = std::min(n, bytes);
    std::string data(size_t(shown), '\0');
    require_regular_file(path);
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open {}", path);
    in.seekg(std::streamoff(offset));
    if (read_some(in, data.data(), data.size(), path) != data.size()) fail("{}: the file changed while it was read", path);
    lines.push_back(fmt::format("text {} split: {} bytes ({}){}", split, n, where_text(m, split_start(m, k), n),
                                shown < n ? fmt::format("; the first {}:", shown) : ":"));
    const std::string text = escape_text_bytes(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    size_t start = 0;
    for (size_t i = 0; i <= text.size(); i++)
      if (i == text.size() || text[i] == '\n') {
        lines.push_back("  | " + text.substr(start, i - start));
        start = i + 1;
      }
    if (shown < n) lines.push_back(fmt::format("  ... {} more bytes", n - shown));
  }
  return lines;
}

// ---- LM batching --------------------------------------------------------------------------

TextStreams make_text_streams(std::vector<uint8_t> bytes, int batch, const std::string& what) {
  if (batch < 1) fail("the batch size must be at least 1 (got {})", batch);
  const int64_t n = int64_t(bytes.size());
  const int64_t length = n / batch;
  if (length < 2)
    fail("{} has {} bytes: {} streams of {} byte{} each, but a stream needs at least 2 (an input and its target); "
         "use a batch size of at most {}", what, n, batch, length, length == 1 ? "" : "s", std::max<int64_t>(1, n / 2));
  TextStreams s;
  s.bytes = std::move(bytes);
  s.bytes.resize(size_t(length) * size_t(batch));  // the remainder is dropped, as Transformer-XL does
  s.bytes.shrink_to_fit();
  s.batch = batch;
  s.length = length;
  return s;
}

int64_t text_segment_count(const TextStreams& s, int seg_len) {
  if (seg_len < 1) fail("the segment length must be at least 1 (got {})", seg_len);
  return (s.length - 1 + seg_len - 1) / seg_len;
}

int64_t text_full_segments(const TextStreams& s, int seg_len) {
  if (seg_len < 1) fail("the segment length must be at least 1 (got {})", seg_len);
  return (s.length - 1) / seg_len;
}

int64_t text_scored_positions(const TextStreams& s) { return int64_t(s.batch) * (s.length - 1); }

TextSegment text_segment(const TextStreams& s, int seg_len, int64_t index) {
  const int64_t count = text_segment_count(s, seg_len);
  if (index < 0 || index >= count)
    fail("segment {} does not exist: streams of {} bytes have segments 0..{} of length {}", index, s.length, count - 1,
         seg_len);
  const int64_t start = index * seg_len;
  TextSegment seg;
  seg.batch = s.batch;
  seg.len = int(std::min<int64_t>(seg_len, s.length - 1 - start));
  seg.input.resize(size_t(s.batch) * size_t(seg.len));
  seg.target.resize(seg.input.size());
  for (int b = 0; b < s.batch; b++) {
    const uint8_t* stream = s.bytes.data() + size_t(b) * size_t(s.length) + size_t(start);
    int32_t* in = seg.input.data() + size_t(b) * size_t(seg.len);
    int32_t* out = seg.target.data() + size_t(b) * size_t(seg.len);
    for (int t = 0; t < seg.len; t++) {
      in[t] = stream[t];
      out[t] = stream[t + 1];
    }
  }
  return seg;
}

DatasetMeta text_dataset_meta() {
  DatasetMeta meta;
  meta.task = meta.kind = meta.file_prefix = "text";
  meta.vocab.resize(size_t(kTextVocab));
  for (int i = 0; i < kTextVocab; ++i) {
    const uint8_t byte = uint8_t(i);
    meta.vocab[size_t(i)] = escape_text_bytes(&byte, 1);
  }
  meta.from_meta_yaml = true;
  return meta;
}

}  // namespace rmt
