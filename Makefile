# `make run` runs the main job on the embedded default model; `make test` runs the whole suite.
# Each does its own set-up from a fresh clone: system packages, virtual environment, install.

SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c
PYTHON ?= python3
LLAMA_CPP_PYTHON := llama-cpp-python==0.3.36
# Built for this CPU (-march=native) but without AMX: some virtual machines report AMX in CPUID yet trap on its
# tile instructions (SIGILL inside llama.cpp's AMX buffer type); AVX-512 and VNNI stay on.
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=ON -DCMAKE_C_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16' \
  -DCMAKE_CXX_FLAGS='-mno-amx-tile -mno-amx-int8 -mno-amx-bf16'
LLAMA_BUILD_TAG := native-noamx
else
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=ON
LLAMA_BUILD_TAG := native
endif
LLAMA_WHEELS ?= $(HOME)/.cache/lamarck/wheels/$(LLAMA_CPP_PYTHON)-$(LLAMA_BUILD_TAG)
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.lamarck-installed
PIP_VERSION := 26.3
# Exactly what CI tested: every package pinned with its files' hashes (requirements/README.md; `make lock` renews)
LOCK := requirements/lock.txt
MODEL_LOCK := requirements/model-lock.txt
LOCK_TOOLS := .cache/lock-tools
UV_VERSION := 0.13.9
# Where `make lock` finds the CPU build of PyTorch: this machine's pip find-links folder, else PyTorch's CPU index
PIP_FIND_LINKS := $(shell $(PYTHON) -m pip config get global.find-links 2>/dev/null)
TORCH_SOURCE ?= $(if $(PIP_FIND_LINKS),--find-links $(PIP_FIND_LINKS),--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
export LAMARCK_DATA_DIR ?= .lamarck

.PHONY: setup system-packages vendor run test lint typecheck format lock bench bench-evolution clean

setup: system-packages $(STAMP)

system-packages:
	@missing=""; command -v bwrap >/dev/null 2>&1 || missing="$$missing bubblewrap"; \
	test -x /usr/bin/chromium || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = "0" ]; then \
	    echo "installing system packages:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing system packages:$$missing — install them with: sudo apt-get install$$missing" >&2; exit 1; \
	  fi; \
	fi

# The web UI's third-party assets (Swagger UI, uPlot) from the npm registry at the versions tools/vendor/package-lock.json
# pins, checked against src/lamarck/web_ui/vendor/SHA256SUMS; VENDOR_ARGS=--update rewrites the sums after a version bump.
vendor:
	$(PYTHON) tools/vendor/vendor.py $(VENDOR_ARGS)

$(STAMP): pyproject.toml $(LOCK) $(MODEL_LOCK)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q pip==$(PIP_VERSION)
	@awk '/^llama-cpp-python==/{p=1} p{print} p&&!/\\$$/{exit}' $(LOCK) > $(VENV)/llama-cpp-source.txt
	@$(PY) -c "import llama_cpp" 2>/dev/null || { \
	  ls $(LLAMA_WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || { \
	  echo "building $(LLAMA_CPP_PYTHON) for this CPU (several minutes, once per machine: the wheel is kept in $(LLAMA_WHEELS))"; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip wheel -v --no-deps --no-cache-dir --require-hashes -w $(LLAMA_WHEELS) \
	    -r $(VENV)/llama-cpp-source.txt 2>&1 \
	    | tee $(VENV)/llama-cpp-build.log \
	    | { grep --line-buffered -oE '^ *\[[0-9]+/[0-9]+\]' | sed -u 's/^ */  compiling llama.cpp /'; true; } \
	  || { tail -n 30 $(VENV)/llama-cpp-build.log; echo "building llama-cpp-python failed (full log: $(VENV)/llama-cpp-build.log)" >&2; exit 1; }; }; \
	  $(PY) -m pip install -q --no-deps $(LLAMA_WHEELS)/llama_cpp_python-*.whl; }
	$(PY) -m pip install -q --require-hashes --no-deps -r $(LOCK)
	$(PY) -m pip install -q --require-hashes --no-deps -r $(MODEL_LOCK)
	$(PY) -m pip install -q --no-deps -e .
	@touch $@

# Renews the lock files from pyproject.toml's pins (uv in a tool environment of its own, not the project's).
lock:
	@test -x $(LOCK_TOOLS)/bin/uv || { $(PYTHON) -m venv $(LOCK_TOOLS) && $(LOCK_TOOLS)/bin/pip install -q uv==$(UV_VERSION); }
	$(LOCK_TOOLS)/bin/uv pip compile pyproject.toml --extra test --override requirements/overrides.txt $(TORCH_SOURCE) \
	  --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --custom-compile-command 'make lock' -o $(LOCK)
	$(LOCK_TOOLS)/bin/uv pip compile requirements/model.in --no-deps --generate-hashes --python-version 3.11 \
	  --custom-compile-command 'make lock' -o $(MODEL_LOCK)

run: setup
	$(VENV)/bin/lamarck init
	$(VENV)/bin/lamarck models import-default
	$(VENV)/bin/lamarck evolve --env arithmetic --generations 2 --batch 4 --samples 1
	@echo "(the lamarck command is $(VENV)/bin/lamarck; see README.md for the rest)"
	@echo "watch this run in the browser: $(VENV)/bin/lamarck keys create --scope read,runs, then $(VENV)/bin/lamarck serve and open http://127.0.0.1:8000/ui/ (sign in with the key)"

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

# mypy as configured in pyproject.toml: strict on platform/, training/ and agents/, default checks elsewhere
typecheck: setup
	$(VENV)/bin/mypy

format: setup
	$(VENV)/bin/ruff check --fix src tests benchmarks
	$(VENV)/bin/ruff format src tests benchmarks

bench: setup
	$(PY) benchmarks/bench_engine.py
	$(PY) benchmarks/bench_sandbox.py
	$(PY) benchmarks/bench_memory.py
	$(PY) benchmarks/bench_executor.py
	$(PY) benchmarks/bench_orchestrator.py
	$(PY) benchmarks/bench_training.py
	$(PY) benchmarks/bench_formats.py
	$(PY) benchmarks/bench_tools.py
	$(PY) benchmarks/bench_scaleout.py

# The proof that the loop improves the model: 60 + 30 minutes of evolution on a 2-core CPU, then the evaluations.
bench-evolution: setup
	$(PY) benchmarks/bench_evolution.py

clean:
	rm -rf $(VENV) .cache .pytest_cache
