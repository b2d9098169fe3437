# Two commands are the contract: `make test` and `make demo`. Both build .venv/ on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: test test-fast test-unit test-integration test-e2e lint demo clean gpu-check doc-results fuzz

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Python >= 3.10 is needed; set PYTHON=/path/to/python3.x")'
	@echo "making .venv/ and installing requirements.txt into it (once; a minute or two)"
	@$(PYTHON) -m venv $(VENV)
	@# Errors only (-qq): what pip warns about is the machine's set-up, not this project.
	@$(PY) -m pip install --quiet --quiet -r requirements.txt
	@touch $(STAMP)

# The tests also need pytest and the reference implementations they compare against.
$(TEST_STAMP): $(STAMP) requirements-test.txt
	@echo "installing requirements-test.txt into .venv/ (once)"
	@$(PY) -m pip install --quiet --quiet -r requirements-test.txt
	@touch $(TEST_STAMP)

# The style is the tools' (pyproject.toml's [tool.ruff]): a red lint fails `make test` as a red
# test does.
lint: $(TEST_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# pytest exits 5 when it collected no tests: that must fail loudly, never pass. The suite runs on
# every core (pytest-xdist), a test file per worker: most of its time is real processes starting.
# The files go out in tests/conftest.py's order, the slowest kinds first (--no-loadscope-reorder).
PYTEST := $(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder
define pytest_in
@$(PYTEST) $(2); rc=$$?; \
if [ $$rc -eq 5 ]; then echo "make $(1): pytest collected no tests" >&2; exit 1; fi; exit $$rc
endef

# Everything: the lint, then the three tiers of tests/ (README.md's "Tests" says what each holds).
test: lint
	$(call pytest_in,test,tests)

# The quick loop while working: everything but the tests marked slow (subprocesses, the real
# browser, longer trainings); `make test` still runs them all.
test-fast: $(TEST_STAMP)
	$(call pytest_in,test-fast,-m "not slow" tests)

# One tier alone: unit (in one process, seconds), integration (modules together: tiny trainings,
# run folders, exports opened in transformers and TransformerLens), e2e (the scripts as
# processes, torchrun, kill -9, the real browser, the Makefile's own recipes).
test-unit: $(TEST_STAMP)
	$(call pytest_in,test-unit,tests/unit)

test-integration: $(TEST_STAMP)
	$(call pytest_in,test-integration,tests/integration)

test-e2e: $(TEST_STAMP)
	$(call pytest_in,test-e2e,tests/e2e)

# The fuzzer (tests/integration/test_fuzz.py) at length: Hypothesis's "fuzz" profile, hundreds
# of generated configs, overrides, JSONL and probe.json files a test instead of the suite's dozen;
# a failure is kept in .hypothesis/ and replayed first next time.
fuzz: $(TEST_STAMP)
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -q -p no:xdist tests/integration/test_fuzz.py --hypothesis-show-statistics

# The main job on the built-in corpus, offline: train (or resume), sample, measure attention once
# (the probe, its causal tests and circuits, and the natural sentences, saved to the run folder),
# show where "it" looks in the headline sentence (the page, from the saved result, has all six),
# then say the verdict, read from the saved result, with the full report beside it.
demo: $(STAMP)
	$(PY) train.py configs/default.yaml
	@echo; echo "== three samples, each up to the end of its first line =="
	$(PY) generate.py --prompt "The owl" --num-samples 3 --max-new-tokens 60 --temperature 0.8 --seed 1 --stop "\n"
	@echo; echo "== measuring every head (a minute); then where the pronoun looks in the headline sentence =="
	@$(PY) generate.py --probe --patch --circuit --json >/dev/null
	@$(PY) generate.py --probe natural --json >/dev/null
	$(PY) generate.py --attention --html out/default/attention.html --summary
	@echo; echo "== the verdict: which head finds the antecedent, and does the model choose by it? =="
	$(PY) generate.py --probe --patch --circuit --summary
	$(PY) generate.py --probe natural --summary
	@echo "page: out/default/attention.html; plots: out/default/loss.png, probe.png"

# The default model's numbers in README.md and docs/: the probe's commands on one run folder
# (RUN, default out/default), saved to docs/results/default.json, and every marked number and
# table of the docs rewritten from it (benchmarks/doc_results.py).
RUN ?= out/default
doc-results: $(STAMP)
	$(PY) -m benchmarks.doc_results $(RUN)

clean:
	rm -rf $(VENV) .pytest_cache

# On a machine with one CUDA GPU: one table (tests on CUDA, baby GPT speed and loss, GPT-2 MFU).
# PYTHON_ENV=system runs it with $(PYTHON) as it is, no venv and no pip: for a GPU machine
# without a package registry whose Python already has torch (and pytest, for the test row).
ifeq ($(PYTHON_ENV),system)
gpu-check:
	$(PYTHON) bench.py gpu-check
else
gpu-check: $(TEST_STAMP)
	$(PY) bench.py gpu-check
endif
