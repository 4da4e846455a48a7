#!/usr/bin/env bash
# Fetch CLIP's BPE vocabulary (bpe_simple_vocab_16e6.txt.gz, inside the open_clip_torch wheel) into the
# cache, check its sha256 and print its path: the tokenizer-equality test compares our CLIP counts
# token by token against a reference BPE over this file. Only the wheel is downloaded (no torch).
set -euo pipefail
SHA=924691ac288e54409236115652ad4aa250f48203de50a9e4722a6ecd48d6804a
DIR="${CAPAUDIT_CACHE:-$HOME/.cache/capaudit}/clip_bpe"
OUT="$DIR/bpe_simple_vocab_16e6.txt.gz"
PY="${PYTHON:-python3}"
if [[ ! -f "$OUT" ]] || [[ "$(sha256sum "$OUT" | cut -d' ' -f1)" != "$SHA" ]]; then
  mkdir -p "$DIR"; tmp="$(mktemp -d)"
  "$PY" -m pip download -q --no-deps open_clip_torch==3.3.0 -d "$tmp" >&2
  "$PY" - "$tmp" "$OUT.part" <<'PYEOF'
import glob, sys, zipfile
z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/open_clip_torch-*.whl")[0])
open(sys.argv[2], "wb").write(z.read("open_clip/bpe_simple_vocab_16e6.txt.gz"))
PYEOF
  rm -rf "$tmp"
  [[ "$(sha256sum "$OUT.part" | cut -d' ' -f1)" == "$SHA" ]] || { echo "clip_bpe: sha256 mismatch" >&2; exit 1; }
  mv "$OUT.part" "$OUT"
fi
echo "$OUT"
