#pragma once
// Byte-level text datasets (`rmt generate text`, docs/paper.md §7) and Transformer-XL's LM
// batching over them.
//
// A dataset directory holds meta.yaml and one 1-D uint8 .npy file per split,
// text_{train,val,test}.npy: the split's bytes in file order (np.load reads them). By default the
// first 90% of the source file is train, the next 5% val, the last 5% test: enwik8's convention,
// which gives its 90M / 5M / 5M from the 10^8-byte file. Tokens are bytes, the vocabulary 256.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tasks/dataset.h"

namespace rmt {

constexpr int kTextVocab = 256;            // one token per byte value
constexpr int kTextGeneratorVersion = 1;   // meta.yaml generator_version; bump if the files change
constexpr int kTextMinSplitBytes = 2;      // one input byte and its next-byte target

// Shares of the source (percent, in the order train, val, test); each >= 1, summing to 100.
using TextShares = std::array<int, 3>;
constexpr TextShares kEnwik8Shares = {90, 5, 5};
// "90,5,5" -> {90, 5, 5}; fails naming --split unless three integers >= 1 that sum to 100.
TextShares parse_text_shares(const std::string& text);
// Bytes of each split of an n-byte source: val and test get floor(n * share / 100), train the
// rest (as Transformer-XL's enwik8 preparation fixes val and test and gives train what is left),
// so the three always add up to n and the splits are contiguous: train = [0, train),
// val = [train, train + val), test = the last `test` bytes.
std::array<int64_t, 3> text_split_sizes(int64_t n, const TextShares& shares);

struct TextMeta {
  std::string source_file;       // the source's file name (no directory)
  int64_t source_size = 0;       // bytes of the source file
  int64_t used = 0;              // bytes used: the first `used` bytes of the source (all by default)
  std::string source_sha256;     // sha256 of those `used` bytes (of the whole file when used == size)
  TextShares shares = kEnwik8Shares;
  std::array<int64_t, 3> counts = {0, 0, 0};                // bytes per split: train, val, test
  std::vector<std::pair<std::string, std::string>> sha256;  // split file name -> sha256 of the file
  int generator_version = kTextGeneratorVersion;
};

// DIR/meta.yaml declares kind: text (read loosely: false when it is missing or not YAML, so the
// algorithmic reader reports what is wrong with it).
bool is_text_dataset(const std::string& dir);
// DIR/text_{split}.npy.
std::string text_split_file(const std::string& dir, const std::string& split);

struct TextGenerateRequest {
  std::string input;                // the source file
  std::string out_dir;
  TextShares shares = kEnwik8Shares;
  std::optional<int64_t> bytes;     // use only the first N bytes of input (enwik8 is a prefix too)
  bool force = false;               // overwrite existing dataset files in out_dir
  bool check_only = false;          // check the input and what writing would need; write nothing
};
struct TextGenerateResult {
  TextMeta meta;
  std::vector<std::string> files;   // written, meta.yaml last
  double seconds = 0;
};
// Reads the source once (holding one split in memory at a time), writes the three split files
// atomically, then meta.yaml. Fails before writing anything on a missing, empty or non-regular
// input, too few bytes for the shares (every split needs kTextMinSplitBytes), --bytes beyond the
// file, or existing files without `force`.
TextGenerateResult generate_text_dataset(const TextGenerateRequest& request);

// DIR/meta.yaml of a text dataset, read strictly: every key known, present once and of its type.
// Consistency with the files is check_text_dataset's.
TextMeta read_text_meta(const std::string& dir);

struct TextCheckResult {
  bool ok = true;
  std::vector<std::string> summary;     // one line per split, then one for the source
  std::vector<std::string> violations;  // "file: what is wrong"
};
// `rmt data check DIR` for a text dataset: meta.yaml's values agree with each other (shares sum
// to 100, counts are what the shares give for `used`, used <= source size, vocabulary 256), each
// split file is a 1-D uint8 .npy whose length is its count and whose sha256 is meta.yaml's, and
// the three splits put back together are the source bytes (their sha256 is source.sha256).
// Fails (rmt::Error) only when meta.yaml cannot be read at all.
TextCheckResult check_text_dataset(const std::string& dir);

// The meta of a text dataset that passes check_text_dataset; fails with its message otherwise.
// Reads every byte once (about 0.5 s for enwik8).
TextMeta load_text_meta(const std::string& dir);
// One split's bytes (split: train, val or test), checked against meta: 1-D uint8, its count of
// bytes, its sha256. Fails naming the file otherwise.
std::vector<uint8_t> load_text_split(const std::string& dir, const TextMeta& meta, const std::string& split);
// 64 hex digits identifying the data: sha256 over the names and sha256 sums of the three split
// files, computed from the files (what dataset_fingerprint gives for a text dataset).
std::string text_dataset_fingerprint(const std::string& dir);

// `rmt data show DIR` for a text dataset: for each split in `splits`, a header line (bytes, where
// it lies in the source) and its first `bytes` bytes as text, each line behind "  | ".
std::vector<std::string> show_text(const std::string& dir, const std::vector<std::string>& splits, int64_t bytes);
// The escaping show_text uses, for `n` bytes: printable ASCII and valid UTF-8 as they are (a
// backslash too, for readability), \n as a line break, \t and \r as such, every other byte as
// \xNN (controls, DEL, bytes of invalid or cut UTF-8, and UTF-8 that a terminal would not show
// as a glyph: C1 controls, zero-width and direction marks, line separators, the BOM).
std::string escape_text_bytes(const uint8_t* data, size_t n);
// A text dataset as a run sees it: task and kind "text", the 256 byte values (escaped) as its
// vocabulary. What a language model's checkpoint checks and messages name; its data is the
// streams of the split files (load_text_meta), not samples.
DatasetMeta text_dataset_meta();

// ---- Transformer-XL's LM batching (its LMOrderedIterator) ----------------------------------
// A split of n bytes becomes `batch` (B) parallel streams of length L = floor(n / B): stream b is
// bytes [b*L, (b+1)*L); the last n - B*L bytes are dropped. Segment s of length T takes, from
// every stream, the inputs at positions [s*T, s*T + len) and as targets the next bytes, positions
// [s*T + 1, s*T + len + 1). The segments cover every target position of a stream (1 .. L-1) once,
// in order, so the cache or memory that segment s leaves is the context of segment s+1. All
// segments have len = T except the last, which is shorter when T does not divide L - 1 (it is
// kept, as in Transformer-XL, so an evaluation scores every position; training that wants fixed
// shapes uses the first text_full_segments). Pure: a function of (bytes, B, T, s) only.
struct TextStreams {
  std::vector<uint8_t> bytes;  // the split; stream b is bytes[b*length, (b+1)*length)
  int batch = 0;               // B
  int64_t length = 0;          // L >= 2
};
// Fails unless batch >= 1 and each stream gets at least 2 bytes (names `what`, e.g. "the val
// split", and the sizes).
TextStreams make_text_streams(std::vector<uint8_t> bytes, int batch, const std::string& what = "the split");
// Segments of length seg_len (T >= 1): ceil((L - 1) / T), the last possibly shorter.
int64_t text_segment_count(const TextStreams& streams, int seg_len);
// Segments of exactly seg_len positions: floor((L - 1) / T).
int64_t text_full_segments(const TextStreams& streams, int seg_len);
// Target positions over all segments: B * (L - 1), what a loss summed over the split divides by.
int64_t text_scored_positions(const TextStreams& streams);

struct TextSegment {
  int batch = 0;                      // B
  int len = 0;                        // positions: seg_len, or fewer for the last segment
  std::vector<int32_t> input, target; // [B, len] row-major; target[b][t] is input[b][t]'s next byte
};
// Segment `index` (0 .. text_segment_count - 1) of every stream; fails outside that range.
TextSegment text_segment(const TextStreams& streams, int seg_len, int64_t index);

}  // namespace rmt
