# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Text budget and surface concentration
# Lexical units, Avg lex, B-eligibility and truncation at each budget, opener rate, raw and
# content top-100 prefix mass, Distinct-n and rep-n inside the B-unit window
# (reference-spec §1–2), and paired local − reference deltas with 95% intervals. The window is the
# reference's: a caption of more than B units is cut after the B-th unit and the cut text stripped;
# a caption of at most B units is kept whole, unstripped (the violation catalog and opener rate run on it).

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.text import stage
from capaudit.paper.text_figures import plot_budget_curves

cfg = load_config(params_path)
out = stage.run(cfg)
out["table"]

# %% [markdown]
# Paired deltas (local − reference, mean and normal 95% interval over pairs).

# %%
out["deltas"]

# %%
fig = plot_budget_curves(out["results"], cfg.dirs()["figures"] / "budget_curves")
fig
