# The two commands a user needs: `make demo` and `make test`. Both set up .venv with the pinned
# dependencies on first use, then build incrementally.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PLUGIN_INC = $(shell $(PY) -c "import os, xla_plugins.xla_cpu_pjrt as p; print(os.path.dirname(p.__file__))")
C_SRC := $(wildcard csrc/base/*.c csrc/runtime/*.c csrc/hlo/*.c csrc/ops/*.c csrc/eager/*.c)
C_HDR := $(wildcard csrc/*/*.h csrc/*/*.def)
CFLAGS_CORE := -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Wno-unused-parameter -Icsrc -DGOLDEN_DIR=\"$(CURDIR)/tests/c/golden\"
C_TESTS := $(patsubst tests/c/%.c,build/ctest/%,$(wildcard tests/c/*_test.c))

.PHONY: setup build demo test test-c test-python bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip==25.3
	$(PY) -m pip install -q -r requirements.txt
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 TORCH_PJRT_SKIP_EXT=1 $(PY) -m pip install -q --no-build-isolation --no-deps -e .
	touch $@

# In-place, incremental (ninja) build of torch_pjrt._C.
build: setup
	TORCH_DEVICE_BACKEND_AUTOLOAD=0 $(PY) setup.py -q build_ext --inplace

demo: build
	$(PY) examples/train_mlp.py

build/ctest/%: tests/c/%.c $(C_SRC) $(C_HDR) | setup
	@mkdir -p build/ctest
	$(CC) $(CFLAGS_CORE) -I$(PLUGIN_INC)/include $< $(C_SRC) -o $@ -ldl -lpthread -lm

test-c: $(C_TESTS)
	@set -e; for t in $(C_TESTS); do TP_TEST_PLUGIN=$(PLUGIN_INC)/xla_cpu_pjrt.so $$t; done

test-python: build
	$(PY) -m pytest -q tests/python

test: test-c test-python

bench: build
	$(PY) bench/eager_overhead.py

clean:
	rm -rf build python/torch_pjrt/_C*.so
