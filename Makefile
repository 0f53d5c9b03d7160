# demuxlab — the two commands of the README, and the steps they are made of.
#   make quickstart   set up, build, run the smoke experiment through Snakemake (local profile)
#   make test         set up, build, run every test
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: help setup build sanitize images quickstart test lint bench clean db-stop testbed testbed-down dashboard

help:  ## List the targets.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

setup:  ## Install system packages, start Docker, create .venv with the package (idempotent).
	@bash scripts/setup.sh

build:  ## Build the static C binaries into build/bin/.
	@$(MAKE) --no-print-directory -C images build

sanitize:  ## Build the ASan+UBSan and TSan variants into build/{asan,tsan}/bin/.
	@$(MAKE) --no-print-directory -C images sanitize

images: build  ## Build the FROM-scratch container images of server and client.
	@bash images/build-image.sh

quickstart: setup build  ## Run the smoke experiment end to end and print where the results are.
	@$(VENV)/bin/demuxlab db upgrade
	@cd workflows && ../$(VENV)/bin/snakemake --profile local all
	@echo
	@echo "quickstart: results in $(CURDIR)/workflows/results/smoke/ (CSV, figures, run records)"
	@echo "quickstart: database $$($(VENV)/bin/demuxlab db url)"
	@echo "quickstart: dashboard: make dashboard   (or .venv/bin/demuxlab dashboard), then open http://127.0.0.1:8050/"

test: setup build sanitize  ## Set up, build, and run every test.
	@$(VENV)/bin/ruff check src tests bench dashboard
	@$(VENV)/bin/ruff format --check src tests bench dashboard
	@$(VENV)/bin/mypy
	@$(VENV)/bin/lint-imports --no-cache
	@cd workflows && ../$(VENV)/bin/snakemake --lint
	@cd playbooks && ../$(VENV)/bin/ansible-lint -q
	@$(VENV)/bin/pytest -q

lint:  ## ruff, mypy, the layer contracts (lint-imports), snakemake --lint and ansible-lint only.
	@$(VENV)/bin/ruff check src tests bench dashboard
	@$(VENV)/bin/ruff format --check src tests bench dashboard
	@$(VENV)/bin/mypy
	@$(VENV)/bin/lint-imports --no-cache
	@cd workflows && ../$(VENV)/bin/snakemake --lint
	@cd playbooks && ../$(VENV)/bin/ansible-lint -q

bench: $(if $(B),setup build)  ## List the benchmarks; B=NAME runs one (ARGS="its options"), printing its figures.
	@$(PY) -m bench $(B) $(ARGS)

testbed: setup  ## Create the test cluster: PAIRS (default 2) pairs of SSH hosts; SLURM=1: with Slurm on them.
	@$(VENV)/bin/demuxlab testbed up --pairs $(or $(PAIRS),2) $(if $(SLURM),--slurm)

testbed-down:  ## Remove the test cluster (everything `make testbed` made but its cached host image).
	@$(VENV)/bin/demuxlab testbed down

dashboard: setup  ## Serve the dashboard on http://127.0.0.1:8050/ (DASHBOARD_ARGS="--host H --port P").
	@$(VENV)/bin/demuxlab dashboard $(DASHBOARD_ARGS)

db-stop:  ## Stop the embedded PostgreSQL.
	@$(VENV)/bin/demuxlab db stop

clean:  ## Remove build outputs (keeps .venv and the database).
	@$(MAKE) --no-print-directory -C images clean
	@rm -rf build workflows/results workflows/logs workflows/.snakemake
