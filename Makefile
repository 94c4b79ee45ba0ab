# The two commands of the README's quick start: `make demo` and `make test`.
# Each installs the Debian packages it needs when they are missing, then builds incrementally.
BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
PACKAGES   := cmake g++ make libopenblas-dev catch2 libcli11-dev nlohmann-json3-dev
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo test test-asan bench clean

all: build

# dpkg-query is fast, so a second run costs milliseconds when everything is installed.
deps:
	@missing=$$(for p in $(PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The main job: train the default model on the majority task until 99% validation accuracy.
demo: build
	./$(BUILD)/tapegrad train --task majority --target-acc 0.99 --steps 3000 --out runs/demo --overwrite

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build tree.
test-asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTAPEGRAD_SANITIZE=ON
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

# Training speed against PyTorch (not part of `make test`): bench/train_step.cpp and its PyTorch twin
# bench/train_step_torch.py time the same steps on one fixed batch, one thread each; the ratio is
# tapegrad steps/s ÷ PyTorch steps/s (above 1: tapegrad is faster), from wall-clock time and from CPU
# time (which a busy neighbour disturbs less). Each line is one run on a shared machine, so compare
# ratios, not absolute rates. PYTHON must be an interpreter that has torch.
PYTHON       ?= /usr/bin/python3
BENCH_SMALL  ?= --d-model 32 --heads 2 --d-ff 64 --layers 2 --seq 32 --batch 64 --warmup 30 --steps 500
BENCH_MEDIUM ?= --d-model 128 --heads 4 --d-ff 512 --layers 4 --seq 64 --batch 32 --warmup 5 --steps 50
bench: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target bench_train_step
	@for config in small medium; do \
	  if [ $$config = small ]; then args="$(BENCH_SMALL)"; else args="$(BENCH_MEDIUM)"; fi; \
	  echo "== $$config: $$args"; \
	  ours=$$(./$(BUILD)/bench/bench_train_step $$args) || exit 1; \
	  theirs=$$($(PYTHON) bench/train_step_torch.py $$args) || exit 1; \
	  echo "$$ours" | grep -v '^RESULT'; echo "$$theirs" | grep -v '^RESULT'; \
	  printf '%s\n%s\n' "$$(echo "$$ours" | grep '^RESULT')" "$$(echo "$$theirs" | grep '^RESULT')" | awk -v c=$$config ' \
	    { for (i = 2; i <= NF; ++i) { split($$i, kv, "="); v[NR, kv[1]] = kv[2] } } \
	    END { printf "== %s: speed ratio %.2fx wall-clock, %.2fx per CPU second (tapegrad / PyTorch steps/s); peak RSS ratio %.2f (tapegrad / PyTorch)\n", \
	          c, v[1, "steps_per_s"] / v[2, "steps_per_s"], v[1, "steps_per_cpu_s"] / v[2, "steps_per_cpu_s"], \
	          v[1, "peak_rss_mib"] / v[2, "peak_rss_mib"] }'; \
	done

clean:
	rm -rf $(BUILD) build-asan
