#pragma once
// File helpers. Every file rmt writes goes through write_file_atomic: the bytes land in a
// temporary file beside the target, are flushed to disk, then renamed over the target, so a
// killed process leaves either the old file or the new one, never a torn one.
#include <filesystem>
#include <string>
#include <string_view>

namespace rmt {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);
std::string read_file(const std::filesystem::path& path);
// Appends one line (a '\n' is added) with a single write(2) and fsync, so a killed process
// never leaves half a line behind for readers that stop at the last '\n'.
void append_line(const std::filesystem::path& path, std::string_view line);
// sha256 of a byte string as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace rmt
