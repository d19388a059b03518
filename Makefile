# rmt: thin wrapper over CMake.  `make` builds, `make test` tests, `make run` demos.
# `make SANITIZE=1 [test]`: the same with AddressSanitizer + UBSan, in build-san.
SANITIZE ?=
ifeq ($(strip $(SANITIZE)),1)
BUILD   ?= build-san
CMAKE_OPTIONS += -DRMT_SANITIZE=ON -DRMT_CUDA=OFF
# Any report (leaks included) ends the process with status 86: the sanitizers' default, 1, is
# rmt's "bad input" status, so a finding in a child `rmt` could pass for an expected error.
export ASAN_OPTIONS ?= detect_leaks=1:exitcode=86:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1:exitcode=86
else
BUILD   ?= build
endif
NATIVE  ?= ON            # NATIVE=OFF for a portable binary (no -march=native)
MARCH   ?=               # e.g. MARCH=x86-64-v3: that -march target instead of native (at configure)
# CUDA=1 / CUDA=0: build with / without the CUDA backend (-DRMT_CUDA=ON/OFF, docs/cuda.md); unset:
# the build directory's choice (at first configure: on where nvcc is found).
CUDA    ?=
JOBS    ?= $(shell nproc)
RMT     := $(BUILD)/rmt
CTEST_ARGS ?=            # e.g. make test CTEST_ARGS='-R golden'

# ccache: optional, used when CMAKE_CXX_COMPILER_LAUNCHER=ccache is exported (CI does).
BUILD_PACKAGES := cmake g++ make libcli11-dev libeigen3-dev libfmt-dev doctest-dev \
                  libyaml-cpp-dev nlohmann-json3-dev libssl-dev libdnnl-dev \
                  ocl-icd-opencl-dev ccache
TEST_PACKAGES  := python3-torch python3-numpy python3-pip
RUN_PACKAGES   := gnuplot-nox
ALL_PACKAGES   := $(BUILD_PACKAGES) $(TEST_PACKAGES) $(RUN_PACKAGES)

missing = $(shell for p in $(1); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done)
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build deps deps-build deps-run deps-test deps-python test run reproduce bench clean

all: build

# Install whatever Debian packages are missing (called automatically by make / make test).
deps:
	@$(MAKE) --no-print-directory _install PKGS="$(call missing,$(ALL_PACKAGES))"
	@$(MAKE) --no-print-directory deps-python
deps-build:
	@$(MAKE) --no-print-directory _install PKGS="$(call missing,$(BUILD_PACKAGES))"
deps-run:
	@$(MAKE) --no-print-directory _install PKGS="$(call missing,$(RUN_PACKAGES))"
deps-test:
	@$(MAKE) --no-print-directory _install PKGS="$(call missing,$(TEST_PACKAGES))"
	@$(MAKE) --no-print-directory deps-python
# PyPI packages of the golden tests, which Debian 12 does not package: fla-core (the ops of
# flash-linear-attention; tests/reference/test_deltanet_reference.py loads its two naive.py files
# by path, without triton) and einops (what those files import). Installed with Debian's pip
# (python3-pip, above) into PYDEPS, a folder of this checkout that git ignores and the test puts
# first on sys.path: nothing outside the checkout changes (no --break-system-packages), PyPI's
# torch is never pulled in (--no-deps: fla-core needs torch only through its extras) and the
# versions are the pinned ones whatever else the machine has. Runs pip only when PYDEPS lacks
# either pinned version (the dist-info folders); a new pin replaces the folder.
FLA_CORE_VERSION := 0.6.0
EINOPS_VERSION   := 0.8.2
PYDEPS           := tests/reference/.pydeps
PIP_PYTHON       ?= /usr/bin/python3
deps-python:
	@if [ ! -d $(PYDEPS)/fla_core-$(FLA_CORE_VERSION).dist-info ] || [ ! -d $(PYDEPS)/einops-$(EINOPS_VERSION).dist-info ]; then \
	  echo "installing fla-core==$(FLA_CORE_VERSION) einops==$(EINOPS_VERSION) into $(PYDEPS) (pip, from PyPI)"; \
	  rm -rf $(PYDEPS) $(PYDEPS).tmp && \
	  $(PIP_PYTHON) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
	    --target $(PYDEPS).tmp fla-core==$(FLA_CORE_VERSION) einops==$(EINOPS_VERSION) && \
	  mv $(PYDEPS).tmp $(PYDEPS); \
	fi
_install:
	@if [ -n "$(strip $(PKGS))" ]; then \
	  echo "installing missing packages: $(PKGS)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(PKGS); \
	fi

ifeq ($(strip $(CUDA)),1)
CUDA_OPTION := -DRMT_CUDA=ON
else ifeq ($(strip $(CUDA)),0)
CUDA_OPTION := -DRMT_CUDA=OFF
else ifneq ($(strip $(CUDA)),)
$(error CUDA=$(CUDA): expected CUDA=1 (build the CUDA backend) or CUDA=0 (without it))
endif

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DRMT_NATIVE=$(strip $(NATIVE)) $(if $(strip $(MARCH)),-DRMT_MARCH=$(strip $(MARCH))) $(CUDA_OPTION) $(CMAKE_OPTIONS)

# CUDA=1/0 on an existing build directory reconfigures it with that choice.
build: deps-build $(BUILD)/CMakeCache.txt
	$(if $(CUDA_OPTION),cmake -S . -B $(BUILD) $(CUDA_OPTION) > /dev/null)
	cmake --build $(BUILD) -j $(JOBS)

# Everything but the GPU suite (label cuda: `make test-cuda`), so that a machine without a GPU
# never reports it as passed or failed.
test: deps-test build
	cd $(BUILD) && ctest --output-on-failure -LE cuda $(CTEST_ARGS)

# The GPU suite (tests/cuda/, docs/cuda.md): the cuda backend against the cpu backend on the
# device. Fails (one line) in a build without the CUDA backend or on a machine without a GPU.
# Its whole output, with the measured ratio of every tensor, is kept in $(CUDA_TEST_LOG).
CUDA_TEST_LOG ?= $(BUILD)/cuda_tests.log
.PHONY: test-cuda
test-cuda: build
	@grep -q '^RMT_CUDA:BOOL=ON$$' $(BUILD)/CMakeCache.txt || { \
	  echo "make test-cuda: $(BUILD) is built without the CUDA backend (RMT_CUDA=OFF): make CUDA=1 test-cuda needs nvcc"; exit 1; }
	@echo "make test-cuda: the GPU suite's output goes to $(CUDA_TEST_LOG)"
	@cd $(BUILD) && ctest -L cuda --no-tests=error --output-on-failure -V $(CTEST_ARGS) > $(abspath $(CUDA_TEST_LOG)) 2>&1; \
	  rc=$$?; tail -n 25 $(abspath $(CUDA_TEST_LOG)); \
	  if [ $$rc -eq 0 ]; then echo "make test-cuda: passed (log: $(CUDA_TEST_LOG))"; \
	  else echo "make test-cuda: FAILED (log: $(CUDA_TEST_LOG))"; fi; exit $$rc

# The GPU bundle (docs/cuda.md, tools/gpu_bundle.sh): rmt, librmt_cuda.so and the GPU suite built
# portable (no -march=native, whatever NATIVE says) in GPU_BUNDLE_BUILD, staged into GPU_BUNDLE
# (ignored by git) with every shared library a bare GPU machine lacks, under 64 MiB. Carry that
# folder to the GPU machine and run `bash gpu-bundle/run.sh` there.
GPU_BUNDLE_BUILD ?= build-gpu-bundle
GPU_BUNDLE       ?= gpu-bundle
.PHONY: gpu-bundle
gpu-bundle: deps-build
	JOBS=$(JOBS) tools/gpu_bundle.sh $(GPU_BUNDLE_BUILD) $(GPU_BUNDLE)

# Two builds compute the same bits (issue 54; docs/reliability.md, "Compilers and CPUs"): builds
# CHECK_FLAGS_BUILD for a fixed -march target instead of native, runs its unit suite, then
# tools/check_build_flags.sh: every task's dataset, every kind's training, evaluation and
# predictions from both binaries, compared file for file with this build's. The target keeps
# native's vector width, since the CPU engine's row sums run one lane per float of a SIMD packet
# (lib/core/cpu_simd.h): x86-64-v4 (AVX-512) where the CPU has AVX-512, x86-64-v3 (AVX2)
# elsewhere. CHECK_FLAGS_OPTIONS configures it otherwise, e.g. "-DRMT_MARCH=x86-64-v4
# -DRMT_GCC_MOVE_GUARD=OFF": GCC 12's miscompile on any AVX-512 machine. CI runs it, so a
# miscompile tied to one -march target fails on every machine of that vector width.
CHECK_FLAGS_BUILD   ?= build-flags
CHECK_FLAGS_MARCH   ?= $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo x86-64-v4 || echo x86-64-v3)
CHECK_FLAGS_OPTIONS ?= -DRMT_MARCH=$(CHECK_FLAGS_MARCH)
.PHONY: check-build-flags
check-build-flags: deps-test build
	@rm -f $(CHECK_FLAGS_BUILD)/CMakeCache.txt   # configured from CHECK_FLAGS_OPTIONS alone, nothing kept from a last run
	cmake -S . -B $(CHECK_FLAGS_BUILD) -DCMAKE_BUILD_TYPE=Release -DRMT_CUDA=OFF $(CHECK_FLAGS_OPTIONS)
	cmake --build $(CHECK_FLAGS_BUILD) -j $(JOBS) --target rmt rmt_tests
	@$(CHECK_FLAGS_BUILD)/rmt --version | grep '^build_flags'
	cd $(CHECK_FLAGS_BUILD) && ./rmt_tests
	tools/check_build_flags.sh $(RMT) $(CHECK_FLAGS_BUILD)/rmt $(CHECK_FLAGS_BUILD)/check-build-flags

# A real SLURM on this machine: Debian's slurm-wlm and munge (installed when missing; needs root
# or sudo), one node, state in a temp directory, runs an `rmt sweep --emit slurm` job array of a
# tiny sweep and checks that results.csv collects every run once (tests/slurm/run_slurm_test.sh).
.PHONY: test-slurm
test-slurm: build
	tests/slurm/run_slurm_test.sh $(RMT)

# The README's main job: generate data, run the quick_copy sweep (resumable: re-running skips
# finished runs), print the table and write the plot. About 3 minutes on 2 cores.
run: deps-run build
	-$(RMT) sweep experiments/quick_copy.yaml -j 2   # "-": show the table even if a run failed
	$(RMT) table runs/quick_copy/results.csv --paper experiments/paper_results.yaml
	$(RMT) table runs/quick_copy/results.csv --metric acc_free_running
	$(RMT) plot runs/quick_copy/results.csv --out runs/quick_copy/quick_copy.svg
	@echo "plot: runs/quick_copy/quick_copy.svg"

# The paper's algorithmic results at CPU scale (experiments/reproduce/reproduce.yaml) into
# experiments/results/REPORT.md. Resumable: re-running skips finished runs. REPRODUCE=NAME runs one
# item (rmt reproduce --list names them). REPORT.md's total of the items' times: 1321 min on 2 cores.
REPRODUCE ?=
REPRODUCE_JOBS ?= $(shell nproc)
reproduce: deps-run build
	@[ -f $(CORPUS_TEXT) ] || $(MAKE) --no-print-directory corpus   # the language-modelling item reads it
	$(RMT) reproduce $(REPRODUCE) -j $(REPRODUCE_JOBS)
	@echo "report: experiments/results/REPORT.md"

# Benchmark against PyTorch (bench/README.md). PyTorch comes from bench/.venv, made by
# bench/setup_venv.sh on first use; if that cannot be made, Debian's python3-torch is used.
BENCH_THREADS ?= $(shell nproc)
BENCH_REPS    ?= 10
BENCH_ROUNDS  ?= 2
bench: build
	@if bench/setup_venv.sh; then py=bench/.venv/bin/python; \
	 else echo "bench: no bench/.venv; falling back to /usr/bin/python3 (Debian python3-torch)"; py=/usr/bin/python3; fi; \
	 python3 bench/compare.py --rmt $(RMT) --python $$py --threads $(BENCH_THREADS) --reps $(BENCH_REPS) \
	   --rounds $(BENCH_ROUNDS) --out $(BUILD)/bench_results.jsonl

# `make install` (PREFIX, default /usr/local; DESTDIR for staging): rmt into PREFIX/bin, with
# the CUDA backend's library beside it in a build that has one. Without it, rmt is build/rmt.
PREFIX  ?= /usr/local
.PHONY: install
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)"

clean:
	rm -rf $(BUILD)

# --- a text corpus for language modelling ----------------------------------------------------
# Debian's dict-gcide ships GCIDE, the Collaborative International Dictionary of English (Webster's
# 1913 and later additions), as /usr/share/dictd/gcide.dict.dz: dictzip, which zcat reads, 39,952,321
# bytes of English (version 0.48.5+nmu2). `make corpus` installs the package when missing (it
# depends on the dictd server package), unpacks the text to CORPUS_TEXT and writes the byte-level
# dataset (`rmt generate text`: 90/5/5 as enwik8) to CORPUS_DIR, then checks it. Both under data/,
# which git ignores. CORPUS_BYTES=N uses only the first N bytes. About 2 s.
CORPUS_PACKAGES := dict-gcide
CORPUS_SOURCE   := /usr/share/dictd/gcide.dict.dz
CORPUS_TEXT     ?= data/gcide.txt
CORPUS_DIR      ?= data/gcide
CORPUS_BYTES    ?=
ALL_PACKAGES    += $(CORPUS_PACKAGES)

.PHONY: corpus deps-corpus
deps-corpus:
	@$(MAKE) --no-print-directory _install PKGS="$(call missing,$(CORPUS_PACKAGES))"
corpus: deps-corpus build
	@mkdir -p $(dir $(CORPUS_TEXT))
	zcat $(CORPUS_SOURCE) > $(CORPUS_TEXT).tmp && mv $(CORPUS_TEXT).tmp $(CORPUS_TEXT)
	$(RMT) generate text --input $(CORPUS_TEXT) --out $(CORPUS_DIR) --force$(if $(strip $(CORPUS_BYTES)), --bytes $(strip $(CORPUS_BYTES)))
	$(RMT) data check $(CORPUS_DIR)

# --- fuzzing (fuzz/README.md) ----------------------------------------------------------------
# `make fuzz` builds the libFuzzer harnesses of the file readers (npy, safetensors, config and
# --set, sweep files and derive:, results.csv and the paper YAML) with clang, ASan and UBSan in
# FUZZ_BUILD, then runs each for FUZZ_SECONDS from its corpus in fuzz/corpus. A crash fails the
# target and is copied to fuzz/regressions/NAME, which `make test` replays. `make fuzz-merge`
# minimises the committed corpora together with what the runs found.
FUZZ_BUILD     ?= build-fuzz
FUZZ_SECONDS   ?= 60
FUZZ_HARNESSES ?= npy safetensors config sweep results_csv
FUZZ_CXX       ?= clang++-14
FUZZ_PACKAGES  := clang-14 libclang-rt-14-dev
ALL_PACKAGES   += $(FUZZ_PACKAGES)

.PHONY: fuzz fuzz-build fuzz-merge deps-fuzz
deps-fuzz:
	@$(MAKE) --no-print-directory _install PKGS="$(call missing,$(BUILD_PACKAGES) $(FUZZ_PACKAGES))"
fuzz-build: deps-fuzz
	@[ -f $(FUZZ_BUILD)/CMakeCache.txt ] || cmake -S fuzz -B $(FUZZ_BUILD) -DCMAKE_CXX_COMPILER=$(FUZZ_CXX)
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
fuzz: fuzz-build
	fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_HARNESSES)
fuzz-merge: fuzz-build
	FUZZ_MODE=merge fuzz/run.sh $(FUZZ_BUILD) 0 $(FUZZ_HARNESSES)
