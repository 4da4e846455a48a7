# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Caption detailness: ICR, AOD, CD and ITM→CD selection
# Scene graphs O(c), A(c), R(c) of every caption; image coverage rate ICR (Eq. 2: union of the masks of the
# mentioned objects / image area), average object detailness AOD (Eq. 4: relations and attributes per object) and
# caption detailness CD = ICR·AOD/Length (Eq. 5), on the 159 COCO-MINI images with their five human captions (and
# the other stages' surfaces where present). Every table and figure names the demo's backends: scene graphs from
# `capaudit-offline-scene-graph` (claims units + spaCy, a **heuristic baseline**), grounding from COCO instance
# masks through the reviewed noun → category lexicon, ITM from `annotation-precision` (an **offline CHAIR-style
# stand-in** for a CLIP model: share of the caption's objects present in the annotations), and two definitions.
# **ICR**: COCO instance masks cover only the 80 thing classes, so the demo's is a **things-only ICR** (sky, grass
# or walls are never covered; all instance masks together average about a third of a COCO-MINI image), not on the
# scale of the method's things-and-stuff ICR (`grounding: coco-panoptic:PANOPTIC.json` gives that one). **AOD**
# follows Eq. 3: a relation counts once, for its subject (`relation_ends: subject`; `both` counts it at both ends,
# the "edges connected to a node" reading). CD inherits both choices.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from IPython.display import display
from capaudit.config import load_config
from capaudit.detail import stage
from capaudit.paper.detail_figures import itm_bin_rows, length_scatter_rows, plot_itm_bins, plot_length_scatter

cfg = load_config(params_path)
out = stage.run(cfg)
print("backends:", out["backends"])
print("definitions:", out["definitions"])
print("skipped surfaces (input not present):", out["skipped"])
out["surface_table"]

# %% [markdown]
# Selection strategies on the demo pool (K, T as proportions of it): mean ICR, AOD, length, ITM of each subset
# (Table 2 columns needing no trained model; exported as JSONL + Parquet + a WebDataset manifest under
# `artifacts/detail/selection/`); controlled subgraphs at 20/40/60/80 % (± 5 %) of a caption's ICR or AOD (seeded;
# realised by `capaudit-template-realiser`, a template baseline).

# %%
display(out["selection_table"], out["subgraph_table"])

# %% [markdown]
# ICR and AOD against caption length, per surface; mean ITM in quantile bins of ICR and of AOD (the method's
# inverted-U analysis). Caveat for the demo: the offline ITM stand-in and ICR read the same COCO annotations, so
# part of their relation is mechanical (a caption that names only absent categories has ICR 0 and ITM 0); with a
# CLIP-family scorer the curve is a real alignment measurement.

# %%
figures, footer = cfg.dirs()["figures"], {**out["backends"], **out["definitions"]}
display(plot_length_scatter(length_scatter_rows(out["scores"], out["labels"]), figures, footer,
                            measure_labels=out["measure_labels"]),
        plot_itm_bins(itm_bin_rows(out["scores"], bins=out["figure_bins"], labels=out["labels"]), figures,
                      footer, measure_labels=out["measure_labels"]))
