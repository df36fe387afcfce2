SHELL := /bin/bash
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
CHECKOV_VENV := .venv-checkov
# The Lambda runtime is python3.13: the environment, `sam build` and the
# tests all use it. pyenv picks it through .python-version; else PATH.
PYTHON313 := $(shell (command -v pyenv >/dev/null && pyenv which python3.13 2>/dev/null) || command -v python3.13)

export PATH := $(BIN):$(PATH)
export SAM_CLI_TELEMETRY := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# Material for MkDocs prints a notice about its successor on every build.
export NO_MKDOCS_2_WARNING := 1

DEV_ARGS ?=
# `make clean DEV_STATE=1` also deletes the dev server's saved counters.
DEV_STATE ?=

.PHONY: help venv dev test test-long test-deployed lint security build unit docs docs-serve openapi mutants lock bench clean

help:  ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements/dev.txt requirements/lock.txt layers/core/requirements.txt client/pyproject.toml
	@test -n "$(PYTHON313)" || { echo "python3.13 not found: install it (pyenv install 3.13.0) or put it on PATH"; exit 1; }
	@test -e $@ || echo "First run: building $(VENV) from the pinned requirements. This takes a few minutes (about 5 on a busy 2-core machine); later runs start at once."
	@test -x $(BIN)/python || $(PYTHON313) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c requirements/lock.txt -r requirements/dev.txt
	@touch $@

venv: $(VENV)/.installed  ## Create the environment (pinned) if it is missing or stale

$(CHECKOV_VENV)/.installed: requirements/checkov.txt requirements/checkov-lock.txt
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON313) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -c requirements/checkov-lock.txt -r requirements/checkov.txt
	@touch $@

dev: venv  ## Run the API on http://127.0.0.1:3000 (DEV_ARGS="--port 3001 --fresh" ...)
	python -m devserver $(DEV_ARGS)

test: lint security build docs  ## Everything CI runs: lint, security scan, sam build, the docs site, the test suites
	IDBLOCKS_REQUIRE_BUILD=1 python -m pytest

test-long: venv build  ## The test suites with the concurrency proof twenty times longer (pytest --long)
	IDBLOCKS_REQUIRE_BUILD=1 python -m pytest --long

lint: venv  ## ruff, cfn-lint, sam validate --lint
	ruff check .
	ruff format --check .
	cfn-lint template.yaml
	sam validate --lint

security: $(CHECKOV_VENV)/.installed  ## checkov on template.yaml: no failed check (suppressions carry their reason)
	$(CHECKOV_VENV)/bin/checkov -f template.yaml --framework cloudformation --skip-download --compact --quiet

build: venv  ## sam build (the layer and the three functions, arm64)
	sam build

unit: venv  ## The fast in-process tests (tests/unit), for every change
	python -m pytest tests/unit

# STACK or URL, e.g. make test-deployed STACK=idblocks-dev (REGION=eu-west-1).
STACK ?=
URL ?=
REGION ?=
test-deployed: venv  ## tests/e2e against a deployed stack: STACK=name or URL=https://... (signed with your AWS credentials)
	$(if $(STACK)$(URL),,$(error make test-deployed needs STACK=<stack name> or URL=<the stack's ApiUrl>))
	python -m tests.e2e.deployed --stack "$(STACK)" --url "$(URL)" --region "$(REGION)"

docs: venv  ## Build the documentation site into site/ (strict: a broken link or a page missing from the nav fails)
	mkdocs build --strict --quiet

docs-serve: venv  ## Serve the documentation site on http://127.0.0.1:8000, rebuilt on every change
	mkdocs serve --strict --dev-addr 127.0.0.1:8000

openapi: venv  ## Regenerate docs/openapi.json from the code
	python -m scripts.openapi > docs/openapi.json

mutants: venv build  ## Break each guarded property on purpose and check the tests catch it
	python -m scripts.mutants

lock: venv  ## Re-pin every transitive dependency into requirements/lock.txt
	python -m pip freeze --exclude-editable | grep -v '^-e ' > requirements/lock.txt

bench: build  ## Benchmarks (not tests): client, server, scale (simulated); results land in bench/results/
	python -m bench

clean:  ## Remove everything generated (environments included); DEV_STATE=1 also the dev counters
	rm -rf .aws-sam $(VENV) $(CHECKOV_VENV) .pytest_cache .ruff_cache .hypothesis .schemathesis \
		build dist client/build bench/.cache site
	find . -path ./.git -prune -o \( -name __pycache__ -o -name '*.egg-info' \) -type d -prune -exec rm -rf {} +
ifeq ($(DEV_STATE),1)
	rm -rf .dev-state
else
	@test ! -e .dev-state || echo "kept .dev-state/ (the dev server's counters): make clean DEV_STATE=1 removes it too"
endif
