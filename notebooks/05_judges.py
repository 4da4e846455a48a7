# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Image-conditioned judging: supported claims and risk (reference-spec §5)
# Claims of each surface of the judged slice (COCO-MINI: 159 real images with five human captions
# each, and the SugarCrepe pairs on those images) become one question per raw claim (§5.1), sent
# with the image to every judge through the model-call layer (§5.2). Per judge: a summary (§5.3);
# over the captions **every** judge answered: cells with supported CBU per caption, risk and
# caption-bootstrap stds, judge agreement and extraction accounting (§5.4).
#
# In the demo both judges are **offline heuristics, not VLMs** (no vision-language weights install
# here): `capaudit-offline-annotation-judge` answers from the COCO instance annotations (and OCR for
# rendered text), `capaudit-offline-refcaption-judge` from the *other* human captions of the image.
# Their names travel into every table and figure. Point `judges.judges[].url` at a vLLM endpoint to
# judge with a real model; nothing else changes.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.claims.judged import run_judged
from capaudit.config import load_config
from capaudit.judges import stage

cfg = load_config(params_path)
dirs = cfg.dirs()
run_judged(cfg)  # the claims stage's step: the judged slices' claims, which the judges stage reads
out = stage.run(cfg)
out["table"]

# %% [markdown]
# Judge agreement on the questions both judges answered (exact answer match, per claim type).

# %%
out["agreement"]

# %% [markdown]
# Extraction accounting of the judged slice (claims that never reach a judge: failed or zero-claim).

# %%
out["extraction"]

# %% [markdown]
# Stage manifest: requests built, image failures, responses answered/failed per judge.

# %%
out["manifest"]["slices"]
