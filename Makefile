# mcfl-chain — everything installs into this folder (.venv, node_modules); nothing by hand.
#   make demo   set up, start a devnet and storage, run a small MCFL network, print where results are
#   make test   set up and run the whole suite with `ape test`, on parallel workers
#   make check  the inner loop: unit and contract tests (not `slow`, not `integration`), <2 min
#   make lint   ruff (lint + format check) and mypy over the package
SHELL := /bin/bash
VENV  ?= .venv
BIN   := $(CURDIR)/$(VENV)/bin
# ape-vyper finds the pip-installed compiler only through PATH (SPEC §8).
export PATH := $(BIN):$(CURDIR)/node_modules/.bin:$(PATH)
export PYTHONWARNINGS := ignore::UserWarning
PIP   := $(BIN)/pip install --quiet -c constraints.txt
TEST_ARGS ?=
# pytest-xdist workers. Most of the suite waits on chains, daemons and worker processes
# rather than computing, so more workers than this machine's 2 cores pay.
TEST_WORKERS ?= 4
XDIST := -n $(TEST_WORKERS) --dist worksteal
# make check computes rather than waits: one worker per core.
CHECK_WORKERS ?= 2

.PHONY: setup python node system test check lint demo clean
setup: python node system

python: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e '.[dev,ray]'
	touch $@

# --omit=optional leaves out Electron (an optional dependency under ipfs). --no-save
# installs what the lock file pins without rewriting it, so a fresh clone stays clean
# (`npm ci` refuses this lock: it lacks `headless`, a GitHub tarball electron-eval asks
# for, which --omit=optional never resolves). Anvil's installer puts the binary beside
# its launcher, which only looks in the platform package --omit=optional leaves out:
# node_modules/.bin/anvil points at the binary.
node: node_modules/.installed
node_modules/.installed: package.json package-lock.json
	npm install --omit=optional --no-save --no-audit --no-fund --loglevel=error
	if [ -x node_modules/@foundry-rs/anvil/anvil ]; then \
	  ln -sfn ../@foundry-rs/anvil/anvil node_modules/.bin/anvil; fi
	touch $@

# Fashion-MNIST (real IDX files) and Chromium for the explorer's browser test, from Debian.
# Skipped with a notice where apt is not usable (the code falls back and says so).
system:
	@need=""; \
	[ -d /usr/share/datasets/fashion-mnist ] || need="$$need dataset-fashion-mnist"; \
	command -v chromium >/dev/null || need="$$need chromium"; \
	if [ -n "$$need" ]; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    echo "installing Debian packages:$$need"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null; \
	  else echo "note: cannot install$$need (needs root and apt-get); see README"; fi; \
	fi

test: setup
	@rc=0; $(BIN)/ape test tests $(XDIST) $(TEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests were collected"; exit 0; fi; exit $$rc

check: setup
	@rc=0; $(BIN)/ape test tests -m "not slow and not integration" \
	  -n $(CHECK_WORKERS) --dist worksteal $(TEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "no tests were collected"; exit 0; fi; exit $$rc

lint: python
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy mcfl_chain

demo: setup
	$(BIN)/mcfl-chain demo

clean:
	rm -rf $(VENV) node_modules .build
