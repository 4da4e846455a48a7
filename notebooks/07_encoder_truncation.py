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
# # Encoder-token truncation: what a T2I text encoder keeps of a caption
# Untruncated token counts with special tokens per text encoder, against its maximum length
# (reference-spec §8.3): truncated rate (count > max length), at-or-over rate, mean, nearest-rank
# percentiles, max and mean slack, per surface, for the full caption and for captions cut at the
# lexical budgets (lex-cut text, spec §1.2). CLIP-77 and LongCLIP-248 counts use the CLIP BPE
# (`instant-clip-tokenizer`) after the normalisation `encoder_truncation.clip_clean` names: `hf`
# (default, the reference's: Hugging Face CLIPTokenizerFast, counts equal its token by token) or
# `open_clip` (ftfy + HTML unescaping, counts equal open_clip's). Captions empty after stripping are
# counted as the empty string as the reference does (`empty: count`) or left out (`empty: skip`);
# the table notes name both. Gemma-3, SigLIP,
# SigLIP2 and T5 are surveyed where their tokenizer is installed or given as a local folder; the
# encoders that could not be loaded are listed below with the reason.

# %% tags=["parameters"]
params_path = "params/demo.yaml"

# %%
from capaudit.config import load_config
from capaudit.embed.stage import run_truncation
from capaudit.embed.truncation_views import clip_backend_label
from capaudit.paper.embed_figures import plot_truncation_curves

cfg = load_config(params_path)
dirs = cfg.dirs()
out = run_truncation(cfg)
print("encoders not surveyed:", out["unavailable"] or "none")
out["table"]

# %% [markdown]
# Full captions and captions cut at B lexical units.

# %%
out["windows_table"]

# %% [markdown]
# Share of captions over a token limit, for every limit, per surface; the CLIP (77) and LongCLIP
# (248) limits are marked.

# %%
plot_truncation_curves(out["curves"], dirs["figures"], backend=clip_backend_label(out["results"]))
