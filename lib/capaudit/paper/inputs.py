"""Resolve and load the summaries named in a params file's ``paper:`` section.

``paper.inputs`` maps input names to paths relative to the repository root (the folder above
``params/``) or to the working directory; ``{run_dir}`` in a path stands for the run's output
folder (``outputs/<run>``, or ``<out_root>/<run>``), so a run's paper reads its own stages' summaries. If ``$CAPAUDIT_REFERENCE_DIR`` is set, any input path
that starts with ``paper.reference_dir`` (default ``../shared/reference``) is re-rooted there, so
the reference run works from any checkout location.
"""

from __future__ import annotations

import json

import csv
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..summaries.agreement import JudgeAgreement, read_agreement
from ..summaries.cells import CellsFile, read_cells
from ..summaries.claimed import ClaimedSummary, read_claimed_summary
from ..summaries.frontier import FrontierRow, read_frontier_csv
from ..summaries.prompt_support import PromptSupportRow, read_prompt_support_tsv
from ..summaries.rollups import ClaimedRollupRow, read_claimed_rollup_csv
from ..summaries.vqa import VqaSummary, read_vqa_summary
from ..summaries.vqa_layout import VqaLayout, read_vqa_layout

ENV_REFERENCE = "CAPAUDIT_REFERENCE_DIR"
DEFAULT_REFERENCE_PREFIX = "../shared/reference"


@dataclass(frozen=True)
class PaperInputs:
    """Resolved input paths of the paper layer (missing optional inputs are ``None``)."""

    params_path: Path
    paths: Dict[str, Any]
    section: Dict[str, Any] = field(repr=False, default_factory=dict)

    def path(self, name: str, required: bool = True) -> Optional[Path]:
        value = self.paths.get(name)
        if value is None:
            if required:
                raise KeyError(f"{self.params_path}: paper.inputs.{name} is missing")
            return None
        if not isinstance(value, Path):
            raise ValueError(f"{self.params_path}: paper.inputs.{name}: expected one path")
        return value

    def has(self, name: str) -> bool:
        return self.paths.get(name) is not None

    # Loaders ------------------------------------------------------------------------------
    def cells(self) -> CellsFile:
        return read_cells(self.path("cells"))  # type: ignore[arg-type]

    def frontier(self) -> List[FrontierRow]:
        return read_frontier_csv(self.path("frontier"))  # type: ignore[arg-type]

    def claims_backend(self) -> Optional[str]:
        """The extractor that answered the claims behind the frontier, as the claims stage recorded it
        beside the frontier CSV (``<frontier>.manifest.json``, ``backend``); ``None`` when not recorded
        (the reference run's published files)."""
        p = self.path("frontier", required=False)
        if p is None:
            return None
        man = p.with_name(p.stem + ".manifest.json")
        try:
            backend = json.loads(man.read_text(encoding="utf-8")).get("backend") if man.is_file() else None
        except (OSError, ValueError, AttributeError):
            return None
        return backend if isinstance(backend, str) and backend else None

    def lexical_window(self) -> ClaimedSummary:
        return read_claimed_summary(self.path("lexical_window"))  # type: ignore[arg-type]

    def claimed_rollup(self) -> Dict[str, ClaimedRollupRow]:
        return read_claimed_rollup_csv(self.path("claimed_rollup"))  # type: ignore[arg-type]

    def prompt_support(self) -> List[PromptSupportRow]:
        return read_prompt_support_tsv(self.path("prompt_support"))  # type: ignore[arg-type]

    def vqa_layout(self) -> Optional[VqaLayout]:
        """The judged-slice layout of our own judges stage (``paper.inputs.vqa_layout``); ``None`` for
        the reference run, whose layout is fixed in :mod:`capaudit.paper.layout`."""
        p = self.path("vqa_layout", required=False)
        return read_vqa_layout(p) if p is not None else None

    def pools(self, rows: Optional[List[PromptSupportRow]] = None) -> Optional[Tuple[str, ...]]:
        """Prompt pools of pool-wins and pool means: ``paper.pools``; else the reference's seven when
        all are present in ``rows``; else every pool present (``None``)."""
        from ..summaries.prompt_support import SEVEN_PAPER_POOLS

        given = self.section.get("pools")
        if given:
            return tuple(str(p) for p in given)
        if rows is None:
            return SEVEN_PAPER_POOLS
        present = {r.prompt_pool for r in rows}
        return SEVEN_PAPER_POOLS if set(SEVEN_PAPER_POOLS) <= present else None

    def human_agreement(self) -> Dict[str, JudgeAgreement]:
        return read_agreement(self.path("human_agreement"))  # type: ignore[arg-type]

    def policy_claimed(self) -> List[Tuple[str, str, ClaimedSummary]]:
        """``paper.inputs.policy_control_claimed``: list of {corpus, policy, file}."""
        out = []
        for i, entry in enumerate(self._entries("policy_control_claimed", ("corpus", "policy"))):
            out.append((str(entry["corpus"]), str(entry["policy"]), read_claimed_summary(entry["file"])))
        return out

    def judge_summaries(self) -> List[Tuple[Dict[str, str], VqaSummary]]:
        """``paper.inputs.judge_summaries``: list of {file, slice, judge, surface} (G5)."""
        entries = self._entries("judge_summaries", ("slice", "judge", "surface"))
        return [(entry, read_vqa_summary(entry["file"])) for entry in entries]

    def _entries(self, name: str, keys: Tuple[str, ...]) -> List[Dict[str, Any]]:
        value = self.paths.get(name) or []
        if not isinstance(value, list):
            raise ValueError(f"{self.params_path}: paper.inputs.{name}: expected a list of mappings")
        for i, entry in enumerate(value):
            missing = [k for k in keys if k not in entry]
            if missing:
                raise ValueError(f"{self.params_path}: paper.inputs.{name}[{i}]: missing key(s) {missing}")
        return value

    def eligibility(self) -> Optional[Dict[Tuple[str, str], float]]:
        """B=64 eligibility per (slice, Ours|Ref) from the text-stats TSV (``cov64``), if given."""
        p = self.path("text_stats", required=False)
        return read_eligibility(p) if p is not None else None


def _repo_root(params_path: Path) -> Path:
    return params_path.resolve().parent.parent


def resolve_path(raw: str, params_path: Path, prefix: str) -> Path:
    """Apply the env re-rooting, then resolve against cwd or the repo root (first that exists)."""
    env = os.environ.get(ENV_REFERENCE)
    norm = raw.replace("\\", "/")
    pre = prefix.rstrip("/")
    if env and (norm == pre or norm.startswith(pre + "/")):
        return Path(env) / norm[len(pre) :].lstrip("/")
    p = Path(raw)
    if p.is_absolute() or p.exists():
        return p
    alt = _repo_root(params_path) / p
    return alt if alt.exists() else p


def paper_inputs(cfg: Any) -> PaperInputs:
    """Resolve ``cfg.section('paper')['inputs']`` (a :class:`capaudit.config.RunConfig`)."""
    section = cfg.section("paper")
    prefix = str(section.get("reference_dir", DEFAULT_REFERENCE_PREFIX))
    raw = section.get("inputs")
    if not isinstance(raw, Mapping):
        raise ValueError(f"{cfg.path}: paper.inputs must be a mapping of input names to paths")
    paths: Dict[str, Any] = {}
    run_dir = str(getattr(cfg, "out_dir", ""))

    def sub(v: str) -> str:
        return v.replace("{run_dir}", run_dir)

    for name, value in raw.items():
        if value is None:
            paths[name] = None
        elif isinstance(value, str):
            paths[name] = resolve_path(sub(value), cfg.path, prefix)
        elif isinstance(value, list):
            entries = []
            for i, entry in enumerate(value):
                if not isinstance(entry, Mapping) or "file" not in entry:
                    raise ValueError(f"{cfg.path}: paper.inputs.{name}[{i}]: expected a mapping with 'file'")
                e = dict(entry)
                e["file"] = resolve_path(sub(str(entry["file"])), cfg.path, prefix)
                entries.append(e)
            paths[name] = entries
        else:
            raise ValueError(f"{cfg.path}: paper.inputs.{name}: expected a path or a list, got {value!r}")
    return PaperInputs(params_path=cfg.path, paths=paths, section=dict(section))


def read_eligibility(path: Path) -> Dict[Tuple[str, str], float]:
    """``cov64`` per (slice, side) from a text-stats fair-slice TSV (§14 G9)."""
    from .layout import CROSS_CORPUS

    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: text-stats TSV not found") from None
    reader = csv.DictReader(io.StringIO(text), delimiter="\t")
    for col in ("comparison", "role", "cov64"):
        if col not in (reader.fieldnames or []):
            raise ValueError(f"{path}: row 1 (header): column '{col}' is missing")
    by_cmp = {p.comparison: p.slice for p in CROSS_CORPUS}
    out: Dict[Tuple[str, str], float] = {}
    for lineno, r in enumerate(reader, start=2):
        if r["comparison"] not in by_cmp:
            continue
        side = {"local": "Ours", "reference": "Ref"}.get(r["role"])
        if side is None:
            raise ValueError(f"{path}: row {lineno}, column 'role': expected local/reference, got {r['role']!r}")
        try:
            out[(by_cmp[r["comparison"]], side)] = float(r["cov64"])
        except ValueError:
            raise ValueError(f"{path}: row {lineno}, column 'cov64': expected a number, got {r['cov64']!r}") from None
    return out
