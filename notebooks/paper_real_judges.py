# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Paper: real judges, real people
# Tables (reproduced DSG correlations and DSG-1k scores, three-judge agreement, yes-rates by question
# category, calibration coverage) and the calibration figure, rendered from
# `artifacts/real_judges/summary.json`. Logic: `capaudit.paper.real_judges`.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
import json

from capaudit.config import load_config
from capaudit.paper.real_judges import render

cfg = load_config(params_path)
dirs = cfg.dirs()
summary = json.loads((dirs["artifacts"] / "real_judges" / "summary.json").read_text(encoding="utf-8"))
paths = render(summary, dirs["tables"], dirs["figures"])

# %%
from IPython.display import Image

Image(filename=str(paths["figure"]), width=800)
