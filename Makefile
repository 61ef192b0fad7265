# lens-lakehouse: every target installs what it needs first (`make install` is idempotent).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LAKEHOUSE := $(BIN)/lakehouse
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
# ENGINE=spark (Apache Spark with Delta Lake in-process) or ENGINE=spark-connect runs a target on
# Apache Spark instead of the embedded Sail; LAKEHOUSE_ENGINE does the same
ifdef ENGINE
export LAKEHOUSE_ENGINE := $(ENGINE)
endif
.PHONY: help install test test-parity test-fast fuzz lint typecheck demo ingest materialize rebuild register revert optimize status sql serve bench clean

help: ## show this help
	@echo "lens-lakehouse: make <target>"
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-13s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the project with its test extras

# tests run in TEST_WORKERS processes (pytest-xdist; each starts its own engines): much of a test's
# time is an engine's fixed cost, which another process's work overlaps
TEST_WORKERS ?= 2
# the slowest tests are listed at the end: CI has 30 minutes on 2 cores, and a test that grows shows here
test: $(STAMP) ## run the test suite (unit, Spark, end-to-end)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal -m "not serial" --durations=20
	$(BIN)/python -m pytest -q -m serial

test-parity: $(STAMP) ## the whole suite, every parity test on both engines (slow: over an hour on 2 cores)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal --slow-on-spark -m "not serial"
	$(BIN)/python -m pytest -q --slow-on-spark -m serial

test-fast: $(STAMP) ## run only the pure unit tests
	$(BIN)/python -m pytest -q tests/unit

FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?= entry message landing lensfile
fuzz: $(STAMP) ## fuzz the decoders (entry, message, landing line, lens file), FUZZ_SECONDS each (300)
	@for target in $(FUZZ_TARGETS); do \
		echo "== fuzzing $$target for $(FUZZ_SECONDS) s"; \
		$(BIN)/python -m tests.fuzz $$target -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 2>&1 \
			| grep -E '^(#[0-9]+[[:space:]]+DONE|Done |stat::|==[0-9]+== ERROR|Traceback|.*Error|.*Defect|artifact_prefix)' ; \
		test $${PIPESTATUS[0]} -eq 0 || exit 1; \
	done

lint: $(STAMP) ## ruff and mypy
	$(BIN)/ruff check lakehouse pipelines tests
	$(BIN)/mypy

demo: $(STAMP) ## the main job on real input (DEMO_LAKE=s3://bucket/demo: its lake on object storage)
	$(LAKEHOUSE) demo $(if $(DEMO_LAKE),--lake '$(DEMO_LAKE)')

ingest: $(STAMP) ## landing files -> bronze
	$(LAKEHOUSE) ingest

materialize: $(STAMP) ## bronze -> silver -> gold
	$(LAKEHOUSE) materialize

rebuild: $(STAMP) ## recompute silver and gold from bronze
	$(LAKEHOUSE) materialize --rebuild

register: $(STAMP) ## register a schema for gold: SCHEMA=<author hex>:<log_id> (or its name) NAME=<name>
	$(LAKEHOUSE) register "$(SCHEMA)" --name "$(NAME)"

revert: $(STAMP) ## revert a schema: SCHEMA=<name or id> TARGET=<version> (YES=1: without asking)
	$(LAKEHOUSE) revert "$(SCHEMA)" --target "$(TARGET)" $(if $(YES),--yes)

optimize: $(STAMP) ## compact the lake's tables: fewer files, no deletion vectors (CHECK=1: only list what it would do)
	$(LAKEHOUSE) optimize $(if $(CHECK),--check)

status: $(STAMP) ## counts per layer and status
	$(LAKEHOUSE) status

sql: $(STAMP) ## interactive Spark SQL prompt over the lake
	$(LAKEHOUSE) sql

serve: $(STAMP) ## Spark Connect server on sc://localhost:15002 with the lake's catalog (ENGINE=spark: Apache Spark)
	$(LAKEHOUSE) serve

MESSAGES ?= 100000
bench: $(STAMP) ## benchmarks, not part of make test: MESSAGES="100000 1000000" (one scale or several)
	$(BIN)/python -m tests.benchmarks $(foreach n,$(MESSAGES),--messages $(n)) --json bench-results.json

clean: ## remove the virtualenv and caches (keeps lake/ and keys)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
