# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Judge–human agreement (demo: SIMULATED annotators)
# A human-verification study (reference-spec §7) built from the judges stage's judged claims:
# stratified sample (surface group × claim type) with hidden repeats, two labels per item, consensus
# and adjudication, and weighted judge–human exact agreement with image-cluster bootstrap intervals
# (10,000 resamples, seed 1477). **In the demo the labels come from simulated annotators**, who write
# through the same API as people; the numbers exercise the pipeline and are not human evidence.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.human import stage

cfg = load_config(params_path)
dirs = cfg.dirs()
out = stage.run_demo(cfg)
print("labels from:", out["backend"], "| study database:", out["db"])
out["table"]

# %% [markdown]
# Readiness thresholds of the study (§7): substantive labels overall, per claim type, per stratum;
# judge coverage; open disagreements; bootstrap settings.

# %%
import pandas as pd

pd.DataFrame(out["status"]["readiness"]["checks"])

# %% [markdown]
# Human image-support consensus against each judge's answer (counts; simulated annotators).

# %%
from IPython.display import Image

from capaudit.paper.human_figures import plot_confusion

fig = plot_confusion(out["confusion"], dirs["figures"] / "human_confusion", simulated=True)
Image(filename=str(fig))

# %% [markdown]
# Supported CBU per caption corrected by the (simulated) annotators: per judge and surface, the
# judge's own figure, the weighted PPI++ estimate (judge answers on every claim of the surface, human
# consensus on the sampled ones) and the labels-only estimate, with 95% intervals. Claims whose
# consensus is not yes/no are left out and counted (`excluded`); a surface with fewer than two
# yes/no labels gets no estimate (`status`). Captions = captions with at least one judged claim.

# %%
out["corrected"]
