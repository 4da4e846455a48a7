#!/usr/bin/env bash
# Start vLLM for a serving config: serving/serve.sh CONFIG [capaudit llm serve-cmd options]
#   serving/serve.sh serving/judge_qwen35_397b_a17b_fp8.yaml --port 8001
#   CAPAUDIT_VLLM_PYTHON=~/.cache/capaudit/vllm-cpu-venv/bin/python serving/serve.sh ci_cpu_smollm2_135m
# The command is printed to stderr first; `exec` replaces this shell so signals reach vLLM.
set -euo pipefail
if [[ $# -lt 1 ]]; then echo "usage: $0 CONFIG [--host H] [--port P] [--model PATH] [--set KEY=VALUE ...]" >&2; exit 2; fi
CAPAUDIT="${CAPAUDIT:-capaudit}"
cmd="$("$CAPAUDIT" llm serve-cmd "$@")"
echo "+ $cmd" >&2
eval "exec $cmd"
