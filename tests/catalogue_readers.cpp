// The catalogue of bad inputs (tests/catalogue.h) for the file and text readers: npy arrays,
// safetensors checkpoints, config YAML and --set, sweep files and their derive: expressions,
// results.csv and the paper YAML of `rmt table`. Each goes through the subcommand a user runs.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>

#include "lib/files/io.h"
#include "tests/catalogue.h"
#include "tests/cli.h"

namespace fs = std::filesystem;

namespace {

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A .npy file spelled out: version 1.0 header padded like numpy's, then the data bytes.
std::string npy(const std::string& dict, const std::string& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  return out + header + data;
}
std::string npy_dict(const std::string& descr, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}
std::string zeros(size_t n) { return std::string(n, '\0'); }

// A safetensors file spelled out: 8-byte little-endian header size, header, data.
std::string safetensors(const std::string& header, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out += char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  return out + header + data;
}

// A tiny generated dataset (copy of 5 symbols): DIR/data.
void tiny_data(const std::string& dir) {
  Run g = rmt_run("generate copy --length 5 --symbols 4 --train 24 --val 8 --test 8 --out " + dir + "/data");
  REQUIRE_MESSAGE(g.status == 0, g.output);
}

// One tiny trained run shared by the checkpoint cases (made once, a couple of steps): linked into
// each case's directory as DIR/run.
std::string shared_run() {
  static std::string run;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string root = fresh_tmp("rmt_catalogue_readers", "shared");
    fs::create_directories(root);
    tiny_data(root);
    write(root + "/tiny.yaml", "data: " + root + "/data\nsegments: 2\n"
                               "model: {kind: rmt, n_layer: 1, n_head: 1, d_head: 4, d_model: 4, d_inner: 8, "
                               "dropout: 0.0, num_mem_tokens: 2}\n"
                               "train: {batch_size: 4, max_steps: 2, eval_every: 2, log_every: 1, threads: 1}\n");
    Run t = rmt_run("train --config " + root + "/tiny.yaml --out " + root + "/run");
    REQUIRE_MESSAGE(t.status == 0, t.output);
    run = root + "/run";
  });
  return run;
}

// DIR/run (the shared run) and DIR/bad.safetensors made by `make` from the run's checkpoint.
template <typename Make>
std::function<void(const std::string&)> checkpoint_case(Make make) {
  return [make](const std::string& dir) {
    const std::string run = shared_run();
    fs::create_directory_symlink(run, dir + "/run");
    write(dir + "/bad.safetensors", make(rmt::read_file(run + "/last.safetensors")));
  };
}
const char* kEvalBad = "eval --run {dir}/run --checkpoint {dir}/bad.safetensors";

// DIR/run (the shared run) and DIR/ids.npy, for `rmt step-dump --input`.
std::function<void(const std::string&)> ids_case(std::string bytes) {
  return [bytes](const std::string& dir) {
    fs::create_directory_symlink(shared_run(), dir + "/run");
    write(dir + "/ids.npy", bytes);
    write(dir + "/ok.npy", npy(npy_dict("<i8", "(1, 4)"), zeros(32)));
  };
}
const char* kStepDump = "step-dump --checkpoint {dir}/run/last.safetensors --input {dir}/ids.npy --target {dir}/ok.npy "
                        "--answer-size 1 --out {dir}/out";

// A generated dataset whose file NAME is replaced by `bytes`.
std::function<void(const std::string&)> dataset_case(std::string name, std::string bytes) {
  return [name, bytes](const std::string& dir) {
    tiny_data(dir);
    write(dir + "/data/" + name, bytes);
  };
}

std::function<void(const std::string&)> file_case(std::string name, std::string text) {
  return [name, text](const std::string& dir) { write(dir + "/" + name, text); };
}

const std::string kCsvHeader =
    "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,"
    "acc_teacher_forced,acc_free_running,solve_rate,loss,run_id,status,steps,wall_time_s,git_commit,threads,error\n";
const std::string kCsvRow = "baseline,1,0,0,all,1,36,1.0,0.9,,0.1,b1,done,10,1.0,abc,1,\n";

// A results.csv that reads well, and a paper YAML `text` beside it.
std::function<void(const std::string&)> paper_case(std::string text) {
  return [text](const std::string& dir) {
    fs::create_directories(dir + "/quick_copy");
    write(dir + "/quick_copy/results.csv", kCsvHeader + kCsvRow);
    write(dir + "/paper.yaml", text);
  };
}
const char* kTablePaper = "table {dir}/quick_copy/results.csv --paper {dir}/paper.yaml";

const std::string kSweepData = "data: {task: copy, length: 6, symbols: 10}\n";
const char* kSweepDry = "sweep {dir}/s.yaml --dry-run --runs-dir {dir}/runs";

}  // namespace

RMT_CATALOGUE({
    // ---- npy: header, dtype, shape and size are checked before any element is read ----------
    {"npy", "declared shape whose element count overflows", dataset_case("copy_train_X.npy",
         npy(npy_dict("<i8", "(1099511627776, 1099511627776, 1099511627776)"), zeros(64))),
     "data check {dir}/data", 1, "declares more elements than any file can hold (the count overflows)"},
    {"npy", "shape x item size overflows", dataset_case("copy_val_y.npy",
         npy(npy_dict("<i8", "(2305843009213693952,)"), zeros(8))),
     "data show {dir}/data --split val", 1, "copy_val_y.npy: npy shape [2305843009213693952] declares more elements"},
    {"npy", "truncated data", ids_case(npy(npy_dict("<i8", "(1, 4)"), zeros(20))), kStepDump, 1,
     "ids.npy: truncated npy data: shape [1, 4] of int64 needs 32 bytes, the file has 20"},
    {"npy", "bytes beyond the shape", ids_case(npy(npy_dict("<i8", "(1, 4)"), zeros(48))), kStepDump, 1,
     "ids.npy: npy header/shape mismatch: 16 bytes beyond the data that shape [1, 4] of int64 describes"},
    {"npy", "not an npy file", dataset_case("copy_train_X.npy", "PK\x03\x04 a zip file, not an array"),
     "data check {dir}/data", 1, "copy_train_X.npy: not a .npy file (bad magic)"},
    {"npy", "corrupt 4 GiB header length", dataset_case("copy_train_X.npy", std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff", 12)),
     "data check {dir}/data", 1, "copy_train_X.npy: corrupt npy header: header length 4294967295 bytes"},
    {"npy", "header that is not a dict", dataset_case("copy_train_X.npy", npy("descr <i8 shape 2 3", zeros(48))),
     "data check {dir}/data", 1, "copy_train_X.npy: corrupt npy header: not a dictionary"},
    {"npy", "unsupported dtype", dataset_case("copy_train_X.npy", npy(npy_dict("<c16", "(24, 11)"), "")),
     "data check {dir}/data", 1, "unsupported npy dtype '<c16' (supported: <i8, <i4, |u1, <f4)"},
    {"npy", "ids of dtype float32", ids_case(npy(npy_dict("<f4", "(1, 4)"), zeros(16))), kStepDump, 1,
     "ids.npy: dtype float32, expected integer token ids"},
    {"npy", "ids of shape [N, 0]", ids_case(npy(npy_dict("<i8", "(1, 0)"), "")), kStepDump, 1,
     "ids.npy: shape [1, 0] has rows of no elements; expected at least one column"},
    {"npy", "ids of one dimension", ids_case(npy(npy_dict("<i8", "(4,)"), zeros(32))), kStepDump, 1,
     "ids.npy: expected a 2-D array [rows, columns], found shape [4]"},
    {"npy", "float32 ids with an overflowing shape", ids_case(npy(npy_dict("<f4", "(4611686018427387904, 4)"), "")),
     kStepDump, 1, "ids.npy: npy shape [4611686018427387904, 4] declares more elements"},
    {"npy", "malformed shape tuple", ids_case(npy(npy_dict("<i8", "(1 4)"), zeros(32))), kStepDump, 1,
     "ids.npy: malformed npy shape (expected ',' or ')')"},

    // ---- safetensors: `rmt eval --checkpoint FILE` ------------------------------------------
    {"safetensors", "empty file", checkpoint_case([](const std::string&) { return std::string(); }), kEvalBad, 1,
     "bad.safetensors: not a safetensors file: 0 bytes"},
    {"safetensors", "checkpoint missing its last bytes", checkpoint_case([](const std::string& ck) { return ck.substr(0, ck.size() - 4); }),
     kEvalBad, 1, "lies outside the data section"},
    {"safetensors", "bytes appended to a checkpoint", checkpoint_case([](const std::string& ck) { return ck + "garbage!"; }),
     kEvalBad, 1, "bad.safetensors: corrupt safetensors file: 8 bytes after the last tensor's data"},
    {"safetensors", "header size field absurd", checkpoint_case([](std::string ck) {
       ck[7] = '\x7f';
       return ck;
     }), kEvalBad, 1, "is absurd (> 100 MB)"},
    {"safetensors", "header size beyond the file", checkpoint_case([](const std::string&) {
       return std::string("\x00\x10\x00\x00\x00\x00\x00\x00{}", 10);
     }), kEvalBad, 1, "header size 4096 is larger than the file (10 bytes)"},
    {"safetensors", "header not JSON", checkpoint_case([](const std::string&) { return safetensors("{not json at all}", ""); }),
     kEvalBad, 1, "bad.safetensors: corrupt safetensors file: header is not valid JSON"},
    {"safetensors", "header a JSON list", checkpoint_case([](const std::string&) { return safetensors("[1, 2]", ""); }),
     kEvalBad, 1, "corrupt safetensors file: header is not a JSON object (it does not start with '{')"},
    {"safetensors", "unsupported dtype", checkpoint_case([](const std::string&) {
       return safetensors(R"({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", zeros(8));
     }), kEvalBad, 1, "tensor 'w': unsupported dtype 'I64' (rmt reads F32, F64, F16, BF16)"},
    {"safetensors", "offsets past the data", checkpoint_case([](const std::string&) {
       return safetensors(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [18446744073709551608, 0]}})", zeros(8));
     }), kEvalBad, 1, "tensor 'w': byte range [18446744073709551608, 0) lies outside the data section (8 bytes)"},
    {"safetensors", "overlapping tensors", checkpoint_case([](const std::string&) {
       return safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                          R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", zeros(8));
     }), kEvalBad, 1, "tensors 'a' and 'b' overlap"},
    {"safetensors", "gap between tensors", checkpoint_case([](const std::string&) {
       return safetensors(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                          R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", zeros(12));
     }), kEvalBad, 1, "bytes [4, 8) of the data section belong to no tensor (before 'b')"},
    {"safetensors", "duplicate tensor name", checkpoint_case([](const std::string&) {
       return safetensors(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                          R"( "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", zeros(8));
     }), kEvalBad, 1, "'a' appears twice in the header"},
    {"safetensors", "shape and byte range disagree", checkpoint_case([](const std::string&) {
       return safetensors(R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", zeros(8));
     }), kEvalBad, 1, "byte range [0, 8) holds 8 bytes but shape [3] of F32 needs 12"},
    {"safetensors", "shape whose element count overflows", checkpoint_case([](const std::string&) {
       return safetensors(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", zeros(8));
     }), kEvalBad, 1, "needs more bytes than the data section holds"},
    {"safetensors", "metadata not strings", checkpoint_case([](const std::string&) {
       return safetensors(R"({"__metadata__": {"step": [5]}})", "");
     }), kEvalBad, 1, "metadata value for 'step' is not a string: a list of 1 items"},

    // ---- config YAML: `rmt train --config` and a run's config.yaml ---------------------------
    {"config", "malformed YAML", file_case("c.yaml", "model: {kind: rmt\n"), "train --config {dir}/c.yaml --out {dir}/o",
     1, "c.yaml: malformed YAML at line"},
    {"config", "nesting too deep for yaml-cpp", file_case("c.yaml", "model: " + std::string(3000, '[') + "\n"),
     "train --config {dir}/c.yaml --out {dir}/o", 1, "c.yaml: malformed YAML"},
    {"config", "key given twice", file_case("c.yaml", "segments: 2\nsegments: 3\n"), "train --config {dir}/c.yaml --out {dir}/o",
     1, "c.yaml: key 'segments' is given twice"},
    {"config", "integer beyond int", file_case("c.yaml", "model: {n_layer: 99999999999}\n"),
     "train --config {dir}/c.yaml --out {dir}/o", 1,
     "invalid value '99999999999' for 'model.n_layer': expected an integer >= 1 (at most 2147483647)"},
    {"config", "list for a number", file_case("c.yaml", "train: {lr: [1, 2]}\n"), "train --config {dir}/c.yaml --out {dir}/o",
     1, "c.yaml: invalid value (a list) for 'train.lr'"},
    {"config", "key that is a list", file_case("c.yaml", "model: {[a, b]: 1}\n"), "train --config {dir}/c.yaml --out {dir}/o",
     1, "c.yaml: keys must be plain names, got (a list) under 'model'"},
    {"config", "run's config.yaml corrupt", [](const std::string& dir) {
       fs::create_directories(dir + "/run");
       write(dir + "/run/config.yaml", "data: x\nmodel:\n  kind: rmt\n n_layer: 2\n");
     }, "eval --run {dir}/run", 1, "run/config.yaml: malformed YAML at line 4"},

    // ---- --set -------------------------------------------------------------------------------
    {"--set", "no '='", nullptr, "train --set model.n_layer --out {dir}/o", 1, "--set model.n_layer: expected key=value"},
    {"--set", "empty key", nullptr, "train --set ' =3' --out {dir}/o", 1, "--set  =3: expected key=value"},
    {"--set", "malformed YAML value", nullptr, "train --set 'model.kind={' --out {dir}/o", 1, "--set model.kind={: malformed value"},
    {"--set", "unknown key", nullptr, "train --set model.n_layers=2 --out {dir}/o", 1,
     "--set model.n_layers=2: unknown key 'model.n_layers' (did you mean 'model.n_layer'?)"},
    {"--set", "huge value", nullptr, "train --set train.batch_size=1e99 --out {dir}/o", 1,
     "--set train.batch_size=1e99: invalid value '1e99' for 'train.batch_size'"},
    {"--set", "a section", nullptr, "train --set train=3 --out {dir}/o", 1, "'train' is a section, not a value"},

    // ---- sweep files: `rmt sweep --dry-run` --------------------------------------------------
    {"sweep", "malformed YAML", file_case("s.yaml", kSweepData + "grid: {segments: [1, 2}\n"), kSweepDry, 1,
     "s.yaml: malformed YAML at line"},
    {"sweep", "section given twice", file_case("s.yaml", kSweepData + "grid: {segments: [1]}\ngrid: {segments: [2]}\n"),
     kSweepDry, 1, "s.yaml: section 'grid' is given twice"},
    {"sweep", "grid key given twice", file_case("s.yaml", kSweepData + "grid: {segments: [1], segments: [2]}\n"), kSweepDry, 1,
     "s.yaml: grid.segments: given twice"},
    {"sweep", "data option beyond int", file_case("s.yaml", "data: {task: copy, length: 99999999999}\ngrid: {segments: [1]}\n"),
     kSweepDry, 1, "invalid value '99999999999' for data option 'length': expected an integer in [1, 100000]"},
    {"sweep", "key that is a mapping", file_case("s.yaml", kSweepData + "grid: {{a: 1}: [1]}\n"), kSweepDry, 1,
     "s.yaml: grid: keys must be plain names, got a mapping"},
    {"sweep", "grid value that is a list", file_case("s.yaml", kSweepData + "grid: {segments: [[1, 2]]}\n"), kSweepDry, 1,
     "s.yaml: grid.segments: expected a single value, got a list"},
    {"sweep", "--dry-run with a device this build lacks (the real sweep refuses it)",
     file_case("s.yaml", kSweepData + "grid: {segments: [1], device: [nosuch]}\n"), kSweepDry, 1,
     "unknown device 'nosuch'"},
    {"sweep", "--dry-run with data that cannot be generated (the real sweep fails generating it)",
     file_case("s.yaml", "data: {task: copy, length: 2, symbols: 2, train: 10}\ngrid: {segments: [1]}\n"), kSweepDry, 1,
     "generating {dir}/runs/s/data would fail: rmt: error: --train 10 is more than copy has"},

    // ---- derive: expressions -----------------------------------------------------------------
    {"derive", "INT64_MIN / -1 (was SIGFPE)", file_case("s.yaml", kSweepData +
         "grid: {segments: [1]}\nderive: {model.num_mem_tokens: (0 - 9223372036854775807 - 1) / (0 - 1)}\n"),
     kSweepDry, 1, "s.yaml: derive.model.num_mem_tokens: integer overflow in '/'"},
    {"derive", "multiplication overflow", file_case("s.yaml", kSweepData +
         "grid: {segments: [1]}\nderive: {model.mem_len: seq_len * 9223372036854775807}\n"),
     kSweepDry, 1, "s.yaml: derive.model.mem_len: integer overflow in '*'"},
    {"derive", "division by zero at one grid point", file_case("s.yaml", kSweepData +
         "grid: {segments: [1, 2]}\nderive: {train.batch_size: 8 / (segments - 1)}\n"),
     kSweepDry, 1, "s.yaml: derive.train.batch_size: division by zero in expression '8 / (segments - 1)' at column 3 (with "},
    {"derive", "parentheses nested 100000 deep", file_case("s.yaml", kSweepData + "grid: {segments: [1]}\nderive: {model.mem_len: '" +
         std::string(100000, '(') + "1" + std::string(100000, ')') + "'}\n"),
     kSweepDry, 1, "s.yaml: derive.model.mem_len: nesting deeper than 64 levels"},
    {"derive", "literal beyond int64", file_case("s.yaml", kSweepData +
         "grid: {segments: [1]}\nderive: {model.mem_len: 99999999999999999999}\n"),
     kSweepDry, 1, "integer literal too large"},
    {"derive", "value beyond the key's range", file_case("s.yaml", kSweepData +
         "grid: {segments: [1]}\nderive: {model.mem_len: seq_len * 1000000000}\n"),
     kSweepDry, 1, "for 'model.mem_len': expected a non-negative integer (at most 2147483647)"},
    {"derive", "unknown name", file_case("s.yaml", kSweepData + "grid: {segments: [1]}\nderive: {model.mem_len: seglen}\n"),
     kSweepDry, 1, "s.yaml: derive.model.mem_len: unknown name 'seglen'"},

    // ---- results.csv: `rmt table` ------------------------------------------------------------
    {"results.csv", "language-model and algorithmic runs in one file",
     file_case("r.csv", "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,"
                        "acc_teacher_forced,loss,bpc,run_id,status\n"
                        "baseline,1,0,0,all,1,36,1.0,0.1,,b1,done\nbaseline,1,0,0,all,1,128,0.4,1.7,2.45,l1,done\n"),
     "table {dir}/r.csv", 1, "mixes 1 language-model run(s) (with bpc) and 1 algorithmic run(s) (without)"},
    {"results.csv", "plot of language-model and algorithmic runs in one file",
     file_case("r.csv", "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,segment_length,"
                        "acc_teacher_forced,loss,bpc,run_id,status\n"
                        "baseline,1,0,0,all,1,36,1.0,0.1,,b1,done\nbaseline,1,0,0,all,1,128,0.4,1.7,2.45,l1,done\n"),
     "plot {dir}/r.csv --metric loss --out {dir}/f.svg", 1, "table each family from its own results.csv"},
    {"results.csv", "stopping column that cannot be read",
     file_case("r.csv", "model.kind,segments,model.num_mem_tokens,model.mem_len,bptt,train.seed,train.target,"
                        "segment_length,acc_teacher_forced,run_id,status,end_reason,solved_step\n"
                        "rmt,3,6,0,all,1,0.99,6,1.0,r1,done,finished,1000\n"),
     "table {dir}/r.csv", 1, "r.csv: line 2: end_reason 'finished' is none of solved, max_steps, unmastered"},
    {"results.csv", "segments -3", file_case("r.csv", kCsvHeader + kCsvRow + "baseline,-3,0,0,all,2,36,1.0,0.9,,0.1,b2,done,10,1.0,abc,1,\n"),
     "table {dir}/r.csv", 1, "r.csv: line 3: segments '-3' is not an integer >= 1"},
    {"results.csv", "row with too few fields", file_case("r.csv", kCsvHeader + kCsvRow + "baseline,1,0\n"), "table {dir}/r.csv", 1,
     "r.csv: line 3 has 3 fields, the header has 18"},
    {"results.csv", "metric not a number", file_case("r.csv", kCsvHeader + "baseline,1,0,0,all,1,36,high,0.9,,0.1,b1,done,10,1.0,abc,1,\n"),
     "table {dir}/r.csv", 1, "r.csv: line 2: acc_teacher_forced 'high' is not a finite number"},
    {"results.csv", "accuracy above 1", file_case("r.csv", kCsvHeader + "baseline,1,0,0,all,1,36,1.0,97.5,,0.1,b1,done,10,1.0,abc,1,\n"),
     "table {dir}/r.csv --metric acc_free_running", 1, "r.csv: line 2: acc_free_running 97.5 is outside [0, 1]"},
    {"results.csv", "quote never closed", file_case("r.csv", kCsvHeader + "baseline,1,0,0,all,1,36,1.0,0.9,,0.1,b1,failed,,,,,\"boom\n"),
     "table {dir}/r.csv", 1, "r.csv: line 2: a quoted field is never closed"},
    {"results.csv", "unknown status", file_case("r.csv", kCsvHeader + "baseline,1,0,0,all,1,36,1.0,0.9,,0.1,b1,ok,10,1.0,abc,1,\n"),
     "table {dir}/r.csv", 1, "r.csv: line 2: status 'ok' is neither done nor failed"},
    {"results.csv", "unknown model kind", file_case("r.csv", kCsvHeader + "gpt,1,0,0,all,1,36,1.0,0.9,,0.1,b1,done,10,1.0,abc,1,\n"),
     "table {dir}/r.csv", 1, "r.csv: line 2: model.kind 'gpt' is not one of baseline, mt, xl, rmt, xl_rmt, armt, deltanet, gated_deltanet"},
    {"results.csv", "memory size not an integer", file_case("r.csv", kCsvHeader + "rmt,2,6.5,0,all,1,18,1.0,0.9,,0.1,b1,done,10,1.0,abc,1,\n"),
     "table {dir}/r.csv", 1, "r.csv: line 2: model.num_mem_tokens '6.5' is not an integer >= 0"},
    {"results.csv", "header column twice", file_case("r.csv", "segments,segments\n1,2\n"), "table {dir}/r.csv", 1,
     "r.csv: line 1: column 'segments' appears twice in the header"},
    {"results.csv", "empty file", file_case("r.csv", ""), "table {dir}/r.csv", 1, "r.csv: empty file"},

    // ---- paper YAML: `rmt table --paper` ------------------------------------------------------
    {"paper.yaml", "malformed YAML", paper_case("quick_copy: {rows: {baseline: {1: 1.0}}\n"), kTablePaper, 1,
     "paper.yaml: malformed YAML at line"},
    {"paper.yaml", "value not a number", paper_case("quick_copy:\n  rows:\n    baseline: {1: high}\n"), kTablePaper, 1,
     "paper.yaml: line 3: quick_copy.rows.baseline: value 'high' for 1 segments is not a number in [0, 1]"},
    {"paper.yaml", "value above 1", paper_case("quick_copy:\n  rows:\n    baseline: {1: 100}\n"), kTablePaper, 1,
     "value '100' for 1 segments is not a number in [0, 1]"},
    {"paper.yaml", "segments not an integer", paper_case("quick_copy:\n  rows:\n    baseline: {one: 1.0}\n"), kTablePaper, 1,
     "paper.yaml: line 3: quick_copy.rows.baseline: 'one' is not a number of segments (an integer >= 1)"},
    {"paper.yaml", "not a mapping", paper_case("- quick_copy\n"), kTablePaper, 1, "paper.yaml: expected a mapping of sections"},
    {"paper.yaml", "row given twice", paper_case("quick_copy: {rows: {baseline: {1: 1.0}, baseline: {3: 0.1}}}\n"), kTablePaper, 1,
     "quick_copy: row 'baseline' is given twice"},
    {"paper.yaml", "row values a list", paper_case("quick_copy: {rows: {baseline: [1.0, 0.1]}}\n"), kTablePaper, 1,
     "quick_copy.rows.baseline: expected a non-empty mapping {segments: value}"},
});
