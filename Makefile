# Sluice developer entry points. Everything builds with CMake + Ninja under build/.
#
#   make run           install deps, build the release WordCount example and run it
#   make test          install deps, build build/debug (ASan+UBSan, -Werror), run ctest
#   make test-long     make test, then the fault-injection suite with the full seed
#                      set (FAULT_SEEDS per job and mode; not run by CI)
#   make release       build everything in build/release (no tests, no benchmarks)
#   make debug         build everything in build/debug (sanitizers, -Werror, tests)
#   make bench         build build/release with benchmarks, run bench/sluice-bench $(ARGS)
#   make check         header self-containment + layer checks only (no build)
#   make format        clang-format -i over all C++ sources
#   make check-format  fail if any C++ source is not clang-formatted
#   make clean         remove build/
#
# Variables (make VAR=value):
#   JOBS=2          parallel compile jobs
#   TEST_JOBS=4     parallel ctest jobs: twice JOBS, since many tests mostly
#                   wait on the processes and sockets they started
#   ARGS=           arguments for the program run by `make run` / `make bench`
#   TESTS=          ctest -R regex for `make test` (default: all tests)
#   CTEST_ARGS=     extra ctest arguments for `make test` (e.g. -LE slow, -L unit)
#   FAULT_SEEDS=200 exactly-once seeds per job for `make test-long`
#   NO_DEPS=1       skip scripts/install-deps.sh
#   CMAKE_ARGS=     extra arguments for every CMake configure
#   CLANG_FORMAT=clang-format
#   RELEASE_DIR=build/release  DEBUG_DIR=build/debug   build trees

JOBS ?= 2
TEST_JOBS ?= $(shell echo $$(( $(JOBS) * 2 )))
ARGS ?=
TESTS ?=
CTEST_ARGS ?=
FAULT_SEEDS ?= 200
NO_DEPS ?=
CMAKE_ARGS ?=
CMAKE ?= cmake
CTEST ?= ctest
CLANG_FORMAT ?= clang-format

RELEASE_DIR ?= build/release
DEBUG_DIR ?= build/debug

# Sanitizer runtime options for everything `make test` runs. Caller's values win.
ASAN_OPTIONS ?= detect_leaks=1:halt_on_error=1:print_stacktrace=1:check_initialization_order=1
UBSAN_OPTIONS ?= halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS UBSAN_OPTIONS

RELEASE_FLAGS := -G Ninja -DCMAKE_BUILD_TYPE=Release -DSLUICE_BUILD_TESTS=OFF
DEBUG_FLAGS := -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON -DSLUICE_WERROR=ON \
	-DSLUICE_BUILD_TESTS=ON -DSLUICE_BUILD_BENCH=OFF

# C++ sources that clang-format owns (tests/data holds fixtures, left alone).
FORMAT_FILES = $(shell find include src tests examples bench \
	-path tests/data -prune -o -type f \
	\( -name '*.h' -o -name '*.hpp' -o -name '*.cc' -o -name '*.cpp' \) -print 2>/dev/null) \
	$(wildcard tools/*.cc)

.PHONY: all run test test-long release debug bench check format check-format clean deps help \
	configure-release configure-debug

all: release

help:
	@sed -n '/^# Sluice/,/^$$/p' $(firstword $(MAKEFILE_LIST)) | sed 's/^# \{0,1\}//'

deps:
ifeq ($(NO_DEPS),)
	bash scripts/install-deps.sh
endif

# Configuring every time is cheap (~1 s) and keeps the cache in step with the
# flags here, e.g. when `make bench` and `make run` share build/release.
configure-release: deps
	$(CMAKE) -S . -B $(RELEASE_DIR) $(RELEASE_FLAGS) -DSLUICE_BUILD_BENCH=OFF $(CMAKE_ARGS)

configure-debug: deps
	$(CMAKE) -S . -B $(DEBUG_DIR) $(DEBUG_FLAGS) $(CMAKE_ARGS)

run: configure-release
	$(CMAKE) --build $(RELEASE_DIR) -j $(JOBS) --target wordcount
	$(RELEASE_DIR)/examples/wordcount/wordcount $(ARGS)

release: configure-release
	$(CMAKE) --build $(RELEASE_DIR) -j $(JOBS)

debug: configure-debug
	$(CMAKE) --build $(DEBUG_DIR) -j $(JOBS)

test: debug
	$(CTEST) --test-dir $(DEBUG_DIR) --output-on-failure -j $(TEST_JOBS) --timeout 600 $(if $(TESTS),-R '$(TESTS)') $(CTEST_ARGS)

# The seeded fault-injection tests are discovered when the binary is built, so
# the longer seed set runs the binary directly rather than through ctest.
test-long: test
	SLUICE_FAULT_SEEDS=$(FAULT_SEEDS) $(DEBUG_DIR)/tests/slow --gtest_brief=1

bench: deps
	$(CMAKE) -S . -B $(RELEASE_DIR) $(RELEASE_FLAGS) -DSLUICE_BUILD_BENCH=ON $(CMAKE_ARGS)
	$(CMAKE) --build $(RELEASE_DIR) -j $(JOBS)
	$(RELEASE_DIR)/bench/sluice-bench $(ARGS)

# The same checks ctest runs, without building anything.
check:
	JOBS=$(JOBS) bash tools/check_headers.sh
	python3 tools/check_layers.py
	python3 tools/check_layers.py --self-test

format:
	$(if $(strip $(FORMAT_FILES)),$(CLANG_FORMAT) -i $(FORMAT_FILES),@echo "format: no sources")

check-format:
	$(if $(strip $(FORMAT_FILES)),$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES),@echo "check-format: no sources")

clean:
	rm -rf build
