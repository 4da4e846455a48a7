# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Yes-bias probe: SugarCrepe hard negatives on COCO-MINI
# A judge that says "yes" too easily makes every surface look supported. SugarCrepe pairs a COCO
# caption with a hard negative that adds, replaces or swaps one object, attribute or relation; a
# claim that appears **only** in the negative is false by construction. Per judge and perturbation
# type: the false-yes rate on those claims beside the yes rate on the claims of the true caption,
# with 95 % pair-bootstrap intervals (`capaudit.judges.probe`). The demo's judges are offline
# heuristics (not VLMs); the same probe runs unchanged against a VLM endpoint.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.judges import probe
from capaudit.paper.judges_figures import plot_yes_bias

cfg = load_config(params_path)
dirs = cfg.dirs()
out = probe.run(cfg)
out["table"]

# %%
paths = plot_yes_bias(out["rows"], dirs["figures"])
from IPython.display import Image, display

display(Image(filename=str(paths["png"]), width=900))
