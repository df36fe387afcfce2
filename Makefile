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

.PHONY: help venv dev test test-long test-deployed lint security build unit openapi api-tools mutants lock bench clean node node-test test-repeat soak docs docs-serve dist iam-simulator sar

help:  ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements/dev.txt requirements/lock.txt layers/core/requirements.txt client/pyproject.toml
	@test -n "$(PYTHON313)" || { echo "python3.13 not found: install it (pyenv install 3.13.0) or put it on PATH"; exit 1; }
	@test -e $@ || echo "First run: building $(VENV) from the pinned requirements. This takes a few minutes (about 5 on a busy 2-core machine); later runs start at once."
	@test -x $(BIN)/python || $(PYTHON313) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c requirements/lock.txt -r requirements/dev.txt
	@touch $@

venv: $(VENV)/.installed  ## Create the environment (pinned) if it is missing or stale

# The Node client (client-node/): Node 20 or later, its packages from the
# committed lockfile, compiled by tsc into client-node/dist.
NODE_DIR := client-node
NODE_SOURCES := $(shell find $(NODE_DIR)/src $(NODE_DIR)/test $(NODE_DIR)/bench $(NODE_DIR)/examples -name '*.ts' 2>/dev/null)

$(NODE_DIR)/node_modules/.installed: $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	@command -v node >/dev/null || { echo "node not found: the Node client needs Node.js 20 or later on PATH (https://nodejs.org)"; exit 1; }
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || \
		{ echo "Node.js $$(node --version) is too old: the Node client needs Node.js 20 or later"; exit 1; }
	cd $(NODE_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(NODE_DIR)/dist/.built: $(NODE_DIR)/node_modules/.installed $(NODE_DIR)/tsconfig.json $(NODE_SOURCES)
	cd $(NODE_DIR) && rm -rf dist && npx tsc -p tsconfig.json
	@touch $@

node: $(NODE_DIR)/dist/.built  ## Install the Node client's packages (npm ci) and compile it

node-test: node  ## The Node client's unit tests (node --test)
	cd $(NODE_DIR) && node --test dist/test/unit/

# The tools for docs/openapi.json (api-tools/): Redocly's linter, and the
# TypeScript client generated from the document (openapi-typescript,
# openapi-fetch), from their committed lockfile. Not the Node client's: it
# is a published package, and these are not its dependencies.
API_TOOLS := api-tools
# Redocly asks for neither telemetry nor a newer version.
export REDOCLY_TELEMETRY := off
export REDOCLY_SUPPRESS_UPDATE_NOTICE := true

$(API_TOOLS)/node_modules/.installed: $(API_TOOLS)/package.json $(API_TOOLS)/package-lock.json
	@command -v node >/dev/null || { echo "node not found: the API tools need Node.js 20.19 or later on PATH (https://nodejs.org)"; exit 1; }
	cd $(API_TOOLS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

api-tools: $(API_TOOLS)/node_modules/.installed  ## Install the tools for docs/openapi.json (npm ci in api-tools/): Redocly, openapi-typescript

# The IAM policy evaluator the template tests use (tests/support/iam.py), from
# its committed lockfile.
IAM_DIR := tests/support/iam
$(IAM_DIR)/node_modules/.installed: $(IAM_DIR)/package.json $(IAM_DIR)/package-lock.json
	@command -v node >/dev/null || { echo "node not found: the IAM policy evaluator needs Node.js 20 or later on PATH"; exit 1; }
	cd $(IAM_DIR) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

iam-simulator: $(IAM_DIR)/node_modules/.installed  ## Install the IAM policy evaluator the template tests use (npm ci)

$(CHECKOV_VENV)/.installed: requirements/checkov.txt requirements/checkov-lock.txt
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON313) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet -c requirements/checkov-lock.txt -r requirements/checkov.txt
	@touch $@

dev: venv  ## Run the API on http://127.0.0.1:3000 (DEV_ARGS="--port 3001 --fresh" ...)
	python -m devserver $(DEV_ARGS)

# What the suites need runs first, TEST_JOBS targets at a time: on a first run
# most of it is pip and npm fetching packages, and each check is one process,
# so one core's check overlaps another's download. --output-sync prints each
# target's output whole when it ends, so a failure reads as it does alone;
# TEST_JOBS=1 runs them one after another, as `make lint security ...` does.
TEST_JOBS ?= 4
TEST_SETUP := lint security build docs node-test api-tools iam-simulator

# Then the suites over every core, a test file per worker at a time
# (pytest-xdist, --dist loadfile): a file's module-wide servers and fixtures
# are made once, and its tests run in order, as they do alone. Every test keeps
# to its own ports and files, and none asserts on the machine's speed. Python
# may cache bytecode here even where PYTHONDONTWRITEBYTECODE is set: each
# worker, dev server and child interpreter otherwise compiles the project's
# modules again, and pytest rewrites every test module's asserts again.
test:  ## Everything CI runs: lint, security scan, sam build, the docs site, the test suites (Node's too)
	@echo "make test: $(TEST_SETUP), $(TEST_JOBS) at a time (TEST_JOBS=); each one's output shows when it ends"
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target $(TEST_SETUP)
	PYTHONDONTWRITEBYTECODE= IDBLOCKS_REQUIRE_BUILD=1 python -m pytest -n auto --dist loadfile

test-long: venv build api-tools iam-simulator  ## The test suites with the concurrency proof twenty times longer (pytest --long)
	IDBLOCKS_REQUIRE_BUILD=1 python -m pytest --long

# How many runs, and what pytest is given (default: every suite, as make test).
N ?= 5
PYTEST_ARGS ?=
test-repeat: venv build api-tools iam-simulator  ## The test suites N times (N=5 PYTEST_ARGS=tests/integration); which tests failed in which run
	IDBLOCKS_REQUIRE_BUILD=1 python -m scripts.test_repeat --runs $(N) -- $(PYTEST_ARGS)

# mypy reads its folders from pyproject.toml ([tool.mypy]); the client is
# checked again as Python 3.11 sees it, the oldest version it supports. The
# nested-application example is a user's template: linted like ours. tsc
# --strict checks the Node client in `make node`, which lint needs: the same
# tsconfig.json over the same sources, so lint does not check it a second time.
NESTED_EXAMPLE := examples/nested-application/template.yaml

lint: venv node api-tools sar  ## ruff, mypy (strict), cfn-lint, sam validate --lint (ours, the one to publish, the nested example); tsc --strict and eslint on the Node client; the OpenAPI document
	ruff check .
	ruff format --check .
	mypy
	mypy --python-version 3.11 client/idblocks
	cfn-lint template.yaml $(NESTED_EXAMPLE)
	sam validate --lint
	sam validate --lint -t $(NESTED_EXAMPLE)
	cd $(NODE_DIR) && npx eslint .
	openapi-spec-validator docs/openapi.json
	cd $(API_TOOLS) && npx redocly lint ../docs/openapi.json

# The template the Serverless Application Repository publishes
# (docs/nested-application.md), made from template.yaml by
# scripts/sar_template.py and never edited: the repository takes no transform
# but SAM's, so the values SAM must read as literals are decided here
# (ClientAuth AWS_IAM, SnapStart off). A variant of one's own:
# make sar SAR_SET="ClientAuth=API_KEY".
SAR_TEMPLATE := build/sar/template.yaml
SAR_SET ?=

sar: venv  ## The template to publish to the Serverless Application Repository, linted: build/sar/template.yaml (SAR_SET="ClientAuth=API_KEY")
	python -m scripts.sar_template --output $(SAR_TEMPLATE) $(foreach setting,$(SAR_SET),--set $(setting))
	cfn-lint $(SAR_TEMPLATE)
	sam validate --lint -t $(SAR_TEMPLATE)

security: $(CHECKOV_VENV)/.installed sar  ## checkov on template.yaml and the template to publish: no failed check (suppressions carry their reason)
	$(CHECKOV_VENV)/bin/checkov -f template.yaml -f $(SAR_TEMPLATE) --framework cloudformation --skip-download --compact --quiet

build: venv  ## sam build (the layer and the three functions, arm64)
	sam build

# The model-based tests of Sequence and AsyncSequence
# (tests/proof/test_model_sequences.py) with many more programs than make
# test runs. Each run draws a seed and prints it; SEED= runs it again.
EXAMPLES ?= 3000
SEED ?=
soak: venv  ## The sequences' model-based tests with many programs (EXAMPLES=3000 SEED=...); prints the seed
	@seed=$${SEED:-$$(python -c 'import random; print(random.SystemRandom().randrange(2**32))')}; \
	echo "model seed $$seed: make soak SEED=$$seed runs these programs again"; \
	IDBLOCKS_MODEL_EXAMPLES=$(EXAMPLES) IDBLOCKS_MODEL_SEED=$$seed \
		python -m pytest -p no:schemathesis --timeout 0 tests/proof/test_model_sequences.py

# Over every core (pytest-xdist): the unit tests share no port, file or
# process state, and each worker is a process of its own. A test that starts
# a Python interpreter, talks to a server (the embedded DynamoDB, a dev
# server) or measures a window of real time belongs in tests/integration,
# which make test runs. (The HTTP client's scripted loopback stub,
# tests/support/stub_http.py, answers in-process and stays.) No unit test
# uses schemathesis, hypothesis or anyio; their plugins cost each process
# about 2 s of CPU to load.
unit: venv  ## The fast in-process tests (tests/unit), for every change; make test runs the rest
	python -m pytest -n auto -p no:schemathesis -p no:hypothesispytest -p no:anyio tests/unit

# STACK or URL, e.g. make test-deployed STACK=idblocks-dev (REGION=eu-west-1;
# needed with a URL of a custom domain, which names no region): requests are
# signed for the stack's region. With CLIENT_ROLE (a role ARN to assume) or
# CLIENT_PROFILE, and CLIENT_COUNTER and OTHER_COUNTER, also what a
# least-privileged client may and may not do; CLIENT_COUNTERS is the stack's
# ClientCounters when only URL is given (with STACK it is read from the stack).
# With OTHER_ACCOUNT_ROLE (a role of another account the stack lets in, with
# the CallerPolicy output as its policy, to assume) or OTHER_ACCOUNT_PROFILE,
# and OTHER_ACCOUNT_COUNTER (a counter ClientCounters names), also what a
# caller of another account may and may not do.
STACK ?=
URL ?=
REGION ?=
CLIENT_ROLE ?=
CLIENT_PROFILE ?=
CLIENT_COUNTER ?=
OTHER_COUNTER ?=
CLIENT_COUNTERS ?=
OTHER_ACCOUNT_ROLE ?=
OTHER_ACCOUNT_PROFILE ?=
OTHER_ACCOUNT_COUNTER ?=
test-deployed: venv  ## tests/e2e against a deployed stack: STACK=name or URL=https://... (CLIENT_ROLE=arn CLIENT_COUNTER= OTHER_COUNTER=; OTHER_ACCOUNT_ROLE=arn OTHER_ACCOUNT_COUNTER=)
	$(if $(STACK)$(URL),,$(error make test-deployed needs STACK=<stack name> or URL=<the stack's ApiUrl>))
	python -m tests.e2e.deployed --stack "$(STACK)" --url "$(URL)" --region "$(REGION)" \
		--client-role-arn "$(CLIENT_ROLE)" --client-profile "$(CLIENT_PROFILE)" \
		--client-counter "$(CLIENT_COUNTER)" --other-counter "$(OTHER_COUNTER)" \
		--client-counters "$(CLIENT_COUNTERS)" \
		--other-account-role-arn "$(OTHER_ACCOUNT_ROLE)" --other-account-profile "$(OTHER_ACCOUNT_PROFILE)" \
		--other-account-counter "$(OTHER_ACCOUNT_COUNTER)"

docs: venv  ## Build the documentation site into site/ (strict: a broken link or a page missing from the nav fails)
	mkdocs build --strict --quiet

docs-serve: venv  ## Serve the documentation site on http://127.0.0.1:8000, rebuilt on every change
	mkdocs serve --strict --dev-addr 127.0.0.1:8000

openapi: venv  ## Regenerate docs/openapi.json from the code
	python -m scripts.openapi > docs/openapi.json

mutants: venv build  ## Break each guarded property on purpose and check the tests catch it
	python -m scripts.mutants

# The packages as users install them: the client's wheel and sdist (built
# from client/ in an isolated environment with the setuptools its
# pyproject.toml pins; twine checks their metadata) and the Node client's
# tarball (npm pack, which compiles first). tests/integration/test_artifacts.py
# installs each into a fresh environment and takes IDs through it.
DIST_DIR ?= dist

dist: venv node  ## Build the client's wheel and sdist and the Node client's tarball into dist/ (DIST_DIR=...)
	rm -rf client/build $(DIST_DIR)/idblocks-* && mkdir -p $(DIST_DIR)
	python -m build --outdir $(DIST_DIR) client
	twine check --strict $(DIST_DIR)/*.whl $(DIST_DIR)/*.tar.gz
	cd $(NODE_DIR) && npm pack --silent --pack-destination $(abspath $(DIST_DIR))

lock: venv  ## Re-pin every transitive dependency into requirements/lock.txt
	python -m pip freeze --exclude-editable | grep -v '^-e ' > requirements/lock.txt

bench: build node  ## Benchmarks (not tests): client, node, server, scale (simulated); results land in bench/results/
	python -m bench

clean:  ## Remove everything generated (environments included); DEV_STATE=1 also the dev counters
	rm -rf .aws-sam $(VENV) $(CHECKOV_VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis .schemathesis .test-repeat \
		build dist client/build bench/.cache $(NODE_DIR)/node_modules $(NODE_DIR)/dist $(NODE_DIR)/*.tgz site \
		$(API_TOOLS)/node_modules $(API_TOOLS)/generated $(API_TOOLS)/dist $(IAM_DIR)/node_modules
	find . -path ./.git -prune -o \( -name __pycache__ -o -name '*.egg-info' \) -type d -prune -exec rm -rf {} +
ifeq ($(DEV_STATE),1)
	rm -rf .dev-state
else
	@test ! -e .dev-state || echo "kept .dev-state/ (the dev server's counters): make clean DEV_STATE=1 removes it too"
endif
