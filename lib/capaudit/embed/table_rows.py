"""Rows of the encoder-probe stages' tables (reference-spec §8): truncation per surface × encoder, per
window, truncation curves and retrieval margins. ``paper.tables_embed`` renders the tables."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

ENCODER_KEYS = ("max_length", "records", "truncated_rate", "at_or_over_rate", "mean", "p50", "p95", "p99", "max",
                "mean_slack")


def encoder_rows(surface: str, result: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """One row per encoder of a surface's full captions (``result``: a surveyed surface)."""
    return [{"surface": surface, "encoder": enc, **{k: st[k] for k in ENCODER_KEYS}, "model_id": st["model_id"],
             "tokenizer": st["tokenizer"]} for enc, st in result["windows"]["full"]["encoders"].items()]


def window_rows(surface: str, result: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """One row per window (full, lex<B>) × encoder of a surface."""
    return [{"surface": surface, "window": label, "encoder": enc, "records": st["records"],
             "mean_lex": block["mean_lex"], "truncated_rate": st["truncated_rate"], "mean": st["mean"],
             "p95": st["p95"], "max_length": st["max_length"]}
            for label, block in result["windows"].items() for enc, st in block["encoders"].items()]


def truncation_curve_rows(surface: str, counts: Any, limits: Sequence[int], tokenizer: str) -> List[Dict[str, Any]]:
    """Share of captions over each limit (the truncation curve of one surface and tokenizer); ``counts``:
    per-caption token counts or their histogram ``{count: occurrences}``."""
    from capaudit.text.truncation import histogram_share_over_limit, share_over_limit

    shares = (histogram_share_over_limit(counts, limits) if isinstance(counts, Mapping)
              else share_over_limit(counts, limits))
    return [{"surface": surface, "tokenizer": tokenizer, "limit": int(L), "share_over": float(s)}
            for L, s in zip(limits, shares)]


RETRIEVAL_KEYS = ("trunc_gt_248", "tok_mean", "tok_p95", "pos_mean", "pos_ci95", "i2t_margin_mean", "i2t_margin_ci95",
                  "i2t_r1", "i2t_r5", "t2i_margin_mean", "t2i_margin_ci95", "t2i_r1", "t2i_r5")


def retrieval_rows(result: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """One row per surface of :func:`capaudit.embed.retrieval.score_surfaces`: the reference TSV's
    columns (spec §8.2) as numbers (a value the scorer did not compute is None), model, random init."""
    model = result["model"]
    return [{"surface": k, "rows": v["rows"], **{c: v.get(c) for c in RETRIEVAL_KEYS}, "model": model["name"],
             "random_init": model["random_init"]} for k, v in result["surfaces"].items()]


__all__ = ["encoder_rows", "retrieval_rows", "truncation_curve_rows", "window_rows"]
