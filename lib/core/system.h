#pragma once
// What the operating system says about this machine and this process (namespace rmt::sys).
#include <cstdint>

namespace rmt::sys {

// Bytes of RAM the machine has (0 if unknown).
uint64_t physical_memory_bytes();
// This process's peak resident set size so far, in bytes (getrusage). Reports give it in MiB
// (bytes / 2^20) under the key peak_rss_mb: results.json and `rmt bench` alike.
double peak_rss_bytes();

}  // namespace rmt::sys
