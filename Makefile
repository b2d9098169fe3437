# Two commands are the contract: `make test` and `make demo`. Both build .venv/ on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: test demo clean

$(STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Python >= 3.10 is needed; set PYTHON=/path/to/python3.x")'
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	@touch $(STAMP)

# pytest exits 5 when it collected no tests: that must fail loudly, never pass.
test: $(STAMP)
	@$(PY) -m pytest -q tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests" >&2; exit 1; fi; exit $$rc

demo: $(STAMP)
	$(PY) -c 'import torch; from model.gpt import GPT, GPTConfig; m = GPT(GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=2, n_embd=32)); print("model:", m.num_params(), "parameters")'

clean:
	rm -rf $(VENV) .pytest_cache
