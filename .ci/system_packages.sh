#!/usr/bin/env bash
# Install the Debian packages capaudit's offline backends, browser test and manuscript use,
# skipping those already present. Needs root (or sudo).
set -euo pipefail
PKGS=(wordnet-base wordnet-sense-index tesseract-ocr tesseract-ocr-eng chromium chromium-driver
      latexmk texlive-latex-base texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "[ci] installing: ${missing[*]}" >&2
  $SUDO apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}" >/dev/null
fi
