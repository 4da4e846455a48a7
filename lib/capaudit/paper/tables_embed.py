"""Encoder-probe tables (reference-spec §8): encoder-token truncation (full captions and lex-cut
windows), embedding probes, prompt pools in caption neighbourhoods and image-text retrieval margins."""

from __future__ import annotations

from typing import Any, Mapping

from .stage_tables import builder, columns
from .table_model import Table


@builder("encoder_truncation", notebook="07_encoder_truncation")
def encoder_truncation(data: Mapping[str, Any]) -> Table:
    """Per surface × encoder (full captions): max length, captions, truncated and at-or-over rates, mean
    tokens, nearest-rank p50/p95 and max; the notes name the CLIP BPE cleaning, the empty-caption
    convention and the encoders not surveyed."""
    meta = data["meta"]
    unavailable = list(meta.get("unavailable") or [])
    skipped = (f"not surveyed (tokenizer not available here; reasons in artifacts/encoder_truncation/summary.json): "
               f"{', '.join(unavailable)}" if unavailable else "all configured encoders surveyed")
    return Table(
        id="encoder_truncation", title="Encoder-token truncation", axis="embed",
        columns=columns(("surface", "Surface", "text"), ("encoder", "Encoder", "text"),
                        ("max_length", "Max length", "int"), ("records", "Captions", "int"),
                        ("truncated_rate", "Truncated", "num", 4),
                        ("at_or_over_rate", ">= max", "num", 4, {"tex_label": r"$\geq$ max"}),
                        ("mean", "Mean tokens", "num", 2), ("p50", "p50", "int"), ("p95", "p95", "int"),
                        ("max", "Max", "int")),
        rows=list(data["rows"]), provenance=data["provenance"],
        notes=("Encoder-token truncation (reference-spec 8.3): untruncated counts with special tokens; truncated = "
               "count > max_length; percentiles nearest-rank.",
               f"CLIP BPE counts via instant-clip-tokenizer, clean={meta.get('clip_clean')}: "
               f"{meta.get('clip_clean_definition')}.",
               f"Empty captions: empty={meta.get('empty')}: {meta.get('empty_definition')}.",
               skipped))


@builder("encoder_truncation_windows", notebook="07_encoder_truncation")
def encoder_truncation_windows(data: Mapping[str, Any]) -> Table:
    """Per surface × window (full, lex<B>) × encoder: captions, mean lexical units, truncated rate, mean
    and p95 tokens."""
    meta = data["meta"]
    return Table(
        id="encoder_truncation_windows", title="Encoder tokens of captions cut at B lexical units", axis="embed",
        columns=columns(("surface", "Surface", "text"), ("window", "Window", "text"), ("encoder", "Encoder", "text"),
                        ("records", "Captions", "int"), ("mean_lex", "Mean lex", "num", 2),
                        ("truncated_rate", "Truncated", "num", 4), ("mean", "Mean tokens", "num", 2),
                        ("p95", "p95 tokens", "int")),
        rows=list(data["rows"]), provenance=data["provenance"],
        notes=("Truncation of captions cut at B lexical units (lex-cut text, spec 1.2) and of full captions; "
               f"CLIP BPE clean={meta.get('clip_clean')}, empty={meta.get('empty')}.",))


@builder("embedding_probes", notebook="08_embedding_probes")
def embedding_probes(data: Mapping[str, Any]) -> Table:
    """Per surface: captions, Vendi mean and normal 95% interval over blocks (missing for one block),
    eRank, participation ratio, top-1/top-10 eigenvalue mass, mean cosine to the centroid."""
    meta = data["meta"]
    return Table(
        id="embedding_probes", title="Embedding probes", axis="embed",
        columns=columns(("surface", "Surface", "text"), ("records", "Captions", "int"),
                        ("vendi_mean", "Vendi mean", "num", 2), ("vendi_ci95_low", "Vendi CI low", "num", 2),
                        ("vendi_ci95_high", "Vendi CI high", "num", 2), ("erank", "eRank", "num", 1),
                        ("participation_ratio", "Part. ratio", "num", 1), ("top1_mass", "top-1 mass", "num", 3),
                        ("top10_mass", "top-10 mass", "num", 3),
                        ("mean_cos_centroid", "Mean cos to centroid", "num", 3)),
        rows=list(data["rows"]), provenance=data["provenance"],
        notes=(f"Embedding probes (reference-spec 8.1), encoder {meta.get('model')}; Vendi over "
               f"{meta.get('vendi_blocks')} blocks of {meta.get('vendi_block_size')} (seed {meta.get('seed')}; one "
               "block of all rows when fewer), normal 95% CI.",))


@builder("embedding_support", notebook="08_embedding_probes")
def embedding_support(data: Mapping[str, Any]) -> Table:
    """Per surface × prompt pool: gallery and query sizes, Coverage@k and Density@k (query in gallery, not
    PRDC), median kNN max cosine and the share of queries with a neighbour at cosine >= 0.70."""
    meta = data["meta"]
    k = meta.get("k")
    return Table(
        id="embedding_support", title="Prompt pools in caption neighbourhoods", axis="embed",
        columns=columns(("surface", "Surface", "text"), ("pool", "Pool", "text"), ("gallery", "Gallery", "int"),
                        ("queries", "Queries", "int"), ("coverage", f"Coverage@{k}", "num", 3),
                        ("density", f"Density@{k}", "num", 3), ("knn_max_cos_p50", "Max cos (median)", "num", 3),
                        ("knn_share_ge_070", "Share >= 0.7", "num", 3, {"tex_label": r"Share $\geq 0.7$"})),
        rows=list(data["rows"]), provenance=data["provenance"],
        notes=(f"Coverage@{k}/Density@{k} of prompt pools (queries) against caption surfaces (gallery), encoder "
               f"{meta.get('model')}.", "Coverage is query-in-gallery; it is NOT PRDC coverage."))


@builder("retrieval_margins", notebook="08_embedding_probes")
def retrieval_margins(data: Mapping[str, Any]) -> Table:
    """Per surface: pairs, share over the model's max length, mean tokens, mean positive similarity, and
    image→text / text→image margins and R@1/R@5 (spec §8.2 decimals)."""
    meta = data["meta"]
    random_init = bool(meta.get("random_init"))
    notes = [f"Image-text retrieval margins (reference-spec 8.2), model {meta.get('model')} ({meta.get('revision')}), "
             f"max_length {meta.get('max_length')}, {meta.get('images')} images."]
    if random_init:
        notes.append("RANDOMLY INITIALISED MODEL: a code-path check; the numbers measure nothing about the captions.")
    return Table(
        id="retrieval_margins", title="Image-text retrieval margins", axis="embed",
        columns=columns(("surface", "Surface", "text"), ("rows", "Pairs", "int"), ("trunc_gt_248", "Truncated", "num", 4),
                        ("tok_mean", "Mean tokens", "num", 2), ("pos_mean", "Mean pos. sim.", "num", 6),
                        ("i2t_margin_mean", "i2t margin", "num", 6), ("i2t_r1", "i2t R@1", "num", 4),
                        ("i2t_r5", "i2t R@5", "num", 4), ("t2i_margin_mean", "t2i margin", "num", 6),
                        ("t2i_r1", "t2i R@1", "num", 4), ("t2i_r5", "t2i R@5", "num", 4)),
        rows=list(data["rows"]), provenance=data["provenance"], notes=tuple(notes),
        caveats=("random-init encoder",) if random_init else ())
