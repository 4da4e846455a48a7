"""Prompt-pool preparation (reference-spec §3.1) and cross-pool overlap.

Per source, in file order: normalise (NUL → space, strip, collapse whitespace runs to one
space); drop empty prompts; drop duplicates by blake2b-16 of the lower-cased prompt; keep prompts
with ``min_tokens`` ≤ lex units ≤ ``max_tokens``; write ``<name>.prompt_only.jsonl``; write the
row to ``<name>.filtered.jsonl`` as well when it passes the safety filter (no URL, e-mail,
phone-like digit run or unsafe keyword). Rows: ``source, prompt, prompt_hash, tokens_lexical,
raw_index``. ``manifest.json`` records per-source counts and a lex-length histogram capped at 512.

Benchmark collections reuse each other's prompts (DrawBench inside TIFA, PartiPrompts inside
DPG-Bench, ...): :func:`overlap_table` reports shared prompts pair by pair and a *union* pool
(:class:`UnionSpec`) merges several pools, dropping prompts already taken from an earlier member.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple, Union

from capaudit.errors import InputError
from capaudit.io.atomic import StagedFiles, check_output_dir, write_json_atomic, write_text_atomic
from capaudit.io.manifest import check_file, files_block, read_manifest
from capaudit.prompts.io import detect_format, file_digest, iter_hub_prompts, iter_prompt_records, resolve_location
from capaudit.text.lexical import lex_count

PathLike = Union[str, Path]

MIN_TOKENS = 3
MAX_TOKENS = 256
HISTOGRAM_CAP = 512
STAT_KEYS = ("read", "empty", "duplicate", "too_short", "too_long", "filtered_safety", "raw_written", "filtered_written")

_WS_RE = re.compile(r"\s+")
URL_RE = re.compile(r"https?://|www\.", re.IGNORECASE)
EMAIL_RE = re.compile(r"[\w.+-]+@[\w-]+\.[\w.-]+")
#: 10 or more digits with at most one separator (space . - ( )) between consecutive digits.
PHONE_RE = re.compile(r"\+?\d(?:[\s.\-()]?\d){9,}")
#: Unsafe-keyword family (the reference's list is not published; this one is ours): sexual
#: content, nudity, minors in a sexual context, graphic violence. Whole words, case-insensitive.
UNSAFE_RE = re.compile(
    r"\b(?:nsfw|nudes?|nudity|naked|nakedness|topless|bottomless|sex|sexy|sexual(?:ly)?|sexualized|"
    r"porn\w*|erotic\w*|hentai|xxx|explicit|fetish\w*|bdsm|genitals?|penis|vagina|nipples?|boobs?|"
    r"breasts?|lingerie|orgasm\w*|rape[ds]?|raping|incest|loli\w*|shota\w*|underage|minors?|"
    r"child\s*porn|pedo\w*|paedo\w*|gore|gory|guro|dismember\w*|decapitat\w*|mutilat\w*|"
    r"disembowel\w*|torture[ds]?|suicide|self[\s-]?harm)\b",
    re.IGNORECASE,
)


def normalize_prompt(text: str) -> str:
    """NUL → space, strip, collapse whitespace runs to one space (§3.1)."""
    return _WS_RE.sub(" ", text.replace("\x00", " ")).strip()


def prompt_hash(prompt: str) -> str:
    """De-duplication key: blake2b (16-byte digest) of the lower-cased prompt, hex (§3.1)."""
    return hashlib.blake2b(prompt.lower().encode("utf-8"), digest_size=16).hexdigest()


def safety_reason(prompt: str) -> Optional[str]:
    """Why ``prompt`` fails the safety filter (``url``/``email``/``phone``/``keyword``), or None."""
    if URL_RE.search(prompt):
        return "url"
    if EMAIL_RE.search(prompt):
        return "email"
    if PHONE_RE.search(prompt):
        return "phone"
    if UNSAFE_RE.search(prompt):
        return "keyword"
    return None


@dataclass(frozen=True)
class HubPool:
    """A prompt pool streamed from a Hugging Face dataset (data registry ``hf_prompt_pools``)."""

    repository: str
    field: str
    data_files: Optional[str] = None  # the file(s) inside the dataset repository the pool reads
    revision: Optional[str] = None
    split: str = "train"


@dataclass(frozen=True)
class PoolFile:
    """One raw input of a pool source: a local file, or (``hub``) a Hugging Face dataset."""

    path: Path
    field: Optional[str] = None
    fmt: Optional[str] = None
    where_prefix: Optional[Mapping[str, str]] = None
    hub: Optional[HubPool] = None

    def records(self) -> Iterator[str]:
        """Every record's text in order (:func:`iter_prompt_records`, or the Hub dataset's rows)."""
        if self.hub is not None:
            return iter_hub_prompts(self.hub.repository, self.hub.field, self.hub.data_files, self.hub.revision,
                                    self.hub.split)
        return iter_prompt_records(self.path, self.field, self.fmt, self.where_prefix)

    def provenance(self) -> Dict[str, Any]:
        """What the manifest records of this input (a local file's digest; a Hub dataset's id)."""
        if self.hub is not None:
            return {"hub": self.hub.repository, "revision": self.hub.revision, "data_files": self.hub.data_files,
                    "split": self.hub.split, "field": self.hub.field}
        return {"path": str(self.path), "format": detect_format(self.path, self.fmt), "field": self.field,
                "where_prefix": dict(self.where_prefix) if self.where_prefix else None,
                "blake2b_128": file_digest(self.path)}


@dataclass(frozen=True)
class PoolSource:
    """A named pool made of one or more raw files, read in order."""

    name: str
    files: Tuple[PoolFile, ...]


@dataclass(frozen=True)
class UnionSpec:
    """A pool merging prepared pools in order; prompts seen in an earlier member are dropped."""

    name: str
    members: Tuple[str, ...]


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def _check_name(name: str, where: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"{where}: pool name {name!r} must be letters, digits, '_', '-', '.'")
    return name


def source_from_params(spec: Mapping[str, Any], where: str = "prompt_support.pools.sources") -> PoolSource:
    """A :class:`PoolSource` from a params mapping.

    Either one file (``dataset``/``path``, ``field``, ``format``, ``where_prefix`` at the top),
    ``files: [...]`` whose items take the same keys (``field``/``format`` default to the top's), or
    ``hub: NAME``: the registered Hugging Face pool ``hf_prompt_pools/NAME`` (its repository, file
    and text field from the registry; ``revision``, ``split`` and ``field`` may be given).
    """
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise ValueError(f"{where}: each source needs a 'name', got {spec!r}")
    name = _check_name(spec["name"], where)
    if spec.get("hub"):
        return PoolSource(name, (PoolFile(Path(f"hf:{spec['hub']}"), hub=hub_pool(spec, f"{where}[{name}].hub")),))
    items = spec.get("files") or [spec]
    files = []
    for i, item in enumerate(items):
        loc = f"{where}[{name}].files[{i}]"
        if isinstance(item, str):
            item = {"path": item}
        files.append(
            PoolFile(
                path=resolve_location({k: item[k] for k in ("dataset", "path") if k in item}, loc),
                field=item.get("field", spec.get("field")),
                fmt=item.get("format", spec.get("format")),
                where_prefix=item.get("where_prefix", spec.get("where_prefix")),
            )
        )
    return PoolSource(name, tuple(files))


def hub_pool(spec: Mapping[str, Any], where: str) -> HubPool:
    """The :class:`HubPool` of a ``hub:`` source (its registry entry, overridden by the spec's keys)."""
    from capaudit.data.registry import entry

    try:
        e = entry("hf_prompt_pools", str(spec["hub"]))
    except KeyError as exc:
        raise ValueError(f"{where}: {exc.args[0]}") from None
    fmt = e.extra.get("format")
    field = spec.get("field") or e.extra.get("field") or ("text" if fmt == "txt" else None)
    if not field:
        raise ValueError(f"{where}: hf_prompt_pools/{spec['hub']} names no text field; give 'field'")
    files = e.extra.get("files")
    return HubPool(str(e.repository), str(field), str(files) if files else None,
                   str(spec["revision"]) if spec.get("revision") else None, str(spec.get("split", "train")))


def parse_source_arg(arg: str) -> PoolSource:
    """``NAME=FILE[:field]`` (CLI) → :class:`PoolSource`."""
    if "=" not in arg:
        raise ValueError(f"--source {arg!r}: expected NAME=FILE[:field]")
    name, rest = arg.split("=", 1)
    _check_name(name, "--source")
    path, fld = rest, None
    if not Path(rest).exists() and ":" in rest:
        path, fld = rest.rsplit(":", 1)
    return PoolSource(name, (PoolFile(Path(path), fld or None),))


def _empty_stats() -> Dict[str, int]:
    return {k: 0 for k in STAT_KEYS}


def _write_rows(fh, rows: Iterable[Mapping[str, Any]]) -> None:
    for row in rows:
        fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _target(out_dir: Path, name: str, stage: Optional[StagedFiles]) -> Path:
    return stage.path(name) if stage is not None else out_dir / name


def prepare_source(
    source: PoolSource,
    out_dir: PathLike,
    min_tokens: int = MIN_TOKENS,
    max_tokens: int = MAX_TOKENS,
    max_per_source: Optional[int] = None,
    stage: Optional[StagedFiles] = None,
) -> Dict[str, Any]:
    """Prepare one source (§3.1); returns its manifest entry (stats, histogram, files, outputs).

    With ``stage`` the pool files are written into its staging folder (see :func:`prepare_pools`).
    """
    if min_tokens < 0 or max_tokens < min_tokens:
        raise ValueError(f"need 0 <= min_tokens <= max_tokens, got {min_tokens}, {max_tokens}")
    out_dir = Path(out_dir)
    if stage is None:
        out_dir.mkdir(parents=True, exist_ok=True)
    stats = _empty_stats()
    safety = {"url": 0, "email": 0, "phone": 0, "keyword": 0}
    histogram: Dict[int, int] = {}
    seen: Set[str] = set()
    raw_path = _target(out_dir, f"{source.name}.prompt_only.jsonl", stage)
    filtered_path = _target(out_dir, f"{source.name}.filtered.jsonl", stage)
    raw_index = -1
    with raw_path.open("w", encoding="utf-8") as raw_fh, filtered_path.open("w", encoding="utf-8") as flt_fh:
        for pf in source.files:
            for text in pf.records():
                if max_per_source is not None and stats["raw_written"] >= max_per_source:
                    break
                raw_index += 1
                stats["read"] += 1
                prompt = normalize_prompt(text)
                if not prompt:
                    stats["empty"] += 1
                    continue
                key = prompt_hash(prompt)
                if key in seen:
                    stats["duplicate"] += 1
                    continue
                seen.add(key)
                n = lex_count(prompt)
                histogram[min(n, HISTOGRAM_CAP)] = histogram.get(min(n, HISTOGRAM_CAP), 0) + 1
                if n < min_tokens:
                    stats["too_short"] += 1
                    continue
                if n > max_tokens:
                    stats["too_long"] += 1
                    continue
                row = {"source": source.name, "prompt": prompt, "prompt_hash": key, "tokens_lexical": n, "raw_index": raw_index}
                _write_rows(raw_fh, [row])
                stats["raw_written"] += 1
                reason = safety_reason(prompt)
                if reason:
                    stats["filtered_safety"] += 1
                    safety[reason] += 1
                    continue
                _write_rows(flt_fh, [row])
                stats["filtered_written"] += 1
    return {
        "name": source.name,
        "stats": stats,
        "safety_reasons": safety,
        "token_histogram": {str(k): histogram[k] for k in sorted(histogram)},
        "inputs": [pf.provenance() for pf in source.files],
        "outputs": {"prompt_only": raw_path.name, "filtered": filtered_path.name},
    }


def read_prepared(path: PathLike) -> List[Dict[str, Any]]:
    """Rows of a prepared ``*.jsonl`` pool file."""
    path = Path(path)
    rows = []
    with path.open("r", encoding="utf-8") as fh:
        for i, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}: row {i}: not valid JSON ({exc.msg})") from None
    return rows


def prepare_union(union: UnionSpec, out_dir: PathLike, stage: Optional[StagedFiles] = None) -> Dict[str, Any]:
    """Merge prepared pools in member order, dropping prompts seen in an earlier member."""
    out_dir = Path(out_dir)
    stats = _empty_stats()
    per_member: Dict[str, Dict[str, int]] = {}
    seen: Set[str] = set()
    histogram: Dict[int, int] = {}
    with _target(out_dir, f"{union.name}.prompt_only.jsonl", stage).open("w", encoding="utf-8") as raw_fh, \
            _target(out_dir, f"{union.name}.filtered.jsonl", stage).open("w", encoding="utf-8") as flt_fh:
        for member in union.members:
            path = _target(out_dir, f"{member}.prompt_only.jsonl", stage)
            if not path.exists():
                raise ValueError(f"union '{union.name}': member pool '{member}' was not prepared ({path} missing)")
            taken = dup = 0
            for row in read_prepared(path):
                stats["read"] += 1
                if row["prompt_hash"] in seen:
                    stats["duplicate"] += 1
                    dup += 1
                    continue
                seen.add(row["prompt_hash"])
                taken += 1
                n = int(row["tokens_lexical"])
                histogram[min(n, HISTOGRAM_CAP)] = histogram.get(min(n, HISTOGRAM_CAP), 0) + 1
                _write_rows(raw_fh, [row])
                stats["raw_written"] += 1
                if safety_reason(row["prompt"]):
                    stats["filtered_safety"] += 1
                else:
                    _write_rows(flt_fh, [row])
                    stats["filtered_written"] += 1
            per_member[member] = {"taken": taken, "duplicate_of_earlier_member": dup}
    return {
        "name": union.name,
        "union_of": list(union.members),
        "stats": stats,
        "members": per_member,
        "token_histogram": {str(k): histogram[k] for k in sorted(histogram)},
        "outputs": {"prompt_only": f"{union.name}.prompt_only.jsonl", "filtered": f"{union.name}.filtered.jsonl"},
    }


OVERLAP_COLUMNS = ("pool_a", "pool_b", "prompts_a", "prompts_b", "shared", "share_of_a", "share_of_b")


def overlap_table(out_dir: PathLike, names: Sequence[str], kind: str = "prompt_only") -> List[Dict[str, Any]]:
    """Pairwise shared prompts (by ``prompt_hash``) between prepared pools, each unordered pair once."""
    hashes = {n: {r["prompt_hash"] for r in read_prepared(Path(out_dir) / f"{n}.{kind}.jsonl")} for n in names}
    rows = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = len(hashes[a] & hashes[b])
            rows.append(
                {
                    "pool_a": a,
                    "pool_b": b,
                    "prompts_a": len(hashes[a]),
                    "prompts_b": len(hashes[b]),
                    "shared": shared,
                    "share_of_a": round(shared / len(hashes[a]), 6) if hashes[a] else 0.0,
                    "share_of_b": round(shared / len(hashes[b]), 6) if hashes[b] else 0.0,
                }
            )
    return rows


def overlap_summary(out_dir: PathLike, names: Sequence[str], kind: str = "prompt_only") -> Dict[str, Any]:
    """Distinct prompts over all pools and, per pool, how many appear in no other pool."""
    hashes = {n: {r["prompt_hash"] for r in read_prepared(Path(out_dir) / f"{n}.{kind}.jsonl")} for n in names}
    union: Set[str] = set().union(*hashes.values()) if hashes else set()
    total = sum(len(h) for h in hashes.values())
    per_pool = {}
    for n, h in hashes.items():
        others = set().union(*(v for k, v in hashes.items() if k != n))
        per_pool[n] = {"prompts": len(h), "unique_to_pool": len(h - others), "shared_with_others": len(h & others)}
    return {"prompts_total": total, "distinct_prompts": len(union), "cross_pool_duplicates": total - len(union), "pools": per_pool}


def write_tsv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], path: PathLike) -> Path:
    """Tab-separated table with a header (LF line ends), written atomically."""
    path = Path(path)
    lines = ["\t".join(columns)] + ["\t".join(str(r[c]) for c in columns) for r in rows]
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path


@dataclass
class PreparedPools:
    """Result of :func:`prepare_pools`: where the files are and what the manifest says."""

    out_dir: Path
    manifest: Dict[str, Any]
    overlap: List[Dict[str, Any]] = field(default_factory=list)

    def filtered_path(self, name: str) -> Path:
        return self.out_dir / f"{name}.filtered.jsonl"

    @property
    def names(self) -> List[str]:
        return list(self.manifest["sources"])


def prepare_pools(
    sources: Sequence[PoolSource],
    out_dir: PathLike,
    unions: Sequence[UnionSpec] = (),
    min_tokens: int = MIN_TOKENS,
    max_tokens: int = MAX_TOKENS,
    max_per_source: Optional[int] = None,
) -> PreparedPools:
    """Prepare every source, then the unions; write the pool files, ``pool_overlap.tsv`` and ``manifest.json``.

    All-or-nothing: every file is written into a staging folder first and moved into ``out_dir``
    only when every source and union succeeded; ``manifest.json`` is written last and records
    the sha256 and size of each file (``files``), which :func:`verify_pool_file` checks before a
    pool is used. A failure leaves ``out_dir`` exactly as it was.
    """
    out_dir = check_output_dir(out_dir)
    names = [s.name for s in sources] + [u.name for u in unions]
    if len(set(names)) != len(names):
        raise ValueError(f"pool names must be unique, got {names}")
    if min_tokens < 0 or max_tokens < min_tokens:
        raise ValueError(f"need 0 <= min_tokens <= max_tokens, got {min_tokens}, {max_tokens}")
    if max_per_source is not None and max_per_source < 1:
        raise ValueError(f"max_per_source must be a positive integer, got {max_per_source}")
    for source in sources:  # fail before writing anything when an input is missing
        for pf in source.files:
            if pf.hub is None and not Path(pf.path).exists():
                raise FileNotFoundError(f"{pf.path}: prompt source '{source.name}' not found")
    entries: Dict[str, Any] = {}
    with StagedFiles(out_dir) as stage:
        for source in sources:
            entries[source.name] = prepare_source(source, out_dir, min_tokens, max_tokens, max_per_source, stage)
        for union in unions:
            entries[union.name] = prepare_union(union, out_dir, stage)
        base = [s.name for s in sources]
        staged = stage.path(f"{base[0]}.prompt_only.jsonl").parent if base else out_dir
        overlap = overlap_table(staged, base)
        summary = overlap_summary(staged, base)
        tsv = stage.path("pool_overlap.tsv")
        lines = ["\t".join(OVERLAP_COLUMNS)] + ["\t".join(str(r[c]) for c in OVERLAP_COLUMNS) for r in overlap]
        tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
        outputs = [stage.path(f) for e in entries.values() for f in e["outputs"].values()] + [tsv]
        files = files_block(outputs)
        stage.commit()
    manifest = {
        "spec": "reference-spec §3.1",
        "params": {"min_tokens": min_tokens, "max_tokens": max_tokens, "max_per_source": max_per_source,
                   "histogram_cap": HISTOGRAM_CAP, "dedup": "blake2b-16 of lower-cased normalised prompt"},
        "sources": entries,
        "overlap": summary,
        "files": files,
    }
    write_json_atomic(out_dir / "manifest.json", manifest)
    return PreparedPools(out_dir, manifest, overlap)


def verify_pool_file(path: PathLike) -> None:
    """Refuse a prepared pool file that does not match the ``manifest.json`` beside it.

    A file the manifest lists under ``files`` must have the recorded size and sha256; a file the
    manifest names as a pool output but without checksums (a manifest from an older capaudit)
    is refused too. Files no manifest mentions (user pools) pass unchecked.
    """
    p = Path(path)
    m = p.parent / "manifest.json"
    if not m.is_file():
        return
    hint = "re-run `capaudit prompt-pools prepare` (or the prompt-support stage) to rebuild the pools"
    if check_file(p, m, hint):
        return
    data = read_manifest(m)
    named = {f for e in (data.get("sources") or {}).values() if isinstance(e, Mapping)
             for f in (e.get("outputs") or {}).values()}
    if p.name in named:
        raise InputError(f"its manifest {m} records no checksum for it (written by an older capaudit), so it "
                         f"cannot be trusted; {hint}", path=p)
