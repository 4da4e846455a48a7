"""Published encoder-probe summaries (reference-spec §8, §14 G10–G11) as the rows of our
encoder-truncation and embedding-probes stages' tables.

* ``tokenizer_truncation_core_both_100k_*.tsv`` → ``encoder_truncation`` rows (surface × encoder, full
  captions: max length, captions, truncated and at-or-over rates, mean tokens, p50, p95, max).
* ``sensitivity/naive_encoder_truncation.json`` → ``encoder_truncation_windows`` rows (window ``full``:
  captions, mean lex, truncated rate, mean tokens; the file publishes no p95).
* ``embedding_vendi_support/caption_embedding_profile.tsv`` → ``embedding_probes`` rows (Vendi with its
  interval, eRank, participation ratio, top-1 mass; no top-10 mass or centroid cosine published).
* ``cc12m_longclip_plot.csv`` (modes ``full`` and ``input64``), ``longclip_retrieval/longclip_retrieval_summary.tsv``
  (the ``input64`` rows, checked equal to the plot CSV's) and the naive-control TSVs under
  ``sensitivity/`` → ``retrieval_margins`` rows.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import InputError

from .reference_inputs import (PathLike, Row, integer, json_int, json_mapping, json_number, number, read_delimited,
                               read_json, text)
from .reference_inputs_text import comparison_label

TRUNC_COLUMNS = ("comparison", "surface", "encoder", "model_id", "records", "max_len", "truncated_rate_gt_limit",
                 "at_or_over_limit_rate", "mean_tokens", "p50_tokens", "p95_tokens", "max_tokens")
PROFILE_COLUMNS = ("encoder", "surface", "rows", "vendi_mean", "vendi_ci95_low", "vendi_ci95_high",
                   "cov_effective_rank", "cov_participation_ratio", "cov_top1_mass")
#: retrieval columns every LongCLIP file publishes (reference-spec 8.2)
RETRIEVAL_COLUMNS = ("surface", "rows", "trunc_gt_248", "tok_mean", "tok_p95", "pos_mean", "i2t_margin_mean", "i2t_r1",
                     "i2t_r5", "t2i_margin_mean", "t2i_r1", "t2i_r5")
RETRIEVAL_CI = ("pos_ci95", "i2t_margin_ci95", "t2i_margin_ci95")


def encoder_truncation_rows(path: PathLike) -> List[Dict[str, Any]]:
    """``encoder_truncation`` rows of the published tokenizer-truncation TSV, in file order."""
    out = []
    for row in read_delimited(path, TRUNC_COLUMNS):
        cmp_ = text(path, row, "comparison")
        out.append({"surface": f"{comparison_label(cmp_)}: {text(path, row, 'surface')}",
                    "encoder": text(path, row, "encoder"), "max_length": integer(path, row, "max_len"),
                    "records": integer(path, row, "records"),
                    "truncated_rate": number(path, row, "truncated_rate_gt_limit"),
                    "at_or_over_rate": number(path, row, "at_or_over_limit_rate"),
                    "mean": number(path, row, "mean_tokens"), "p50": integer(path, row, "p50_tokens"),
                    "p95": integer(path, row, "p95_tokens"), "max": integer(path, row, "max_tokens"),
                    "model_id": text(path, row, "model_id"), "comparison": cmp_})
    return out


def naive_window_rows(path: PathLike) -> List[Dict[str, Any]]:
    """``encoder_truncation_windows`` rows (window ``full``) of ``naive_encoder_truncation.json``: per
    naive-control surface × encoder."""
    data = json_mapping(path, read_json(path), None, "")
    out = []
    for surface, block in data.items():
        block = json_mapping(path, data, surface, "")
        encoders = json_mapping(path, block, "encoders", surface)
        for enc in encoders:
            e = json_mapping(path, encoders, enc, f"{surface}.encoders")
            loc = f"{surface}.encoders.{enc}"
            model = e.get("model_id")
            out.append({"surface": surface, "window": "full", "encoder": enc,
                        "records": json_int(path, block, "records", surface),
                        "mean_lex": json_number(path, block, "mean_lex", surface),
                        "truncated_rate": json_number(path, e, "truncated_rate_gt_limit", loc),
                        "mean": json_number(path, e, "mean_tokens", loc), "p95": None,
                        "max_length": json_int(path, e, "max_len", loc), "model_id": model,
                        "mean_words": json_number(path, block, "mean_words", surface),
                        "lex_overflow_gt_248": json_number(path, block, "lex_overflow_gt_248", surface)})
    return out


def embedding_profile_rows(path: PathLike) -> List[Dict[str, Any]]:
    """``embedding_probes`` rows of ``caption_embedding_profile.tsv`` (one per encoder × surface)."""
    out = []
    for row in read_delimited(path, PROFILE_COLUMNS):
        enc = text(path, row, "encoder")
        out.append({"surface": f"{text(path, row, 'surface')} ({enc})", "records": integer(path, row, "rows"),
                    "vendi_mean": number(path, row, "vendi_mean"), "vendi_ci95_low": number(path, row, "vendi_ci95_low"),
                    "vendi_ci95_high": number(path, row, "vendi_ci95_high"),
                    "erank": number(path, row, "cov_effective_rank"),
                    "participation_ratio": number(path, row, "cov_participation_ratio"),
                    "top1_mass": number(path, row, "cov_top1_mass"), "top10_mass": None, "mean_cos_centroid": None,
                    "encoder": enc})
    return out


def _retrieval_row(path: PathLike, row: Row, surface: str, mode: str) -> Dict[str, Any]:
    r: Dict[str, Any] = {"surface": f"{surface} ({mode})", "rows": integer(path, row, "rows"),
                         "trunc_gt_248": number(path, row, "trunc_gt_248"), "tok_mean": number(path, row, "tok_mean"),
                         "pos_mean": number(path, row, "pos_mean"),
                         **{k: number(path, row, k) for k in ("i2t_margin_mean", "i2t_r1", "i2t_r5", "t2i_margin_mean",
                                                              "t2i_r1", "t2i_r5")},
                         "tok_p95": number(path, row, "tok_p95"), "mode": mode, "source": str(path)}
    for k in RETRIEVAL_CI:
        if k in row[1]:
            r[k] = text(path, row, k)
    return r


def retrieval_rows(plot_csv: PathLike, summary_tsv: Optional[PathLike] = None,
                   extra: Sequence[Tuple[str, PathLike]] = ()) -> List[Dict[str, Any]]:
    """``retrieval_margins`` rows: every (mode, surface) of ``cc12m_longclip_plot.csv``, then the
    surfaces of each ``(mode, file)`` in ``extra``. ``summary_tsv`` (the ``input64`` run's own TSV) must
    publish the same values as the plot CSV's ``input64`` rows: a cell that differs is refused."""
    rows = read_delimited(plot_csv, ("mode",) + RETRIEVAL_COLUMNS, delimiter=",")
    out = [_retrieval_row(plot_csv, r, text(plot_csv, r, "surface"), text(plot_csv, r, "mode")) for r in rows]
    if summary_tsv is not None:
        by_surface = {text(plot_csv, r, "surface"): r for r in rows if r[1]["mode"] == "input64"}
        for r in read_delimited(summary_tsv, RETRIEVAL_COLUMNS):
            s = text(summary_tsv, r, "surface")
            if s not in by_surface:
                raise InputError(f"surface {s!r} has no input64 row in {plot_csv}", path=summary_tsv, line=r[0],
                                 field="surface")
            for col in RETRIEVAL_COLUMNS + RETRIEVAL_CI:
                if col in r[1] and r[1][col] != by_surface[s][1].get(col):
                    raise InputError(f"{r[1][col]!r} differs from {plot_csv} row {by_surface[s][0]} "
                                     f"({by_surface[s][1].get(col)!r})", path=summary_tsv, line=r[0], field=col)
    for mode, path in extra:
        out += [_retrieval_row(path, r, text(path, r, "surface"), mode) for r in read_delimited(path, RETRIEVAL_COLUMNS)]
    return out


def retrieval_meta(meta: Mapping[str, Any]) -> Dict[str, Any]:
    """The retrieval model's description (``paper.reference_meta.retrieval``)."""
    return {"model": meta.get("model"), "revision": meta.get("revision"), "max_length": meta.get("max_length"),
            "images": meta.get("images"), "random_init": False}


__all__ = ["embedding_profile_rows", "encoder_truncation_rows", "naive_window_rows", "retrieval_meta",
           "retrieval_rows"]
