// Byte-level text datasets (tasks/text.h): split sizes and boundaries, the files and meta.yaml,
// the round trip, what `data check` catches, display escaping, and Transformer-XL's LM batching.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tasks/family.h"
#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/npy.h"
#include "tasks/dataset.h"
#include "tasks/check.h"
#include "tasks/text.h"
#include "tests/cli.h"

namespace fs = std::filesystem;
using namespace rmt;

namespace {

// n bytes of every value 0..255, in a fixed pseudo-random order.
std::string source_bytes(size_t n, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = char(rng() & 0xff);
  return s;
}

// DIR/src.bin holding `bytes`, and the dataset generated from it in DIR/d.
std::string make_dataset(const fs::path& dir, const std::string& bytes, TextShares shares = kEnwik8Shares) {
  rmt::write_file_atomic(dir / "src.bin", bytes);
  TextGenerateRequest r;
  r.input = (dir / "src.bin").string();
  r.out_dir = (dir / "d").string();
  r.shares = shares;
  generate_text_dataset(r);
  return r.out_dir;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string all;
  for (const std::string& l : lines) all += l + "\n";
  return all;
}

// Replaces `from` by `to` in DIR/meta.yaml.
void edit_meta(const std::string& dir, const std::string& from, const std::string& to) {
  const fs::path path = fs::path(dir) / "meta.yaml";
  std::string text = rmt::read_file(path);
  const size_t at = text.find(from);
  REQUIRE_MESSAGE(at != std::string::npos, from);
  text.replace(at, from.size(), to);
  rmt::write_file_atomic(path, text);
}

}  // namespace

TEST_CASE("text --split shares: parsed strictly") {
  CHECK(parse_text_shares("90,5,5") == TextShares{90, 5, 5});
  CHECK(parse_text_shares(" 80, 10 ,10 ") == TextShares{80, 10, 10});
  CHECK(error_of([] { parse_text_shares("90,5"); }).find("has 2 parts") != std::string::npos);
  CHECK(error_of([] { parse_text_shares("90,5,5,0"); }).find("has 4 parts") != std::string::npos);
  CHECK(error_of([] { parse_text_shares(""); }).find("has 1 part;") != std::string::npos);
  CHECK(error_of([] { parse_text_shares("90,5,x"); }).find("the test share 'x' is not a whole number") != std::string::npos);
  CHECK(error_of([] { parse_text_shares("90.5,4.5,5"); }).find("the train share '90.5'") != std::string::npos);
  CHECK(error_of([] { parse_text_shares("110,-5,-5"); }).find("the train share '110'") != std::string::npos);
  CHECK(error_of([] { parse_text_shares("95,0,5"); }).find("the val share is 0") != std::string::npos);
  CHECK(error_of([] { parse_text_shares("80,10,5"); }).find("sums to 95") != std::string::npos);
}

TEST_CASE("text split sizes: enwik8's 90M/5M/5M, contiguous, adding up, val and test floored") {
  CHECK(text_split_sizes(100'000'000, kEnwik8Shares) == std::array<int64_t, 3>{90'000'000, 5'000'000, 5'000'000});
  CHECK(text_split_sizes(1000, kEnwik8Shares) == std::array<int64_t, 3>{900, 50, 50});
  CHECK(text_split_sizes(1001, kEnwik8Shares) == std::array<int64_t, 3>{901, 50, 50});
  CHECK(text_split_sizes(999, kEnwik8Shares) == std::array<int64_t, 3>{901, 49, 49});
  CHECK(text_split_sizes(40, {50, 25, 25}) == std::array<int64_t, 3>{20, 10, 10});
  // No overflow near the top of int64.
  const int64_t big = INT64_MAX - 7;
  const auto s = text_split_sizes(big, {1, 98, 1});
  CHECK(s[0] + s[1] + s[2] == big);
  CHECK(s[2] == big / 100);
  for (int64_t n : {2, 3, 57, 100, 12345, 99'999'999})
    for (TextShares sh : {TextShares{90, 5, 5}, TextShares{1, 1, 98}, TextShares{34, 33, 33}}) {
      const auto z = text_split_sizes(n, sh);
      CHECK(z[0] + z[1] + z[2] == n);
      CHECK(z[1] == n * sh[1] / 100);
      CHECK(z[2] == n * sh[2] / 100);
    }
}

TEST_CASE("text dataset: files, meta.yaml, exact boundaries, round trip, deterministic") {
  const fs::path dir = fresh_dir("rmt_test_text", "roundtrip");
  const std::string src = source_bytes(1003);
  const std::string d = make_dataset(dir, src);
  CHECK(is_text_dataset(d));
  const TextMeta m = read_text_meta(d);
  CHECK(m.source_file == "src.bin");
  CHECK(m.source_size == 1003);
  CHECK(m.used == 1003);
  CHECK(m.source_sha256 == sha256_hex(src));
  CHECK(m.counts == std::array<int64_t, 3>{903, 50, 50});
  CHECK(m.shares == kEnwik8Shares);
  CHECK(m.generator_version == kTextGeneratorVersion);
  // Each split is the source's bytes at its place: train = [0, 903), val = [903, 953), test = the last 50.
  const std::vector<uint8_t> train = load_text_split(d, m, "train"), val = load_text_split(d, m, "val"),
                             test = load_text_split(d, m, "test");
  CHECK(std::string(train.begin(), train.end()) == src.substr(0, 903));
  CHECK(std::string(val.begin(), val.end()) == src.substr(903, 50));
  CHECK(std::string(test.begin(), test.end()) == src.substr(953));
  // A 1-D uint8 .npy as numpy.save writes it: version 1.0, header padded to a multiple of 64 bytes.
  const std::string file = rmt::read_file(text_split_file(d, "val"));
  std::string want = "{'descr': '|u1', 'fortran_order': False, 'shape': (50,), }";
  want.append(128 - 10 - want.size() - 1, ' ');
  want = std::string("\x93NUMPY\x01\x00", 8) + char(want.size() + 1) + '\0' + want + "\n";
  CHECK(file.substr(0, 128) == want);
  CHECK(file.substr(128) == src.substr(903, 50));
  const NpyArray arr = read_npy(text_split_file(d, "test"));
  CHECK(arr.dtype == NpyDtype::uint8);
  CHECK(arr.shape == std::vector<int64_t>{50});
  CHECK(arr.ints[0] == int64_t(uint8_t(src[953])));
  // check passes and says where each split lies; load_text_meta agrees.
  const TextCheckResult c = check_text_dataset(d);
  CHECK_MESSAGE(c.ok, joined(c.violations));
  CHECK(joined(c.summary).find("text val: OK 50 bytes (bytes 903..952 of src.bin)") != std::string::npos);
  CHECK(joined(c.summary).find("source sha256 ok") != std::string::npos);
  CHECK(load_text_meta(d).counts == m.counts);
  const CheckResult via_check_dataset = check_dataset(d);  // `rmt data check` dispatches on kind: text
  CHECK(via_check_dataset.ok);
  CHECK(via_check_dataset.summary == c.summary);
  // The same input gives byte-identical files.
  const fs::path dir2 = fresh_dir("rmt_test_text", "roundtrip2");
  const std::string d2 = make_dataset(dir2, src);
  for (const char* f : {"text_train.npy", "text_val.npy", "text_test.npy", "meta.yaml"})
    CHECK(rmt::read_file(fs::path(d) / f) == rmt::read_file(fs::path(d2) / f));
  CHECK(dataset_fingerprint(d) == dataset_fingerprint(d2));
  CHECK(dataset_fingerprint(d) == text_dataset_fingerprint(d));
  // Existing files are kept unless force.
  TextGenerateRequest again;
  again.input = (dir / "src.bin").string();
  again.out_dir = d;
  CHECK(error_of([&] { generate_text_dataset(again); }).find("already exists; pass --force") != std::string::npos);
  again.force = true;
  again.shares = {80, 10, 10};
  CHECK(generate_text_dataset(again).meta.counts == std::array<int64_t, 3>{803, 100, 100});
  CHECK(dataset_fingerprint(d) != dataset_fingerprint(d2));
  fs::remove_all(dir);
  fs::remove_all(dir2);
}

TEST_CASE("text dataset: --bytes takes a prefix, as enwik8 is a prefix of a dump") {
  const fs::path dir = fresh_dir("rmt_test_text", "prefix");
  const std::string src = source_bytes(500);
  rmt::write_file_atomic(dir / "src.bin", src);
  TextGenerateRequest r;
  r.input = (dir / "src.bin").string();
  r.out_dir = (dir / "d").string();
  r.bytes = 200;
  const TextMeta m = generate_text_dataset(r).meta;
  CHECK(m.source_size == 500);
  CHECK(m.used == 200);
  CHECK(m.counts == std::array<int64_t, 3>{180, 10, 10});
  CHECK(m.source_sha256 == sha256_hex(src.substr(0, 200)));
  const std::vector<uint8_t> test = load_text_split(r.out_dir, m, "test");
  CHECK(std::string(test.begin(), test.end()) == src.substr(190, 10));
  const TextCheckResult c = check_text_dataset(r.out_dir);
  CHECK(c.ok);
  CHECK(joined(c.summary).find("the first 200 of the 500 bytes of src.bin") != std::string::npos);
  r.bytes = 501;
  r.force = true;
  CHECK(error_of([&] { generate_text_dataset(r); }).find("--bytes 501 is more than") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("text dataset: bad inputs fail before anything is written") {
  const fs::path dir = fresh_dir("rmt_test_text", "bad");
  TextGenerateRequest r;
  r.out_dir = (dir / "d").string();
  r.input = (dir / "missing.txt").string();
  CHECK(error_of([&] { generate_text_dataset(r); }).find("no such file") != std::string::npos);
  r.input = dir.string();
  CHECK(error_of([&] { generate_text_dataset(r); }).find("is a directory") != std::string::npos);
  rmt::write_file_atomic(dir / "empty.txt", "");
  r.input = (dir / "empty.txt").string();
  CHECK(error_of([&] { generate_text_dataset(r); }).find("is empty") != std::string::npos);
  // 39 bytes: val and test get floor(1.95) = 1 byte, one short of an input and its target.
  rmt::write_file_atomic(dir / "small.txt", std::string(39, 'a'));
  r.input = (dir / "small.txt").string();
  CHECK(error_of([&] { generate_text_dataset(r); }).find("gives the val split 1 byte;") != std::string::npos);
  CHECK(!fs::exists(r.out_dir));
  // 40 bytes is the least 90,5,5 can split.
  rmt::write_file_atomic(dir / "small.txt", std::string(40, 'a'));
  CHECK(generate_text_dataset(r).meta.counts == std::array<int64_t, 3>{36, 2, 2});
  fs::remove_all(dir);
}

TEST_CASE("text data check catches corrupt, truncated, missing and inconsistent files") {
  const fs::path dir = fresh_dir("rmt_test_text", "check");
  const std::string src = source_bytes(2000);
  const std::string d = make_dataset(dir, src);
  const fs::path fresh = dir / "fresh";
  fs::copy(d, fresh);
  auto reset = [&] {
    fs::remove_all(d);
    fs::copy(fresh, d);
  };
  auto violations = [&] {
    const TextCheckResult c = check_text_dataset(d);
    CHECK(!c.ok);
    return joined(c.violations);
  };
  SUBCASE("a flipped byte") {
    std::string f = rmt::read_file(text_split_file(d, "val"));
    f[f.size() - 3] ^= 0x20;
    rmt::write_file_atomic(text_split_file(d, "val"), f);
    CHECK(violations().find("text_val.npy: sha256 differs from meta.yaml") != std::string::npos);
    const TextMeta m = read_text_meta(d);
    CHECK(error_of([&] { load_text_split(d, m, "val"); }).find("text_val.npy: sha256 differs") != std::string::npos);
    CHECK(error_of([&] { load_text_meta(d); }).find("is not a valid dataset") != std::string::npos);
    // The other splits still load.
    CHECK(load_text_split(d, m, "train").size() == 1800);
  }
  SUBCASE("a truncated file") {
    std::string f = rmt::read_file(text_split_file(d, "train"));
    f.resize(f.size() - 10);
    rmt::write_file_atomic(text_split_file(d, "train"), f);
    CHECK(violations().find("text_train.npy: shape [1800] needs 1800 bytes of data, the file holds 1790 (truncated") !=
          std::string::npos);
  }
  SUBCASE("a missing file") {
    fs::remove(text_split_file(d, "test"));
    CHECK(violations().find("text_test.npy: missing split file") != std::string::npos);
  }
  SUBCASE("a split of int64") {
    std::vector<int64_t> ids(100, 65);
    rmt::write_npy_int64(text_split_file(d, "val"), {100}, ids.data());
    CHECK(violations().find("dtype is int64 (<i8), expected uint8 (|u1)") != std::string::npos);
  }
  SUBCASE("splits swapped: sizes and sums hold per file only by accident, never together") {
    fs::rename(text_split_file(d, "val"), dir / "tmp.npy");
    fs::rename(text_split_file(d, "test"), text_split_file(d, "val"));
    fs::rename(dir / "tmp.npy", text_split_file(d, "test"));
    const std::string v = violations();
    CHECK(v.find("text_val.npy: sha256 differs") != std::string::npos);
    CHECK(v.find("text_test.npy: sha256 differs") != std::string::npos);
  }
  SUBCASE("a file and its sum both changed: the splits no longer put back the source") {
    std::string f = rmt::read_file(text_split_file(d, "test"));
    const std::string old_sum = sha256_hex(f);
    f.back() ^= 1;
    rmt::write_file_atomic(text_split_file(d, "test"), f);
    edit_meta(d, old_sum, sha256_hex(f));
    CHECK(violations().find("train + val + test do not put back the source") != std::string::npos);
  }
  SUBCASE("counts that the shares do not give") {
    edit_meta(d, "val: 100", "val: 101");
    const std::string v = violations();
    CHECK(v.find("counts.val is 101, but split 90,5,5 of source.used 2000 bytes gives 100") != std::string::npos);
    CHECK(v.find("text_val.npy: shape is [100], but meta.yaml counts 101 bytes") != std::string::npos);
  }
  SUBCASE("shares that do not sum to 100") {
    edit_meta(d, "train: 90", "train: 89");
    CHECK(violations().find("split 89,5,5 sums to 99") != std::string::npos);
  }
  SUBCASE("used beyond the source") {
    edit_meta(d, "size: 2000", "size: 1999");
    CHECK(violations().find("source.used is 2000, more than source.size 1999") != std::string::npos);
  }
  SUBCASE("meta.yaml that cannot be read") {
    edit_meta(d, "vocab_size: 256", "vocab_size: 255");
    CHECK(error_of([&] { check_text_dataset(d); }).find("'vocab_size' is 255, but a byte-level dataset has 256") !=
          std::string::npos);
    reset();
    edit_meta(d, "generator_version: 1", "generator_version: 2");
    CHECK(error_of([&] { check_text_dataset(d); }).find("this rmt reads version 1") != std::string::npos);
    reset();
    edit_meta(d, "task: text", "task: copy");
    CHECK(error_of([&] { check_text_dataset(d); }).find("'task' is 'copy'") != std::string::npos);
    reset();
    edit_meta(d, "  used: 2000\n", "");
    CHECK(error_of([&] { check_text_dataset(d); }).find("missing key 'source.used'") != std::string::npos);
  }
  SUBCASE("a text dataset asked for samples names what it is; the algorithmic readers refuse it") {
    CHECK(error_of([&] { dataset_family(d).samples_meta(d); }).find("is a byte-level text dataset") != std::string::npos);
    CHECK(!error_of([&] { read_dataset_meta(d); }).empty());
    CHECK(!error_of([&] { load_dataset_meta(d); }).empty());
    CHECK(!error_of([&] { show_samples(d, "train", 2); }).empty());
  }
  reset();
  CHECK(check_text_dataset(d).ok);
  fs::remove_all(dir);
}

TEST_CASE("text display: printable text and UTF-8 kept, everything else escaped") {
  auto esc = [](const std::string& s) {
    return escape_text_bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  CHECK(esc("a b\\c\n[[x]]") == "a b\\c\n[[x]]");
  CHECK(esc("a\tb\rc") == "a\\tb\\rc");
  CHECK(esc(std::string("\x00\x01\x1b[31m\x7f", 8)) == "\\x00\\x01\\x1b[31m\\x7f");
  CHECK(esc("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(esc("\xc3") == "\\xc3");                  // cut at the end
  CHECK(esc("\xc3(") == "\\xc3(");                // not a continuation byte
  CHECK(esc("\xc0\x80") == "\\xc0\\x80");         // overlong
  CHECK(esc("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(esc("\xc2\x85") == "\\xc2\\x85");         // C1 control (NEL)
  CHECK(esc("\xe2\x80\xae") == "\\xe2\\x80\\xae");  // right-to-left override
  CHECK(esc("\xff\xfe") == "\\xff\\xfe");

  const fs::path dir = fresh_dir("rmt_test_text", "show");
  std::string src(100, 'x');
  src.replace(90, 4, "V\x01\nW");  // val starts at byte 90
  const std::string d = make_dataset(dir, src);
  const std::string all = joined(show_text(d, {"train", "val", "test"}, 3));
  CHECK(all.find("text train split: 90 bytes (bytes 0..89 of src.bin); the first 3:\n  | xxx\n  ... 87 more bytes") !=
        std::string::npos);
  CHECK(all.find("text val split: 5 bytes (bytes 90..94 of src.bin); the first 3:\n  | V\\x01\n  | \n  ... 2 more") !=
        std::string::npos);
  const std::string val = joined(show_text(d, {"val"}, 100));
  CHECK(val.find("the first") == std::string::npos);
  CHECK(val.find("  | V\\x01\n  | Wx\n") != std::string::npos);
  CHECK(val.find("text train") == std::string::npos);
  CHECK(error_of([&] { show_text(d, {"dev"}, 5); }).find("unknown split 'dev'") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("LM batching: B contiguous streams, remainder dropped, targets the next byte") {
  std::vector<uint8_t> bytes(103);
  for (size_t i = 0; i < bytes.size(); i++) bytes[i] = uint8_t(i);
  const TextStreams s = make_text_streams(bytes, 4);
  CHECK(s.batch == 4);
  CHECK(s.length == 25);  // floor(103 / 4); bytes 100..102 dropped
  CHECK(s.bytes.size() == 100);
  CHECK(text_scored_positions(s) == 4 * 24);
  // T = 10: 24 target positions per stream -> segments of 10, 10 and a last one of 4.
  CHECK(text_segment_count(s, 10) == 3);
  CHECK(text_full_segments(s, 10) == 2);
  CHECK(text_segment_count(s, 8) == 3);
  CHECK(text_full_segments(s, 8) == 3);
  CHECK(text_segment_count(s, 24) == 1);
  CHECK(text_segment_count(s, 100) == 1);
  std::vector<std::vector<int32_t>> inputs(4), targets(4);  // per stream, over all segments
  int64_t positions = 0;
  for (int64_t k = 0; k < text_segment_count(s, 10); k++) {
    const TextSegment seg = text_segment(s, 10, k);
    CHECK(seg.batch == 4);
    CHECK(seg.len == (k < 2 ? 10 : 4));
    REQUIRE(seg.input.size() == size_t(4 * seg.len));
    REQUIRE(seg.target.size() == size_t(4 * seg.len));
    positions += int64_t(seg.input.size());
    for (int b = 0; b < 4; b++)
      for (int t = 0; t < seg.len; t++) {
        const int32_t in = seg.input[size_t(b * seg.len + t)], tg = seg.target[size_t(b * seg.len + t)];
        // Stream b is bytes [25b, 25b + 25); segment k starts at 10k.
        CHECK(in == 25 * b + 10 * k + t);
        CHECK(tg == in + 1);
        if (t + 1 < seg.len) CHECK(tg == seg.input[size_t(b * seg.len + t + 1)]);
        inputs[size_t(b)].push_back(in);
        targets[size_t(b)].push_back(tg);
      }
  }
  CHECK(positions == text_scored_positions(s));
  for (int b = 0; b < 4; b++) {
    // Over the segments every stream is read once, in order: inputs 0..L-2, targets 1..L-1.
    REQUIRE(inputs[size_t(b)].size() == 24);
    for (int i = 0; i < 24; i++) {
      CHECK(inputs[size_t(b)][size_t(i)] == 25 * b + i);
      CHECK(targets[size_t(b)][size_t(i)] == 25 * b + i + 1);
    }
  }
  // Deterministic: the same call gives the same arrays.
  const TextSegment a = text_segment(s, 7, 2), b2 = text_segment(s, 7, 2);
  CHECK(a.input == b2.input);
  CHECK(a.target == b2.target);
  // Values above 127 stay positive (bytes are unsigned).
  const TextStreams high = make_text_streams({250, 251, 252, 253, 254, 255}, 2);
  const TextSegment h = text_segment(high, 5, 0);
  CHECK(h.len == 2);
  CHECK(h.input == std::vector<int32_t>{250, 251, 253, 254});
  CHECK(h.target == std::vector<int32_t>{251, 252, 254, 255});
  // Errors.
  CHECK(error_of([&] { text_segment(s, 10, 3); }).find("segment 3 does not exist") != std::string::npos);
  CHECK(error_of([&] { text_segment(s, 10, -1); }).find("segment -1 does not exist") != std::string::npos);
  CHECK(error_of([&] { text_segment_count(s, 0); }).find("segment length must be at least 1") != std::string::npos);
  CHECK(error_of([&] { make_text_streams(bytes, 0); }).find("batch size must be at least 1") != std::string::npos);
  CHECK(error_of([&] { make_text_streams(bytes, 52, "the val split"); })
            .find("the val split has 103 bytes: 52 streams of 1 byte each, but a stream needs at least 2") !=
        std::string::npos);
  CHECK(make_text_streams(bytes, 51).length == 2);
}

TEST_CASE("rmt generate text, data check, data show through the CLI") {
  const fs::path dir = fresh_dir("rmt_test_text", "cli");
  rmt::write_file_atomic(dir / "corpus.txt", "The quick brown fox jumps over the lazy dog.\n" + std::string(955, '.'));
  const std::string d = (dir / "d").string();
  Run g = rmt_run("generate text --input " + (dir / "corpus.txt").string() + " --out " + d);
  CHECK_MESSAGE(g.status == 0, g.output);
  CHECK(g.output.find("(1000 bytes, split 90,5,5): train 900, val 50, test 50 bytes") != std::string::npos);
  Run c = rmt_run("data check " + d);
  CHECK_MESSAGE(c.status == 0, c.output);
  CHECK(c.output.find("text test: OK 50 bytes (bytes 950..999 of corpus.txt), uint8, sha256 ok") != std::string::npos);
  Run s = rmt_run("data show " + d + " --bytes 20");
  CHECK_MESSAGE(s.status == 0, s.output);
  CHECK(s.output.find("  | The quick brown fox \n") != std::string::npos);
  CHECK(s.output.find("text test split") != std::string::npos);
  Run one = rmt_run("data show " + d + " --split val");
  CHECK(one.output.find("text val split: 50 bytes") != std::string::npos);
  CHECK(one.output.find("text train split") == std::string::npos);
  Run split = rmt_run("generate text --input " + (dir / "corpus.txt").string() + " --out " + d +
                      " --split 50,25,25 --bytes 400 --force");
  CHECK_MESSAGE(split.status == 0, split.output);
  CHECK(split.output.find("(400 bytes of 1000, split 50,25,25): train 200, val 100, test 100 bytes") !=
        std::string::npos);
  CHECK(rmt_run("data check " + d).status == 0);
  fs::remove_all(dir);
}
