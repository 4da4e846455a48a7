"""Text-budget stage: survey every configured surface, paired deltas, table and figure data.

Reads the params section ``text_stats`` (budgets, top_k, workers, surfaces to survey and the
pairs to compare) and writes ``artifacts/text_stats/<surface>.json``, ``tables/text_stats.csv``,
``tables/text_stats.tex`` and ``tables/text_paired_deltas.csv``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Dict, List, Sequence

import numpy as np
import pandas as pd

from ..config import RunConfig
from .lexical import lex_units
from .survey import SurveyConfig, survey_captions
from .violations import ViolationChecker

TABLE_COLUMNS = ["surface", "records", "avg_lex", "elig64", "trunc64", "opener64", "prefix_raw64",
                 "prefix_content64", "d1_64", "d2_64", "d3_64", "rep3_64", "rep4_64", "dup_rate"]


def contract_view(result: Dict[str, object], budgets: Sequence[int], top_k: int = 100) -> Dict[str, object]:
    """The ``capaudit text-stats`` output shape: records, avg_lex and per-budget metrics."""
    out = {"records": result["records"], "avg_lex": result["avg_lex"], "budgets": {}}
    for b in budgets:
        blk = result["budgets"][str(b)]
        out["budgets"][str(b)] = {
            "eligibility": blk["eligibility"],
            "truncation_rate": blk["truncation_rate"],
            "opener_rate": blk["opener_rate"],
            "distinct": blk["distinct"],
            "rep": blk["rep"],
            "prefix_top_mass": blk["prefix_top_mass"],
        }
    return out


def surface_row(name: str, r: Dict[str, object], budget: int = 64) -> Dict[str, object]:
    b = r["budgets"][str(budget)]
    return {
        "surface": name, "records": r["records"], "avg_lex": r["avg_lex"],
        f"elig{budget}": b["eligibility"], f"trunc{budget}": b["truncation_rate"],
        f"opener{budget}": b["opener_rate"], f"prefix_raw{budget}": b["prefix_top_mass"]["raw"],
        f"prefix_content{budget}": b["prefix_top_mass"]["content"],
        **{f"d{n}_{budget}": v for n, v in b["distinct"].items()},
        **{f"rep{n}_{budget}": v for n, v in b["rep"].items()},
        "dup_rate": r["dedup"]["normalized_duplicate_rate"],
    }


def paired_deltas(local: Sequence[str], reference: Sequence[str], budget: int = 64) -> pd.DataFrame:
    """Per-pair local − reference deltas with normal 95% intervals (spec §2.7).

    Metrics: full lex count, B-eligibility indicator, rep-4 inside the B window and the
    start-of-string opener on the full caption (the "fast" check of §2.7, no MULTILINE).
    """
    if len(local) != len(reference):
        raise ValueError(f"paired deltas need equal-length surfaces, got {len(local)} and {len(reference)}")
    from .violations import OpenerOptions

    fast = ViolationChecker(OpenerOptions(multiline=False))

    def feats(texts: Sequence[str]) -> np.ndarray:
        rows = []
        for t in texts:
            toks = lex_units(t)
            w = toks[:budget]
            grams = [tuple(w[i:i + 4]) for i in range(len(w) - 3)]
            rows.append((len(toks), float(len(toks) >= budget), float(len(grams) != len(set(grams))),
                         float(fast.is_opener(t.strip()))))
        return np.array(rows, float).reshape(-1, 4)

    d = feats(local) - feats(reference)
    names = ["avg_lexical_tokens", f"elig{budget}", f"rep4_at{budget}", "fast_full_j_meta_statement"]
    n = d.shape[0]
    out = []
    for j, name in enumerate(names):
        mean = float(d[:, j].mean()) if n else math.nan
        sd = float(d[:, j].std(ddof=1)) if n > 1 else math.nan
        half = 1.96 * sd / math.sqrt(n) if n > 1 else math.nan
        out.append({"metric": name, "pairs": n, "delta_mean": mean, "ci95_low": mean - half, "ci95_high": mean + half})
    return pd.DataFrame(out)


def survey_config(section: Dict[str, object]) -> SurveyConfig:
    return SurveyConfig(
        budgets=tuple(int(b) for b in section.get("budgets", (16, 32, 64, 128, 256))),
        ngram_orders=tuple(int(n) for n in section.get("ngram_orders", (1, 2, 3))),
        repeat_orders=tuple(int(n) for n in section.get("repeat_orders", (3, 4, 5, 6))),
        top_k=int(section.get("top_k", 100)),
    )


def write_table(rows: List[Dict[str, object]], tables: Path, stem: str = "text_stats") -> pd.DataFrame:
    df = pd.DataFrame(rows)
    df.to_csv(tables / f"{stem}.csv", index=False)
    df = df[[c for c in TABLE_COLUMNS if c in df.columns]]
    fmt = {c: (lambda v: f"{v:.2f}") if c == "avg_lex" else (lambda v: f"{v:.4f}")
           for c in df.columns if c not in ("surface", "records")}
    lines = []
    for _, r in df.iterrows():
        cells = [str(r["surface"]).replace("_", r"\_"), f"${int(r['records']):,}$".replace(",", "{,}")]
        cells += [fmt[c](r[c]) for c in df.columns if c in fmt]
        lines.append(" & ".join(cells) + r" \\")
    (tables / f"{stem}.tex").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return df


def run(cfg: RunConfig) -> Dict[str, object]:
    """Survey all surfaces of the run and the paired deltas of its fair slices.

    Surfaces are streamed (``iter_captions``); paired deltas read the slices written by the
    surfaces stage (``outputs/<run>/artifacts/slices/<name>/.../pairs.parquet``).
    """
    from ..surfaces import iter_captions
    from ..surfaces.stage import slice_dirs, surface_specs

    section = cfg.section("text_stats")
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "text_stats"
    art.mkdir(parents=True, exist_ok=True)
    scfg = survey_config(section)
    workers = int(section.get("workers", 1))
    specs = surface_specs(cfg)
    results: Dict[str, Dict[str, object]] = {}
    for name in section.get("surfaces", list(specs)):
        if name not in specs:
            raise KeyError(f"{cfg.path}: text_stats surface '{name}' is not declared under 'surfaces'")
        r = survey_captions((rec.caption for rec in iter_captions(specs[name])), scfg, workers=workers).finalize()
        r["surface"] = name
        r["config"] = {"budgets": list(scfg.budgets), "ngram_orders": list(scfg.ngram_orders),
                       "repeat_orders": list(scfg.repeat_orders), "top_k": scfg.top_k,
                       "prefix_tokens": scfg.prefix_tokens, "opener": vars(scfg.opener)}
        (art / f"{name}.json").write_text(json.dumps(r, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        results[name] = r
    table = write_table([surface_row(n, r) for n, r in results.items()], dirs["tables"])
    deltas = []
    slices = slice_dirs(cfg)
    for name in section.get("slices", list(slices)):
        path = slices[name] / "pairs.parquet"
        if not path.exists():
            raise FileNotFoundError(f"{path}: slice '{name}' not built; run the surfaces stage (make surfaces) first")
        pairs = pd.read_parquet(path, columns=["local_caption", "reference_caption"])
        d = paired_deltas(pairs["local_caption"].tolist(), pairs["reference_caption"].tolist())
        d.insert(0, "comparison", name)
        deltas.append(d)
    deltas_df = pd.concat(deltas, ignore_index=True) if deltas else pd.DataFrame()
    deltas_df.to_csv(dirs["tables"] / "text_paired_deltas.csv", index=False)
    return {"results": results, "table": table, "deltas": deltas_df, "budgets": list(scfg.budgets)}
