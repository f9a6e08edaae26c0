# The two Quickstart commands: `make run` (main job) and `make test` (test suite).
VENV ?= .venv
PY := $(VENV)/bin/python
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1
export TOKENIZERS_PARALLELISM ?= false
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= 1
# Real ALFWorld games for the needs_data tests, when a copy lies beside the checkout.
ALFWORLD_DATA ?= $(shell [ -d ../shared/data/alfworld ] && cd ../shared/data/alfworld && pwd)
ifneq ($(strip $(ALFWORLD_DATA)),)
export ALFWORLD_DATA
else
unexport ALFWORLD_DATA
endif

.PHONY: setup run test test-fast bench

setup:
	bash scripts/setup.sh

run: setup
	$(PY) -m sapo_cli evaluate --env sapo/ALFWorld-Mini-v0 --agent expert
	$(PY) -m sapo_cli evaluate --env sapo/ALFWorld-Mini-v0 --agent search
	$(PY) -m sapo_cli evaluate --env sapo/ALFWorld-Mini-v0 --agent random
	$(PY) -m sapo_cli compare
	cat runs/compare/results.md

test: setup
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --no-loadscope-reorder --durations=25

test-fast: setup
	$(PY) -m pytest -q -m "not slow and not browser and not needs_data"
