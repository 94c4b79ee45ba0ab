# The two commands of the README's quick start: `make demo` and `make test`.
# Each installs the Debian packages it needs when they are missing, then builds incrementally.
BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
PACKAGES   := cmake g++ make libopenblas-dev catch2 libcli11-dev nlohmann-json3-dev libutfcpp-dev libsentencepiece-dev pkg-config
# The tests also run data-parallel training on MPI (tests/mpi, docs/distributed.md): Debian's OpenMPI, and
# iproute2 for the test whose ranks sit on two simulated hosts (network namespaces).
TEST_PACKAGES := $(PACKAGES) libopenmpi-dev openmpi-bin iproute2
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps test-deps build demo lm-demo test test-asan install soak fuzz bench bench-lm bench-products bench-mpi \
        bench-long-scaling clean

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

# The tapegrad command alone (not the tests and examples), rebuilt through CMake only when a file it is
# built from is newer than it: a `cmake --build` with nothing to do still reads every object's dependency
# list, 0.6 s of a 2.3 s `make demo` on Zen 3.
TAPEGRAD_INPUTS := CMakeLists.txt $(shell find autograd nn optim train cmake -type f)
$(BUILD)/tapegrad: $(TAPEGRAD_INPUTS) $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) --target tapegrad -j $(JOBS)
	@touch $@

# The main job: train the default model on the majority task until 99% validation accuracy.
# A second run starts training at once.
demo: deps $(BUILD)/tapegrad
	./$(BUILD)/tapegrad train --task majority --target-acc 0.99 --steps 3000 --out runs/demo --overwrite

# A character language model of the fortunes corpus (Debian's fortunes package, about 2.5 MB of English;
# docs/language_models.md): about 6 minutes on 2 cores. Then sample from it:
#   ./build/tapegrad generate --checkpoint runs/fortunes --prompt "The " --max-new-tokens 300 --temperature 0.8 --seed 1
LM_DEMO_STEPS ?= 600
lm-demo: deps $(BUILD)/tapegrad
	@$(MAKE) --no-print-directory deps PACKAGES="$(PACKAGES) fortunes"
	mkdir -p runs && scripts/fortunes_corpus.sh runs/fortunes.txt
	./$(BUILD)/tapegrad train --task lm --data runs/fortunes.txt --context-length 128 --d-model 128 --heads 4 \
	  --ff 512 --layers 4 --norm-first --activation gelu --dropout 0 --batch-size 32 --lr 1e-3 --warmup 50 \
	  --schedule cosine --steps $(LM_DEMO_STEPS) --eval-every 200 --out runs/fortunes --overwrite

# Configured again (a second or two): a build tree made before `make test` installed MPI then finds it.
test-deps:
	@$(MAKE) --no-print-directory deps PACKAGES="$(TEST_PACKAGES)"

test: test-deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, in its own build tree.
test-asan: test-deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTAPEGRAD_SANITIZE=ON
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

# Libraries, headers, the tapegrad command and the CMake package (find_package(tapegrad), see the README).
# The tapegrad target depends on every library, so the tests and examples are not built for this.
PREFIX ?= /usr/local
install: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) --target tapegrad -j $(JOBS)
	cmake --install $(BUILD) --prefix $(PREFIX)

# Crash safety, at length: `tapegrad train` killed with SIGKILL at KILLS random moments (the ctest version
# kills 20 times), resumed after each; every kill must leave a checkpoint that predicts, and every run must
# end with the bytes of one never killed (tests/train/test_faults.cpp). SEED=n draws the moments of seed n.
KILLS ?= 200
soak: build
	TAPEGRAD_KILLS=$(KILLS) $(if $(SEED),TAPEGRAD_KILL_SEED=$(SEED)) ./$(BUILD)/tests/test_train "faults: SIGKILL at random moments*"

# libFuzzer on the file readers (tests/fuzz/README.md): builds the fuzz targets with clang, ASan and UBSan
# in build-fuzz, then runs each for FUZZ_SECONDS from the committed seeds (new inputs go to
# build-fuzz/corpus). Any crash, sanitizer report, leak, timeout or exception other than tapegrad's
# errors stops it with a non-zero exit and the input in build-fuzz/findings/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := safetensors config tsv vocab tokenizer
fuzz:
	@$(MAKE) --no-print-directory deps PACKAGES="$(PACKAGES) clang libclang-rt-14-dev"
	CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTAPEGRAD_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS)
	@mkdir -p build-fuzz/findings
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  ./build-fuzz/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -dict=tests/fuzz/json.dict \
	    -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/findings/$$t- build-fuzz/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

# Training speed and memory against today's frameworks (not part of `make test`): `tapegrad bench` on the
# small, medium and long (T = 2048) models and the character language model (lm, tokens/s), and their twins
# under PyTorch 1.13 (Debian's python3-torch, installed when missing), PyTorch 2 eager, PyTorch 2 +
# torch.compile and JAX jit, each at its best thread count (and OPENBLAS_CORETYPE for 1.13), and the peak
# memory of medium and long `tapegrad train` runs; one table with the best peer and tapegrad's ratio to it
# (bench/compare.py, docs/performance.md). bench/peers/install.sh makes $(BUILD)/bench-venv from PyPI once
# (about 3 GB of wheels; a peer it cannot install is one line and `-`). An OPENBLAS_CORETYPE in your
# environment is obeyed. BENCH_CONFIGS=small,lm runs those configurations alone.
BENCH_PACKAGES := $(PACKAGES) python3-torch
bench: export BENCH_VENV = $(abspath $(BUILD))/bench-venv
bench: build
	@$(MAKE) --no-print-directory deps PACKAGES="$(BENCH_PACKAGES)"
	bench/peers/install.sh
	/usr/bin/python3 bench/compare.py ./$(BUILD)/tapegrad $(if $(BENCH_CONFIGS),--configs $(BENCH_CONFIGS))

# The character language model on the fortunes corpus, tapegrad against PyTorch (not part of `make bench`:
# about 20 minutes at the default 600 steps on 2 cores): validation bits per character after LM_STEPS steps
# of each, and their training tokens/s (scripts/lm_parity.py, docs/performance.md "Language model"). It
# installs Debian's fortunes package for the corpus (scripts/fortunes_corpus.sh) and python3-torch.
LM_STEPS ?= 600
bench-lm: deps $(BUILD)/CMakeCache.txt
	@$(MAKE) --no-print-directory deps PACKAGES="$(BENCH_PACKAGES) fortunes"
	cmake --build $(BUILD) --target tapegrad -j $(JOBS)
	/usr/bin/python3 scripts/lm_parity.py ./$(BUILD)/tapegrad --steps $(LM_STEPS)

# The long model's time per step and peak memory against T = 256 ... 8192, tapegrad and PyTorch (PyTorch up
# to where it runs out of memory or takes over 60 s a step): a Markdown table in LONG_SCALING and a log-log
# plot beside it (.svg in place of .md). Tens of minutes, so not part of `make bench`; LENGTHS=256,512 for a
# quick look (bench/long_scaling.py).
LONG_SCALING ?= $(BUILD)/long_scaling.md
LENGTHS      ?= 256,512,1024,2048,4096,8192
bench-long-scaling: deps $(BUILD)/CMakeCache.txt
	@$(MAKE) --no-print-directory deps PACKAGES="$(BENCH_PACKAGES)"
	cmake --build $(BUILD) --target tapegrad -j $(JOBS)
	/usr/bin/python3 bench/long_scaling.py ./$(BUILD)/tapegrad $(LONG_SCALING) --lengths $(LENGTHS)

# The matrix products of a small and a medium training step through OpenBLAS and through oneDNN (Debian's
# libdnnl-dev), on one thread and two (bench/products.cpp, docs/performance.md "Product libraries").
bench-products:
	@$(MAKE) --no-print-directory deps PACKAGES="$(PACKAGES) libdnnl-dev"
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)
	cmake --build $(BUILD) --target bench_products -j $(JOBS)
	./$(BUILD)/bench_products

# Data-parallel scaling (not part of `make test`): `mpirun -np N tapegrad train` for N = 1, 2, 4 on the small
# and medium models, and the communication cost projected to more ranks and real networks
# (bench/mpi_scaling.py, docs/distributed.md).
bench-mpi: test-deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)
	cmake --build $(BUILD) --target tapegrad -j $(JOBS)
	/usr/bin/python3 bench/mpi_scaling.py ./$(BUILD)/tapegrad

clean:
	rm -rf $(BUILD) build-asan build-fuzz
