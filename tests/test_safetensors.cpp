#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lib/core/error.h"
#include "lib/files/io.h"
#include "lib/files/safetensors.h"

namespace fs = std::filesystem;

namespace {

const char* kPython = "/usr/bin/python3";

fs::path scratch_dir() {
  fs::path dir = fs::temp_directory_path() / "rmt_test_safetensors";
  fs::create_directories(dir);
  return dir;
}

// A safetensors file spelled out byte by byte: 8-byte little-endian header size, header, data.
std::string raw_file(const std::string& header, const std::string& data,
                     uint64_t header_size_field) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += char((header_size_field >> (8 * i)) & 0xff);
  return bytes + header + data;
}
std::string raw_file(const std::string& header, const std::string& data) {
  return raw_file(header, data, header.size());
}

std::string floats_as_bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

// The error message from loading `bytes` as a safetensors file ("" if it loads).
std::string load_error(const std::string& bytes) {
  fs::path path = scratch_dir() / "corrupt.safetensors";
  rmt::write_file_atomic(path, bytes);
  try {
    rmt::load_safetensors(path.string());
  } catch (const rmt::Error& e) {
    std::string message = e.what();
    CHECK(message.find(path.string()) != std::string::npos);  // every error names the file
    return message;
  }
  return "";
}

int run_python(const std::string& script, const std::string& argument) {
  // The scripts use no double quotes, '$', '`' or backslashes, so double-quoting is enough.
  REQUIRE(script.find_first_of("\"$`\\") == std::string::npos);
  std::string command = std::string(kPython) + " -c \"" + script + "\" '" + argument + "'";
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("safetensors round trip with metadata and 0-d, 1-d, 3-d and empty tensors") {
  fs::path path = scratch_dir() / "round_trip.safetensors";
  float scalar = 3.5f;
  std::vector<float> vector = {1.0f, -2.0f, 0.125f, 1e-30f, 3.4e38f};
  std::vector<float> cube(2 * 3 * 4);
  for (size_t i = 0; i < cube.size(); ++i) cube[i] = float(i) * 0.25f - 1.0f;
  std::vector<rmt::TensorRef> refs = {{"z.cube", {2, 3, 4}, cube.data()},
                                      {"a.scalar", {}, &scalar},
                                      {"m.vector", {5}, vector.data()},
                                      {"empty", {0, 3}, nullptr}};
  std::map<std::string, std::string> metadata = {{"step", "1200"}, {"config", "model:\n  kind: rmt\n"}};
  rmt::save_safetensors(path.string(), refs, metadata);

  rmt::SafetensorsFile file = rmt::load_safetensors(path.string());
  CHECK(file.metadata == metadata);
  REQUIRE(file.tensors.size() == 4);
  CHECK(file.tensors["a.scalar"].shape.empty());
  CHECK(file.tensors["a.scalar"].numel() == 1);
  CHECK(file.tensors["a.scalar"].data == std::vector<float>{3.5f});
  CHECK(file.tensors["m.vector"].shape == std::vector<int64_t>{5});
  CHECK(file.tensors["m.vector"].data == vector);
  CHECK(file.tensors["z.cube"].shape == std::vector<int64_t>{2, 3, 4});
  CHECK(file.tensors["z.cube"].numel() == 24);
  CHECK(file.tensors["z.cube"].data == cube);
  CHECK(file.tensors["empty"].shape == std::vector<int64_t>{0, 3});
  CHECK(file.tensors["empty"].data.empty());

  // Layout: header padded with spaces to 8 bytes, data in the order given, F32 only.
  std::string bytes = rmt::read_file(path);
  uint64_t header_size;
  std::memcpy(&header_size, bytes.data(), 8);
  CHECK(header_size % 8 == 0);
  std::string header_text = bytes.substr(8, header_size);
  CHECK(header_text.rfind("{\"__metadata__\"", 0) == 0);
  auto header = nlohmann::json::parse(header_text);
  CHECK(header["z.cube"]["data_offsets"] == nlohmann::json::array({0, 96}));
  CHECK(header["a.scalar"]["data_offsets"] == nlohmann::json::array({96, 100}));
  CHECK(header["m.vector"]["data_offsets"] == nlohmann::json::array({100, 120}));
  CHECK(header["empty"]["data_offsets"] == nlohmann::json::array({120, 120}));
  CHECK(header["a.scalar"]["dtype"] == "F32");
  CHECK(bytes.size() == 8 + header_size + 120);

  // No temp file left beside it.
  int files = 0;
  for (auto& entry : fs::directory_iterator(scratch_dir()))
    files += entry.path().filename().string().rfind("round_trip", 0) == 0;
  CHECK(files == 1);
  fs::remove(path);
}

TEST_CASE("save_safetensors rejects duplicate names") {
  fs::path path = scratch_dir() / "duplicate.safetensors";
  float x = 1.0f;
  CHECK_THROWS_WITH_AS(rmt::save_safetensors(path.string(), {{"w", {1}, &x}, {"w", {1}, &x}}, {}),
                       (path.string() + ": duplicate tensor name 'w'").c_str(), rmt::Error);
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("load_safetensors rejects corrupt files, naming file and problem") {
  const std::string eight_bytes = floats_as_bytes({1.0f, 2.0f});
  struct Case {
    const char* what;
    std::string bytes;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"empty file", "", "shorter than the 8-byte header size"},
      {"7 bytes", std::string("\x08\0\0\0\0\0\0", 7), "shorter than the 8-byte header size"},
      {"header size beyond the file", raw_file("{}", "", 1000), "header size 1000 is larger than the file"},
      {"absurd header size", raw_file("{}", "", 200ull << 20), "is absurd (> 100 MB)"},
      {"huge header size", raw_file("{}", "", ~0ull), "is absurd"},
      {"invalid JSON", raw_file("{\"w\": {\"dtype\": ", ""), "header is not valid JSON"},
      {"JSON not an object", raw_file("[1, 2]", ""), "header is not a JSON object"},
      {"missing dtype", raw_file(R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", eight_bytes),
       "tensor 'w': missing 'dtype'"},
      {"missing shape", raw_file(R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})", eight_bytes),
       "tensor 'w': missing 'shape'"},
      {"missing data_offsets", raw_file(R"({"w": {"dtype": "F32", "shape": [2]}})", eight_bytes),
       "tensor 'w': missing 'data_offsets'"},
      {"unsupported dtype",
       raw_file(R"({"w": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", eight_bytes),
       "tensor 'w': unsupported dtype 'I64'"},
      {"range smaller than shape",
       raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", eight_bytes),
       "holds 4 bytes but shape [2] of F32 needs 8"},
      {"range larger than shape (F16)",
       raw_file(R"({"w": {"dtype": "F16", "shape": [2], "data_offsets": [0, 8]}})", eight_bytes),
       "holds 8 bytes but shape [2] of F16 needs 4"},
      {"range past the data section",
       raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", eight_bytes),
       "byte range [4, 12) lies outside the data section (8 bytes)"},
      {"reversed range",
       raw_file(R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", eight_bytes),
       "lies outside the data section"},
      {"negative offset",
       raw_file(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", eight_bytes),
       "data_offsets must be two non-negative integers"},
      {"overlapping ranges",
       raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
                eight_bytes),
       "tensors 'a' and 'b' overlap"},
      {"negative dimension",
       raw_file(R"({"w": {"dtype": "F32", "shape": [-1, -2], "data_offsets": [0, 8]}})", eight_bytes),
       "tensor 'w': negative dimension in shape [-1,-2]"},
      {"shape larger than the data",
       raw_file(R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]}})",
                eight_bytes),
       "needs more bytes than the data section holds"},
      {"non-string metadata",
       raw_file(R"({"__metadata__": {"step": 5}, "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
                eight_bytes),
       "metadata value for 'step' is not a string"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    std::string message = load_error(c.bytes);
    CAPTURE(message);
    CHECK(message.find(c.expected) != std::string::npos);
  }

  // Sanity: the well-formed version of those files loads, with space padding after the JSON.
  fs::path path = scratch_dir() / "ok.safetensors";
  rmt::write_file_atomic(
      path, raw_file(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}   )", eight_bytes));
  CHECK(rmt::load_safetensors(path.string()).tensors.at("w").data == std::vector<float>{1.0f, 2.0f});
  CHECK_THROWS_AS(rmt::load_safetensors((scratch_dir() / "missing.safetensors").string()), rmt::Error);
}

// Interchange: a file written by hand in Python (struct + json + numpy, as the format defines it)
// loads here, and a file written here reads back in Python. Fails, not skips, without python3.
TEST_CASE("safetensors interchange with Python") {
  REQUIRE_MESSAGE(fs::exists(kPython), "this test needs /usr/bin/python3 with numpy (apt-get install python3-numpy)");
  fs::path from_python = scratch_dir() / "from_python.safetensors";
  fs::remove(from_python);
  const std::string writer = R"(
import json, struct, sys
import numpy as np
tensors = [
    ('weight', 'F32', np.arange(24, dtype='<f4').reshape(2, 3, 4) * np.float32(0.5) - np.float32(3)),
    ('bias64', 'F64', np.array([0.1, -2.5, 1e-3], dtype='<f8')),
    ('half', 'F16', np.array([1.5, -2.25, 0.0, 65504.0, 6.103515625e-05, 5.960464477539063e-08], dtype='<f2')),
    ('brain', 'BF16', (np.array([1.0, -3.5, 0.0078125, 256.0, -0.15625], dtype='<f4').view('<u4') >> 16).astype('<u2')),
    ('scalar', 'F32', np.array(7.25, dtype='<f4')),
]
header = {'__metadata__': {'format': 'pt', 'origin': 'python'}}
data = b''
for name, dtype, array in reversed(tensors):  # data order differs from header order
    raw = array.tobytes()
    header[name] = {'dtype': dtype, 'shape': list(array.shape), 'data_offsets': [len(data), len(data) + len(raw)]}
    data += raw
header_bytes = json.dumps(header, sort_keys=True).encode()
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<Q', len(header_bytes)) + header_bytes + data)
)";
  REQUIRE(run_python(writer, from_python.string()) == 0);

  rmt::SafetensorsFile file = rmt::load_safetensors(from_python.string());
  CHECK(file.metadata == std::map<std::string, std::string>{{"format", "pt"}, {"origin", "python"}});
  REQUIRE(file.tensors.size() == 5);
  const rmt::Tensor& weight = file.tensors.at("weight");
  CHECK(weight.shape == std::vector<int64_t>{2, 3, 4});
  for (int i = 0; i < 24; ++i) CHECK(weight.data[i] == float(i) * 0.5f - 3.0f);
  CHECK(file.tensors.at("bias64").data == std::vector<float>{float(0.1), -2.5f, float(1e-3)});
  CHECK(file.tensors.at("half").data ==
        std::vector<float>{1.5f, -2.25f, 0.0f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f});
  CHECK(file.tensors.at("brain").data == std::vector<float>{1.0f, -3.5f, 0.0078125f, 256.0f, -0.15625f});
  CHECK(file.tensors.at("scalar").shape.empty());
  CHECK(file.tensors.at("scalar").data == std::vector<float>{7.25f});

  // And the other way: Python reads what rmt writes.
  fs::path from_rmt = scratch_dir() / "from_rmt.safetensors";
  std::vector<float> w = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f};
  float s = -1.5f;
  rmt::save_safetensors(from_rmt.string(), {{"w", {2, 3}, w.data()}, {"s", {}, &s}},
                        {{"step", "42"}, {"kind", "rmt"}});
  const std::string reader = R"(
import json, struct, sys
import numpy as np
data = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
assert n % 8 == 0, n
header = json.loads(data[8:8 + n])
assert header.pop('__metadata__') == {'step': '42', 'kind': 'rmt'}
body = data[8 + n:]
def get(name):
    entry = header[name]
    assert entry['dtype'] == 'F32'
    begin, end = entry['data_offsets']
    return np.frombuffer(body[begin:end], dtype='<f4').reshape(entry['shape'])
assert (get('w') == np.arange(6, dtype='<f4').reshape(2, 3) / np.float32(4)).all()
assert get('s').shape == () and get('s') == np.float32(-1.5)
assert sorted(header) == ['s', 'w']
)";
  CHECK(run_python(reader, from_rmt.string()) == 0);
  fs::remove(from_python);
  fs::remove(from_rmt);
}

TEST_CASE("load_safetensors: tensors must tile the data section; duplicates and deep JSON are refused") {
  const std::string twelve = floats_as_bytes({1.0f, 2.0f, 3.0f});
  struct Case {
    const char* what;
    std::string bytes;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"gap between tensors",
       raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", twelve),
       "bytes [4, 8) of the data section belong to no tensor (before 'b')"},
      {"data before the first tensor",
       raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", twelve),
       "bytes [0, 4) of the data section belong to no tensor"},
      {"trailing bytes",
       raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", twelve),
       "4 bytes after the last tensor's data"},
      {"duplicate tensor name",
       raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                R"( "a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", twelve),
       "'a' appears twice in the header"},
      {"header not starting with {", raw_file(R"( [{"a": 1}])", ""), "header is not a JSON object (it does not start with '{')"},
      {"deeply nested dtype",
       raw_file(R"({"a": {"dtype": )" + std::string(50000, '[') + std::string(50000, ']') +
                R"(, "shape": [1], "data_offsets": [0, 4]}})", twelve.substr(0, 4)),
       "unsupported dtype 'a list of 1 items'"},
      {"nested shape entry",
       raw_file(R"({"a": {"dtype": "F32", "shape": [-1, [[[2]]]], "data_offsets": [0, 4]}})", twelve.substr(0, 4)),
       "shape holds a non-integer (a list of 1 items)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    std::string message = load_error(c.bytes);
    CAPTURE(message);
    CHECK(message.find(c.expected) != std::string::npos);
  }
  // Empty tensors may sit anywhere the tiling allows; in-memory parsing names what it was given.
  const std::string ok = raw_file(R"({"e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [4, 4]},)"
                                  R"( "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", twelve.substr(0, 4));
  rmt::SafetensorsFile file = rmt::parse_safetensors(ok, "memory");
  CHECK(file.tensors.at("e").data.empty());
  CHECK(file.tensors.at("a").data == std::vector<float>{1.0f});
  CHECK_THROWS_WITH_AS(rmt::parse_safetensors("short", "memory"), doctest::Contains("memory: not a safetensors file"),
                       rmt::Error);
}
