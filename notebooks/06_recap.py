# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Recaptioning: policy surfaces made by our own runner
# The captioning runner of reference-spec §6 (`capaudit.recap`) captions the configured images
# under each policy — here the detailed **photorealistic** policy and the **naive** control
# (Recap-DataComp instruction, sampled decoding) — through the model-call layer: images are
# preprocessed in worker processes (EXIF-oriented, transparency on white, shorter edge ≤ 768,
# JPEG q90), requests are content-addressed and resumable, and each policy's captions are exported
# as a surface (JSONL + Parquet) that params files name directly.
# In the demo run the captioner is `capaudit-offline-coco-captioner`, an **offline backend** that
# composes captions from the COCO-MINI instance annotations of each image (categories, counts,
# coarse layout from boxes) — not a vision model; every table and artifact names it.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.recap import stage

cfg = load_config(params_path)
dirs = cfg.dirs()
out = stage.run(cfg)
print("captioner:", out["backend"])
out["table"]

# %% [markdown]
# The same images under both policies: the detailed policy leads with the largest subject and
# gives positions and framing; the naive control lists what is there.

# %%
out["examples"]

# %% [markdown]
# Surfaces written (name them under `surfaces:` in a params file) and the runner's counts per policy
# (images asked in this run, answered earlier and skipped, failures by kind).

# %%
out["manifest"]["surfaces_yaml"], out["manifest"]["run_stats"]
