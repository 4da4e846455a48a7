"""Study items from the judges' ``judged_claims.jsonl``: pool, strata, seeded sample (reference-spec §7).

* Pool: the latest row per ``question_id`` (later files override earlier ones); claims whose
  category is outside the eight types are dropped; per caption, duplicates by key
  (category, whitespace-collapsed casefolded unit, same for target) are dropped (lowest question id
  kept); a claim enters only if every study judge answered it.
* Strata ``<surface_group>/<category>``; one ``random.Random(seed)`` walks the strata in sorted
  order: the stratum's pool sorted by ``question_id`` is shuffled and the first
  ``claims_per_stratum`` taken; ``sampling_weight = pool size / sample size``,
  ``sample_probability = sample size / pool size``; the first ``overlap_per_stratum`` sampled items
  of a stratum are its overlap items. Then ``round(n_base · repeat_fraction)`` hidden repeats
  (weight 0) are drawn from a shuffled copy of the base items, and the whole list is shuffled.
* ``item_id`` = BLAKE2b-128 hex of ``namespace \\0 question_id \\0 repeat_index``.

``sampling: disagreement_first`` (not in the reference; :class:`~capaudit.human.protocol.StudyConfig`)
keeps the pool, the strata, the seed and the repeats, and splits each stratum ``h`` into two
sub-strata: ``h/disagree`` (the study judges' answers differ, or any of them is "uncertain") and
``h/agree``. With ``k = min(claims_per_stratum, N_h)`` and both sub-pools non-empty,
``n_disagree = min(N_disagree, max(1, floor(k · disagreement_share + 1/2), ceil(k · N_disagree / N_h)), k − 1)``
(never fewer than a proportional allocation would give, except that one agree claim is always kept
so that every claim can be drawn: where judges disagree on more than ``(k − 1)/k`` of a stratum,
reference sampling may draw more disagreement claims than this design),
``n_agree = min(N_agree, k − n_disagree)``, and a short sub-pool's remainder goes to the other
(``n_disagree = min(N_disagree, k − n_agree)``); a single non-empty sub-pool takes all ``k``. The
same ``random.Random(seed)`` walks the strata in sorted order and, within a stratum, shuffles the
disagree then the agree sub-pool (each sorted by ``question_id``) and takes the first ``n`` of each:
simple random sampling without replacement within each sub-stratum, so an item's inclusion
probability is exactly ``π = n_s / N_s`` of its sub-stratum ``s``; it records ``stratum = s``,
``population_size = N_s``, ``sample_size = n_s``, ``sample_probability = π`` and
``weight = 1/π``. Sub-strata are the design strata of every estimate (Horvitz–Thompson/Hájek with
these weights is unbiased/consistent for the pool). The stratum's overlap items alternate between
the two sub-samples (disagree first). The report keeps ``pools``/``samples`` per stratum and adds
``design`` (the option values and, per sub-stratum, ``pool``, ``sample`` and ``probability``).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.errors import EmptyInputError, InputError
from capaudit.io.manifest import sha256_of
from capaudit.io.text import checked_lines, open_text

from .protocol import CATEGORIES, JUDGE_ANSWERS, StudyConfig

PathLike = Union[str, Path]
REQUIRED_FIELDS = (
    "question_id", "caption_id", "surface", "slice", "category", "unit", "target", "span", "span_offsets",
    "caption_window", "image_path", "image_key", "answers", "judges", "backend",
)
#: Sub-strata of the ``disagreement_first`` design, in sampling order.
SUBSTRATA: Tuple[str, ...] = ("disagree", "agree")
DISAGREEMENT_RULE = "the study judges' answers differ, or any of them answered 'uncertain'"
_IMAGE_KEY = re.compile(r"^(sha256:[0-9a-f]{64}|url_sha256:[0-9a-f]{64})$")


def item_id_for(namespace: str, question_id: str, repeat_index: int = 0) -> str:
    """``blake2b(namespace \\0 question_id \\0 repeat, digest_size=16)`` as hex (§7)."""
    data = f"{namespace}\0{question_id}\0{repeat_index}".encode("utf-8")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _collapse(text: str) -> str:
    return " ".join(str(text).split()).casefold()


@dataclass
class Claim:
    """One judged claim (a row of ``judged_claims.jsonl``) with its source location."""

    question_id: str
    caption_id: str
    surface: str
    slice: str
    category: str
    unit: str
    target: str
    span: str
    span_offsets: Optional[Tuple[int, int]]
    caption_window: str
    image_path: Optional[str]
    image_key: str
    answers: Dict[str, str]
    source: str
    line: int

    @property
    def dedup_key(self) -> Tuple[str, str, str, str]:
        return (self.caption_id, self.category, _collapse(self.unit), _collapse(self.target))


def _qid_sort_key(qid: str) -> Tuple[str, int, str]:
    cap, _, rest = qid.rpartition(":u")
    if cap and rest.isdigit():
        return (cap, int(rest), qid)
    return (qid, -1, qid)


def parse_claim(row: Any, path: str, line: int) -> Optional[Claim]:
    """Validate one judged-claims row; ``None`` for a claim whose category is outside the 8 types."""
    if not isinstance(row, dict):
        raise InputError("expected a JSON object", path=path, line=line)
    for k in REQUIRED_FIELDS:
        if k not in row:
            raise InputError("required field is missing", path=path, line=line, field=k)
    for k in ("question_id", "caption_id", "surface", "slice", "category", "unit", "target", "span",
              "caption_window", "image_key"):
        if not isinstance(row[k], str):
            raise InputError(f"expected a string, got {type(row[k]).__name__}", path=path, line=line, field=k)
    if not row["question_id"] or not row["unit"].strip():
        raise InputError("must not be empty", path=path, line=line, field="question_id" if not row["question_id"] else "unit")
    if row["category"] not in CATEGORIES:
        return None
    if not _IMAGE_KEY.match(row["image_key"]):
        raise InputError("expected 'sha256:<64 hex>' or 'url_sha256:<64 hex>'", path=path, line=line, field="image_key")
    ip = row["image_path"]
    if ip is not None and not isinstance(ip, str):
        raise InputError("expected a path string or null", path=path, line=line, field="image_path")
    so = row["span_offsets"]
    offsets: Optional[Tuple[int, int]] = None
    if so is not None:
        if (not isinstance(so, list) or len(so) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) for x in so)
                or not 0 <= so[0] < so[1] <= len(row["caption_window"])):
            raise InputError(f"expected [start, end] offsets inside caption_window (length {len(row['caption_window'])}), "
                             f"got {so!r}", path=path, line=line, field="span_offsets")
        offsets = (so[0], so[1])
    answers = row["answers"]
    if not isinstance(answers, dict):
        raise InputError("expected an object {judge: answer}", path=path, line=line, field="answers")
    for j, a in answers.items():
        if a not in JUDGE_ANSWERS:
            raise InputError(f"judge {j!r} answered {a!r}; answers are {list(JUDGE_ANSWERS)}", path=path, line=line,
                             field="answers")
    if not isinstance(row["judges"], list):
        raise InputError("expected a list of judge names", path=path, line=line, field="judges")
    return Claim(
        question_id=row["question_id"], caption_id=row["caption_id"], surface=row["surface"], slice=row["slice"],
        category=row["category"], unit=row["unit"], target=row["target"], span=row["span"], span_offsets=offsets,
        caption_window=row["caption_window"], image_path=ip, image_key=row["image_key"],
        answers={str(k): str(v) for k, v in answers.items()}, source=path, line=line,
    )


def read_judged_claims(paths: Sequence[PathLike]) -> Tuple[List[Claim], Dict[str, int]]:
    """Every row of ``paths`` (in order; a later row overrides an earlier one with the same question id)."""
    if not paths:
        raise InputError("no judged_claims.jsonl given")
    latest: Dict[str, Claim] = {}
    counts = {"rows": 0, "other_category": 0, "overridden": 0}
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise InputError("judged-claims file not found" if not path.exists() else
                             "not a file (give a judged_claims.jsonl)", path=path)
        rows_before = counts["rows"]
        with open_text(path) as fh:
            for i, line in enumerate(checked_lines(fh, path), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"not valid JSON ({exc.msg} at column {exc.colno})", path=path, line=i) from None
                counts["rows"] += 1
                c = parse_claim(row, str(path), i)
                if c is None:
                    counts["other_category"] += 1
                    continue
                if c.question_id in latest:
                    counts["overridden"] += 1
                latest[c.question_id] = c
        if counts["rows"] == rows_before:
            raise EmptyInputError("no judged claims: the file is empty", path=path)
    return [latest[q] for q in sorted(latest, key=_qid_sort_key)], counts


@dataclass
class SampledItem:
    """One study item: a claim, its stratum and sampling design values."""

    item_id: str
    claim: Claim
    surface_group: str
    stratum: str
    weight: float
    population_size: int
    sample_size: int
    sample_probability: float
    repeat_index: int = 0
    repeat_of: Optional[str] = None
    overlap: bool = False
    sample_order: int = 0


@dataclass
class SampleReport:
    """What the sampler saw and did (stored with the study)."""

    judges: List[str]
    counts: Dict[str, int]
    pools: Dict[str, int]
    samples: Dict[str, int]
    missing_strata: List[str]
    n_base: int
    n_repeats: int
    sources: List[Dict[str, str]] = field(default_factory=list)
    design: Dict[str, Any] = field(default_factory=lambda: {"sampling": "reference"})

    def to_dict(self) -> Dict[str, Any]:
        return {
            "judges": self.judges, "counts": self.counts, "pools": self.pools, "samples": self.samples,
            "missing_strata": self.missing_strata, "n_base": self.n_base, "n_repeats": self.n_repeats,
            "sources": self.sources, "design": self.design,
        }


def judges_disagree(claim: Claim, judges: Sequence[str]) -> bool:
    """True when the ``judges``' answers on ``claim`` differ or any is "uncertain" (:data:`DISAGREEMENT_RULE`)."""
    answers = [claim.answers[j] for j in judges]
    return len(set(answers)) > 1 or "uncertain" in answers


def split_stratum(pool: Sequence[Claim], judges: Sequence[str]) -> Dict[str, List[Claim]]:
    """A stratum's pool as its non-empty ``disagree`` / ``agree`` sub-pools (input order kept)."""
    out: Dict[str, List[Claim]] = {}
    for c in pool:
        out.setdefault(SUBSTRATA[0] if judges_disagree(c, judges) else SUBSTRATA[1], []).append(c)
    return {s: out[s] for s in SUBSTRATA if s in out}


def substratum_pools(strata: Mapping[str, Sequence[Claim]], judges: Sequence[str]) -> Dict[str, int]:
    """``<stratum>/<sub-stratum>`` → sub-pool size (non-empty sub-pools only)."""
    return {f"{h}/{s}": len(v) for h in sorted(strata) for s, v in split_stratum(strata[h], judges).items()}


def allocate(k: int, sizes: Mapping[str, int], share: float) -> Dict[str, int]:
    """Sample sizes of a stratum's sub-strata under ``disagreement_first`` (module docstring)."""
    d, a = sizes.get(SUBSTRATA[0], 0), sizes.get(SUBSTRATA[1], 0)
    if not d or not a:
        return {s: min(k, n) for s, n in sizes.items() if n}
    n_d = min(d, max(1, math.floor(k * share + 0.5), math.ceil(k * d / (d + a))), k - 1)
    n_a = min(a, k - n_d)
    n_d = min(d, k - n_a)
    return {SUBSTRATA[0]: n_d, SUBSTRATA[1]: n_a}


def base_stratum(stratum: str) -> str:
    """The sampling stratum ``<group>/<type>`` of a design stratum (a sub-stratum loses its suffix)."""
    head, _, tail = stratum.rpartition("/")
    return head if head and tail in SUBSTRATA else stratum


def build_pool(claims: Sequence[Claim], config: StudyConfig) -> Tuple[Dict[str, List[Claim]], List[str], Dict[str, int]]:
    """Strata → eligible claims (deduplicated, judged by every study judge, in a surface group)."""
    judges = list(config.judges) or sorted({j for c in claims for j in c.answers})
    if not judges:
        raise EmptyInputError("no judge answers in the judged claims")
    counts = {"duplicates": 0, "missing_judge": 0, "ungrouped": 0}
    seen = set()
    strata: Dict[str, List[Claim]] = {}
    for c in claims:  # already in question-id order: the lowest index of a duplicate is kept
        if c.dedup_key in seen:
            counts["duplicates"] += 1
            continue
        seen.add(c.dedup_key)
        if any(j not in c.answers for j in judges):
            counts["missing_judge"] += 1
            continue
        group = config.group_of(c.surface)
        if group is None:
            counts["ungrouped"] += 1
            continue
        strata.setdefault(f"{group}/{c.category}", []).append(c)
    return strata, judges, counts


def sample_items(claims: Sequence[Claim], config: StudyConfig) -> Tuple[List[SampledItem], SampleReport]:
    """The seeded stratified sample with hidden repeats (§7); see the module docstring."""
    strata, judges, counts = build_pool(claims, config)
    if not strata:
        raise EmptyInputError("no eligible claims: every claim lacks a judge answer or a surface group "
                              f"(counts: {counts}; judges: {judges})")
    groups = sorted(config.surface_groups) if config.surface_groups else sorted({s.split("/", 1)[0] for s in strata})
    expected = [f"{g}/{c}" for g in groups for c in CATEGORIES]
    missing = sorted(s for s in expected if s not in strata)
    if missing and config.require_all_strata:
        raise InputError(f"{len(missing)} of {len(expected)} strata have no eligible claim: {', '.join(missing)} "
                         "(set require_all_strata: false to sample the strata present)", field="require_all_strata")
    ns = config.item_namespace
    rng = random.Random(config.seed)
    base: List[SampledItem] = []
    pools: Dict[str, int] = {}
    samples: Dict[str, int] = {}
    design: Dict[str, Any] = {"sampling": config.sampling}
    if config.sampling == "disagreement_first":
        design.update(disagreement_share=float(config.disagreement_share), disagreement_rule=DISAGREEMENT_RULE,
                      substrata={})
    for stratum in sorted(strata):
        if config.sampling == "disagreement_first":
            got = _sample_substrata(stratum, strata[stratum], judges, config, rng, design["substrata"])
            base += got
            pools[stratum] = len(strata[stratum])
            samples[stratum] = len(got)
            continue
        pool = sorted(strata[stratum], key=lambda c: c.question_id)
        rng.shuffle(pool)
        k = min(config.claims_per_stratum, len(pool))
        taken = pool[:k]
        pools[stratum], samples[stratum] = len(pool), k
        for i, c in enumerate(taken):
            base.append(SampledItem(
                item_id=item_id_for(ns, c.question_id, 0), claim=c, surface_group=stratum.split("/", 1)[0],
                stratum=stratum, weight=len(pool) / k, population_size=len(pool), sample_size=k,
                sample_probability=k / len(pool), overlap=i < config.overlap_per_stratum,
            ))
    n_rep = round(len(base) * config.repeat_fraction)
    copy = list(base)
    rng.shuffle(copy)
    repeats = [
        SampledItem(
            item_id=item_id_for(ns, b.claim.question_id, 1), claim=b.claim, surface_group=b.surface_group,
            stratum=b.stratum, weight=0.0, population_size=b.population_size, sample_size=b.sample_size,
            sample_probability=b.sample_probability, repeat_index=1, repeat_of=b.item_id, overlap=False,
        )
        for b in copy[:n_rep]
    ]
    final = base + repeats
    rng.shuffle(final)
    for i, it in enumerate(final):
        it.sample_order = i
    report = SampleReport(judges=judges, counts=counts, pools=pools, samples=samples, missing_strata=missing,
                          n_base=len(base), n_repeats=len(repeats), design=design)
    return final, report


def _sample_substrata(stratum: str, claims: Sequence[Claim], judges: Sequence[str], config: StudyConfig,
                      rng: random.Random, record: Dict[str, Any]) -> List[SampledItem]:
    """One stratum under ``disagreement_first``: SRS without replacement per sub-stratum (module docstring)."""
    subs = split_stratum(sorted(claims, key=lambda c: c.question_id), judges)
    k = min(config.claims_per_stratum, len(claims))
    sizes = allocate(k, {s: len(v) for s, v in subs.items()}, float(config.disagreement_share))
    taken: Dict[str, List[SampledItem]] = {}
    for sub, pool in subs.items():
        pool = list(pool)
        rng.shuffle(pool)
        n, big_n = sizes[sub], len(pool)
        name = f"{stratum}/{sub}"
        record[name] = {"pool": big_n, "sample": n, "probability": n / big_n}
        taken[sub] = [SampledItem(
            item_id=item_id_for(config.item_namespace, c.question_id, 0), claim=c,
            surface_group=stratum.split("/", 1)[0], stratum=name, weight=big_n / n, population_size=big_n,
            sample_size=n, sample_probability=n / big_n,
        ) for c in pool[:n]]
    lists = [taken[s] for s in SUBSTRATA if s in taken]
    out = [x[i] for i in range(max(len(x) for x in lists)) for x in lists if i < len(x)]  # alternate sub-samples
    for i, it in enumerate(out):
        it.overlap = i < config.overlap_per_stratum
    return out


file_digest = sha256_of  # sha256 hex of a file's bytes (capaudit.io.manifest)


def resolve_image(path: Optional[str], image_root: str = "", base: Optional[Path] = None) -> Optional[Path]:
    """Where an item's image lives: absolute as given, else under ``image_root``, else beside ``base``."""
    if not path:
        return None
    p = Path(path)
    if p.is_absolute():
        return p
    if image_root:
        return Path(image_root) / p
    return (base / p) if base is not None else p


def claims_files(paths: Iterable[PathLike]) -> List[Path]:
    return [Path(p) for p in paths]


__all__ = [
    "Claim", "DISAGREEMENT_RULE", "SUBSTRATA", "SampleReport", "SampledItem", "allocate", "base_stratum",
    "build_pool", "file_digest", "item_id_for", "judges_disagree", "parse_claim", "read_judged_claims",
    "resolve_image", "sample_items", "split_stratum", "substratum_pools",
]
