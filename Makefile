# The two commands a user needs: `make demo` and `make test`. Both set up .venv with the pinned
# dependencies on first use, then build incrementally.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PLUGIN_INC = $(shell $(PY) -c "import os, xla_plugins.xla_cpu_pjrt as p; print(os.path.dirname(p.__file__))")
# The C core (no PyTorch): its sources and flags live here only. It is compiled once into a
# static library that the extension (setup.py runs `make core`) and the C tests link.
C_SRC := $(wildcard csrc/base/*.c csrc/runtime/*.c csrc/dist/*.c csrc/hlo/*.c csrc/ops/*.c csrc/exec/*.c)
CFLAGS_CORE := -std=c11 -D_GNU_SOURCE -g -O2 -fPIC -fvisibility=hidden -Wall -Wextra -Wno-unused-parameter -Icsrc
# The PJRT header: the plugin package's (setup.py passes it; here it is read from .venv).
PJRT_INC ?= $(PLUGIN_INC)/include
# Objects wait for the set-up .venv (the header is in it) unless the header's folder was given.
CORE_SETUP := $(if $(filter command line,$(origin PJRT_INC)),,$(VENV)/.installed)
CORE_LIB := build/core/libtpcore.a
CFLAGS_TEST := -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Wno-unused-parameter -Icsrc -DGOLDEN_DIR=\"$(CURDIR)/tests/c/golden\"
C_TESTS := $(patsubst tests/c/%.c,build/ctest/%,$(wildcard tests/c/*_test.c))

.PHONY: setup core build demo test test-c test-python bench titan compat-ops compat-modules compat-models clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip==25.3
	$(PY) -m pip install -q -r requirements.txt
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 TORCH_PJRT_SKIP_EXT=1 $(PY) -m pip install -q --no-build-isolation --no-deps -e .
	touch $@

# In-place, incremental (ninja) build of torch_pjrt._C. Serialised by a lock: two builds in one
# tree at once (two terminals, parallel jobs) would race on ninja's files and the copied library.
build: setup
	@mkdir -p build
	flock build/.build.lock env TORCH_DEVICE_BACKEND_AUTOLOAD=0 $(PY) setup.py -q build_ext --inplace

demo: build
	$(PY) examples/train_mlp.py
	$(PY) examples/minilm.py

# One object per source, with its header dependencies (-MMD), in build/core/ (or build/asan/core/).
core: $(CORE_LIB)
CORE_OBJS := $(patsubst csrc/%.c,build/core/%.o,$(C_SRC))
build/core/%.o: csrc/%.c | $(CORE_SETUP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_CORE) -I$(PJRT_INC) -MMD -MP -c $< -o $@
$(CORE_LIB): $(CORE_OBJS)
	rm -f $@ && ar rcs $@ $^
-include $(CORE_OBJS:.o=.d)

build/ctest/%: tests/c/%.c $(CORE_LIB) | setup
	@mkdir -p build/ctest
	$(CC) $(CFLAGS_TEST) -I$(PJRT_INC) -MMD -MP $< $(CORE_LIB) -o $@ -ldl -lpthread -lm
-include $(C_TESTS:=.d)

test-c: $(C_TESTS)
	@set -e; for t in $(C_TESTS); do TP_TEST_PLUGIN=$(PLUGIN_INC)/xla_cpu_pjrt.so $$t; done

test-python: build
	$(PY) -m pytest -q tests/python

test: test-c test-asan test-python

bench: build
	$(PY) bench/eager_overhead.py
	$(PY) bench/ops.py
	$(PY) bench/collectives.py
	$(PY) bench/shapes.py
	$(PY) bench/models.py

# TorchTitan's llama3 debug model for TITAN_ARGS (default 300 steps) on 2 processes: tpu eager, tpu
# compiled and CPU from one seed checkpoint, tokens/s and fallbacks in one table (long: see
# tools/torchtitan_run.py).
TITAN_ARGS ?= --steps 300
titan: build
	$(PY) tools/torchtitan_run.py $(TITAN_ARGS)

# The full OpInfo sweep (long: run it in shards with --shard i/n and `compat merge` to split it);
# regenerates COMPAT.md and compat/ops.json, plus compat/nonfinite.json (NaN/inf inputs) and
# compat/error_inputs.json (arguments that must raise). COMPAT_ARGS=--quick runs the CI-sized
# subset; COMPAT_ARGS="--tiers clean" the clean samples alone.
compat-ops: build
	$(PY) tools/compat.py ops $(COMPAT_ARGS)

# PyTorch's ModuleInfo database: every nn.Module class it describes, built on CPU, deep-copied to
# tpu, forward and backward compared; writes compat/modules.json and COMPAT.md's Modules section
# (some 30-40 minutes on two cores; --modules nn.LSTM,... for a few).
COMPAT_MODULES_ARGS ?= --jobs 1
compat-modules: build
	$(PY) tools/compat.py modules $(COMPAT_MODULES_ARGS)

# The model harness: every Transformers architecture (tiny configs), torchvision's and timm's
# classification models, CPU vs tpu; writes compat/models.json and COMPAT.md's Models section.
# Long (about 7 s a model with --jobs 2 on two cores: some 90 minutes for all ~730); split it with
# --time-limit S and --resume, or COMPAT_MODELS_ARGS="--limit 5" for a short run.
COMPAT_MODELS_ARGS ?= --jobs 2 --shuffle --limit timm=25,*=1000
compat-models: build
	$(PY) tools/compat.py models $(COMPAT_MODELS_ARGS)

clean:
	rm -rf build python/torch_pjrt/_C*.so

# ---- Sanitizers: the C core and its unit tests under ASan + UBSan (+ LeakSanitizer). ----------
# The same sources and tests, built with the sanitizers into build/asan/. Any ASan/UBSan report or leak
# in our code fails the run; tests/c/lsan.supp may only hold the PJRT plugin's own allocations.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
C_TESTS_ASAN := $(patsubst tests/c/%.c,build/asan/%,$(wildcard tests/c/*_test.c))
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:max_free_fill_size=4096:abort_on_error=0:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:strict_string_checks=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/c/lsan.supp:print_suppressions=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: test-asan fuzz

CORE_LIB_ASAN := build/asan/core/libtpcore.a
CORE_OBJS_ASAN := $(patsubst csrc/%.c,build/asan/core/%.o,$(C_SRC))
build/asan/core/%.o: csrc/%.c | $(CORE_SETUP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_CORE) -O1 $(ASAN_FLAGS) -I$(PJRT_INC) -MMD -MP -c $< -o $@
$(CORE_LIB_ASAN): $(CORE_OBJS_ASAN)
	rm -f $@ && ar rcs $@ $^
-include $(CORE_OBJS_ASAN:.o=.d)

build/asan/%: tests/c/%.c $(CORE_LIB_ASAN) | setup
	@mkdir -p build/asan
	$(CC) $(CFLAGS_TEST) $(ASAN_FLAGS) -I$(PJRT_INC) -MMD -MP $< $(CORE_LIB_ASAN) -o $@ -ldl -lpthread -lm
-include $(C_TESTS_ASAN:=.d)

test-asan: $(C_TESTS_ASAN)
	@set -e; for t in $(C_TESTS_ASAN); do echo "== $$t"; $(ASAN_ENV) TP_TEST_PLUGIN=$(PLUGIN_INC)/xla_cpu_pjrt.so $$t; done

# ---- Differential fuzzer: random ATen programs, CPU vs tpu (tools/fuzz.py). --------------------
# Findings (minimised standalone reproducers + summary-seed<S>.json) go to fuzz-findings/.
FUZZ_SEED ?= 0
FUZZ_PROGRAMS ?= 300
FUZZ_TIME ?= 120
fuzz: build
	$(PY) tools/fuzz.py --seed $(FUZZ_SEED) --programs $(FUZZ_PROGRAMS) --time-limit $(FUZZ_TIME) --out fuzz-findings
