#pragma once
// The kernel set the model is written against: memory and copies (declared here) and the kernels
// (one list, lib/core/backend_kernels.h, with their semantics and conventions). The CPU backend
// (cpu_backend.cpp, oneDNN's sgemm, Eigen and OpenMP) is the reference implementation; a CUDA
// backend implements the same set.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "lib/core/host_device.h"

namespace rmt {

// Shape of one relative-position attention call (Transformer-XL "attn_type 0").
//   B batch, H heads, Dh head size, qlen query rows, klen = mlen + qlen key rows
//   (mlen cached rows first, then the qlen current rows).
// Activations are time-major, as in the authors' code: row t of sample b is row t*B + b of a
// [rows, B, width] buffer, so a block of positions is one contiguous range for every sample.
struct AttentionShape {
  int B, H, Dh, qlen, klen;
  // Query rows computed: [q_begin, q_end) (q_end 0 means qlen). Rows outside get no output and
  // no probabilities, and backward takes their output gradient as zero: the last layer asks only
  // for the rows whose output something reads.
  int q_begin = 0, q_end = 0;
  int mlen() const { return klen - qlen; }
  int q_stop() const { return q_end > 0 ? q_end : qlen; }
};

// The delta rule's sizes (DeltaNet, Gated DeltaNet; lib/core/delta_math.h). Rows are time-major
// like every activation (row t of sample b is row t*B + b):
//   q, k [T, B, H, Dk]   v, o [T, B, H, Dv]   beta, g [T, B, H]   S [B, H, Dk, Dv]
struct DeltaShape {
  int T, B, H, Dk, Dv;
  int chunk;       // rows between the states the forward saves for the backward (>= 1)
  bool wy = false;  // the chunked (WY) form, chunks of `chunk` rows (lib/core/delta_wy.h)
  RMT_HOST_DEVICE int64_t heads() const { return int64_t(B) * H; }
  RMT_HOST_DEVICE int64_t chunks() const { return (T + chunk - 1) / chunk; }
  RMT_HOST_DEVICE int64_t state() const { return int64_t(Dk) * Dv; }  // floats of one head's S
  // Floats of the backward's work buffer, per head: the recurrence's a chunk's states and two
  // rows; the chunked form's (lib/core/delta_wy.h) three rows, three [chunk, Dv], three [chunk,
  // chunk], two [Dv, Dk] and three [chunk, Dk] blocks.
  RMT_HOST_DEVICE int64_t work_per_head() const {
    const int64_t C = chunk;
    return wy ? 3 * C + 3 * C * Dv + 3 * C * C + 2 * state() + 3 * C * Dk
              : (C + 1) * state() + 2 * int64_t(Dv);
  }
  // Floats of the forward's work buffer, per head: none for the recurrence; the chunked form's
  // row, [chunk, Dv], [chunk, chunk] and [Dk, chunk] blocks.
  RMT_HOST_DEVICE int64_t forward_work_per_head() const {
    const int64_t C = chunk;
    return wy ? C + C * Dv + C * C + C * Dk : 0;
  }
};

// The delta mixer's short convolution (lib/core/delta_math.h): causal, depthwise, of width W over
// time-major rows, x and y [T, B, C], weight [C, W], the carried state [W-1, B, C] (the last W-1
// input rows before x).
struct ConvShape {
  int T, B, C, W;
  RMT_HOST_DEVICE int64_t row() const { return int64_t(B) * C; }  // floats of one time row
};

// Where a dropout call's mask comes from: the key dropout_key(*word, tag, layer) (random.h), with
// *word read from the backend's memory when the call runs, not when it is issued, so that a
// captured step (begin_capture) replayed after a new seed was uploaded draws new masks. word may
// be null when p <= 0.
struct DropoutSeed {
  const uint64_t* word = nullptr;
  uint64_t tag = 0, layer = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // ---- Memory. Every buffer a kernel reads or writes (parameters, gradients, optimizer state,
  // activations, caches, memory states, token ids, masks) is this backend's, allocated here; the
  // host reads and writes it only through the copies below (lib/core/device_array.h wraps them).
  // Host pointers are only ever the `host` arguments of the copies.

  // At least `bytes` bytes aligned to 64 (bytes 0: null). Contents are unspecified.
  virtual void* allocate(size_t bytes) = 0;
  // Frees what allocate returned (null: nothing), `bytes` as asked for then.
  virtual void deallocate(void* p, size_t bytes) = 0;
  // x[0..n) = value
  virtual void fill(float* x, int64_t n, float value) = 0;
  // bytes [p, p + bytes) = value (integer buffers: ids, masks)
  virtual void fill_bytes(void* p, uint8_t value, size_t bytes) = 0;
  virtual void copy_host_to_device(void* dst, const void* host, size_t bytes) = 0;
  virtual void copy_device_to_host(void* host, const void* src, size_t bytes) = 0;
  // dst and src of this backend; the ranges must not overlap.
  virtual void copy_device_to_device(void* dst, const void* src, size_t bytes) = 0;
  // Returns when every kernel and copy issued so far has finished (timing a step). The CPU
  // backends run everything synchronously; a device backend waits for its stream.
  virtual void synchronize() {}

  // Sum of squares of x[0..n) (fixed order: same result for a fixed thread count), read back to
  // the host (gradient clipping). Declared here, not in the kernel list: like the copies, each
  // wrapper treats what comes back to the host in its own way.
  virtual double sum_squares(const float* x, int64_t n) = 0;

  // ---- Kernels: one pure virtual per row of lib/core/backend_kernels.h, which documents them.
  // (RMT_ARGS(a, b) is a, b: a row's parenthesised arguments after a forwarder's own first one.)
#define RMT_ARGS(...) __VA_ARGS__
#define RMT_KERNEL(name, params, args, extents) virtual void name params = 0;
#include "lib/core/backend_kernels.h"
#undef RMT_KERNEL

  // ---- Capture (a CUDA graph). A backend that can records the work issued between
  // begin_capture and end_capture instead of running it, and replay runs that work again, on the
  // same buffers with the same arguments, at the cost of one launch: a whole training step
  // (lib/run/train_step.cpp). While capturing, nothing may copy between host and device or wait
  // for the device, and no buffer may be allocated or grown: a step is captured after one
  // uncaptured (warm) step of the same shapes. The CPU backends cannot capture.
  // (Defined here, not out of line: librmt_cuda.so derives from Backend without lib/core.)
  virtual bool can_capture() const { return false; }
  virtual void begin_capture() { throw std::logic_error("begin_capture: this backend cannot capture"); }
  // Ends the capture and keeps it (replacing the one kept before); returns its number (>= 1).
  // Nothing has run yet: replay it for the captured step's own work.
  virtual int64_t end_capture() { throw std::logic_error("end_capture: this backend cannot capture"); }
  // Ends a capture that failed part-way and drops what it recorded (never throws).
  virtual void abort_capture() {}
  // Runs capture `id`, which must be the one kept.
  virtual void replay(int64_t) { throw std::logic_error("replay: this backend cannot capture"); }
  // Changes whenever this backend allocates or frees memory, its scratch included: buffers a
  // capture uses may have moved, so it must be captured again.
  virtual int64_t memory_epoch() const { return 0; }

  // ---- Merging packed runs (lib/core/packed_backend.h, issue 40). A backend that can records
  // the work of `runs` calls of one kernel made between begin_run_merge and end_run_merge, each
  // for one run on that run's buffers (merge_run(r) before run r's), and at end_run_merge issues
  // each of their passes once for all of them (the CUDA backend: one launch over the runs,
  // batched GEMMs; lib/cuda/run_merge.h). The results are those of the calls made in turn.
  // Between begin and end nothing may be copied to or from the host or waited for.
  virtual bool can_merge_runs() const { return false; }
  virtual void begin_run_merge(int) { throw std::logic_error("begin_run_merge: this backend cannot merge runs"); }
  virtual void merge_run(int) { throw std::logic_error("merge_run: this backend cannot merge runs"); }
  virtual void end_run_merge() { throw std::logic_error("end_run_merge: this backend cannot merge runs"); }
  // Drops what was recorded (never throws: called while an error unwinds).
  virtual void abort_run_merge() {}
};

// The backend a run asks for by name (`device:` in the config, `--device` on the CLI):
// "cpu" (the reference), "cpu-guarded" (for tests: the CPU kernels on memory the host cannot
// touch outside a backend call, see guarded_cpu_backend), "cuda" (built with RMT_CUDA: the GPU,
// lib/cuda/cuda_backend.h, loaded from librmt_cuda.so next to the program when first asked for).
// "cuda" fails with one clear line in a build without the CUDA backend or on a machine without a
// usable GPU; any other name fails listing the known ones.
Backend& backend_by_name(const std::string& device);
// The names backend_by_name accepts in this build, for --help and errors.
std::string known_devices();
// The CUDA backend in one line, for `rmt --version`: its runtime and driver versions and the
// device, or why there is no device, or why the backend cannot be loaded; "no (CPU backend
// only)" in a build without it. Never fails.
std::string cuda_description();

// The CPU reference backend; `threads` <= 0 means all cores.
Backend& cpu_backend();
// The CPU kernels on guarded memory, for tests (lib/core/guarded_backend.cpp): its buffers are
// pages kept inaccessible (PROT_NONE) except while one of its calls runs, so a host access to
// them anywhere else (a loop left in the engine) crashes instead of passing on the CPU and
// failing on a device. Each call also checks that its buffer arguments are this backend's
// (and that host arguments of the copies are not), and new allocations hold NaN bytes, not
// zeros. Results equal cpu_backend()'s bit for bit; it is slower (two mprotect calls per call).
Backend& guarded_cpu_backend();
// How many buffers it has allocated so far (tests: a warm training step allocates none).
int64_t guarded_cpu_allocations();
// The CPU kernels' thread count; 0 = default_num_threads().
void set_num_threads(int threads);
int num_threads();
// Runs task(0), .., task(n - 1), up to num_threads() of them at once, each task's kernels on its
// host thread alone (nested OpenMP regions, oneDNN's sgemm: one thread); the first exception a
// task threw is rethrown once all have run. With one thread or one task they run in turn, their
// kernels on every thread. For the CPU backend's calls only (it is reentrant: packed runs rely on
// it too); the tasks must write disjoint buffers.
void run_cpu_tasks_concurrently(int n, const std::function<void(int)>& task);
// What "all cores" (train.threads 0) means: OMP_NUM_THREADS where it is set, else every core.
int default_num_threads();
// The CPU backend's GEMM, with its version: "oneDNN 2.6.3" or "Eigen 3.4.0".
std::string cpu_gemm_library();

}  // namespace rmt
