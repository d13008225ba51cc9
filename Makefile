# Every target sets up .venv itself, so each works on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_VENV := .bench-venv

.PHONY: demo test lint typecheck pytest bench sandbox-image clean mutate studio-shot

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,docker,mcp,openai,anthropic,search,dbos,studio,otlp]'
	touch $(STAMP)

# the demo needs Jianmu and, for the studio it ends with, the studio extra: nothing more
DEMO_STAMP := $(VENV)/.demo-installed
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[studio]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python examples/demo.py

# A screenshot of Jianmu Studio's run page for README (needs chromium and chromium-driver)
studio-shot: $(STAMP)
	$(BIN)/python docs/studio_shot.py docs/studio.png

lint: $(STAMP)
	$(BIN)/ruff check jianmu tests examples benchmarks skills
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy jianmu

# the sources compiled once first: where PYTHONDONTWRITEBYTECODE is set (CI machines often set
# it), every `jianmu` process the tests start (CLI, workers, servers) compiled them again
pytest: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 jianmu
	$(BIN)/python -m pytest -q -p no:cacheprovider -n auto --dist loadfile

# lint and typecheck (one core's work, ~35 s on a fresh clone) run beside pytest, which leaves a
# core idle at times; any of the three failing fails the target
test: $(STAMP)
	@$(MAKE) --no-print-directory -j3 lint typecheck pytest

$(BENCH_VENV)/.installed: pyproject.toml benchmarks/requirements.txt
	$(PY) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q --upgrade pip
	$(BENCH_VENV)/bin/pip install -q -e '.[docker,mcp,openai,anthropic,dbos]' -r benchmarks/requirements.txt
	touch $@

bench: $(BENCH_VENV)/.installed
	$(BENCH_VENV)/bin/python -m benchmarks

# Mutation testing, not part of `make test`: make mutate MODULE=jianmu/guard/_rules.py
MODULE ?= jianmu/constraints.py
mutate: $(STAMP)
	$(BIN)/python -c "import cosmic_ray" 2>/dev/null || $(BIN)/pip install -q -e '.[mutation]'
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python mutation/run.py $(MODULE)

sandbox-image: $(STAMP)
	$(BIN)/jianmu sandbox build-image

clean:
	rm -rf $(VENV) $(BENCH_VENV) build *.egg-info
