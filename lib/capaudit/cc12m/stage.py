"""The CC12M case-study stage (params ``cc12m:``): bridge, image manifest, images out of the shards.

Params::

    cc12m:
      anchor: ref_cc12m_llavanext        # the surface the others meet (default: the first)
      key_normalization: zfill9
      seed: 0
      max_rows: 5000                     # the reference's bridge cut (it judged the 4,494 found)
      skip_incomplete: true              # count and skip rows without key/URL or caption (reference)
      surfaces:
        - {name, path, join: key|url, caption: FIELD | [FIELD, ...], key?: FIELD, url?: FIELD, format?,
           hub?: {repo, revision?, allow?: [PATTERN, ...]}}
      shards: GLOB | FOLDER | FILE       # WebDataset .tar shards holding the images
      shards_hub: {repo, revision?, allow?: [...]}
      match: url                         # find images by sidecar URL (normalised) or member key
      naming: image-id
      allow_missing: true                # images not in the shards are counted out, as the reference drops them

A surface (or the shards) with ``hub:`` whose ``path`` matches no local file is first downloaded from
that Hugging Face dataset repository into the path's folder (``huggingface_hub.snapshot_download``);
offline that is one line naming the repository. Outputs under ``artifacts/cc12m/``: ``bridge/``
(``joined.jsonl``, ``bridge_summary.json``), ``manifest.jsonl`` (located in the shards) and
``images/`` (``images/``, ``manifest.jsonl``, one ``<surface>.jsonl`` per surface with an ``image``
field, ``materialize_summary.json``), which ``judges.slices[].surfaces[]`` read as ``source: jsonl``.
"""

from __future__ import annotations

import glob
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from capaudit.errors import InputError, OfflineError

from .surface_spec import SurfaceSpec

SECTION = "cc12m"


@dataclass(frozen=True)
class HubFiles:
    """Where a local input comes from when it is not there yet: a Hugging Face dataset repository."""

    repo: str
    revision: Optional[str] = None
    allow: Tuple[str, ...] = ()


@dataclass(frozen=True)
class CC12MParams:
    """The ``cc12m:`` section (module docstring), the only defaults."""

    surfaces: Tuple[SurfaceSpec, ...]
    shards: str
    anchor: Optional[str] = None
    key_normalization: str = "zfill9"
    seed: int = 0
    max_rows: Optional[int] = 5000
    skip_incomplete: bool = True
    match: str = "url"
    naming: str = "image-id"
    allow_missing: bool = True
    surface_hubs: Tuple[Tuple[str, HubFiles], ...] = ()
    shards_hub: Optional[HubFiles] = None


def _hub(value: Any, where: str) -> Optional[HubFiles]:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value.get("repo"):
        raise InputError(f"{where}: expected a mapping with 'repo' (and optionally 'revision', 'allow')", field=where)
    allow = value.get("allow") or ()
    return HubFiles(str(value["repo"]), str(value["revision"]) if value.get("revision") else None,
                    tuple(str(a) for a in ([allow] if isinstance(allow, str) else allow)))


def parse_params(section: Mapping[str, Any], where: str = SECTION) -> CC12MParams:
    """:class:`CC12MParams` from the params section; a bad value is one line naming its key."""
    items = section.get("surfaces")
    if not isinstance(items, list) or len(items) < 2:
        raise InputError(f"{where}.surfaces: at least two surfaces are needed", field=f"{where}.surfaces")
    specs: List[SurfaceSpec] = []
    hubs: List[Tuple[str, HubFiles]] = []
    for i, s in enumerate(items):
        loc = f"{where}.surfaces[{i}]"
        if not isinstance(s, Mapping) or not s.get("name") or not s.get("path"):
            raise InputError(f"{loc}: needs 'name' and 'path'", field=loc)
        if s.get("join") not in ("key", "url"):
            raise InputError(f"{loc}.join: key or url, got {s.get('join')!r}", field=f"{loc}.join")
        caption = s.get("caption")
        fields = tuple(str(c) for c in ([caption] if isinstance(caption, str) else caption or ()))
        if not fields:
            raise InputError(f"{loc}.caption: the caption field (or a list of fields, first non-blank wins)",
                             field=f"{loc}.caption")
        spec = SurfaceSpec(name=str(s["name"]), path=str(s["path"]), join=str(s["join"]), caption_fields=fields,
                           key_field=s.get("key"), url_field=s.get("url"), format=s.get("format"))
        if spec.join_field is None:
            raise InputError(f"{loc}: join: {spec.join} needs '{spec.join}' (its field)", field=f"{loc}.{spec.join}")
        specs.append(spec)
        hub = _hub(s.get("hub"), f"{loc}.hub")
        if hub:
            hubs.append((spec.name, hub))
    from .image_check import NAMINGS
    from .shard_index import MATCH_MODES
    from .urls import KEY_MODES

    for key, allowed, default in (("match", MATCH_MODES, "url"), ("naming", NAMINGS, "image-id"),
                                  ("key_normalization", KEY_MODES, "zfill9")):
        if section.get(key, default) not in allowed:
            raise InputError(f"{where}.{key}: one of {', '.join(allowed)}, got {section.get(key)!r}", field=f"{where}.{key}")
    for key in ("skip_incomplete", "allow_missing"):
        if key in section and not isinstance(section[key], bool):
            raise InputError(f"{where}.{key}: true or false, got {section[key]!r}", field=f"{where}.{key}")
    for key in ("max_rows", "seed"):
        v = section.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < (1 if key == "max_rows" else 0)):
            raise InputError(f"{where}.{key}: a {'positive' if key == 'max_rows' else 'non-negative'} whole number"
                             f"{' or null (no cut)' if key == 'max_rows' else ''}, got {v!r}", field=f"{where}.{key}")
    if not section.get("shards"):
        raise InputError(f"{where}.shards: the WebDataset .tar shards holding the images", field=f"{where}.shards")
    max_rows = section.get("max_rows", 5000)
    return CC12MParams(
        surfaces=tuple(specs), shards=str(section["shards"]), anchor=section.get("anchor"),
        key_normalization=str(section.get("key_normalization", "zfill9")), seed=int(section.get("seed", 0)),
        max_rows=None if max_rows is None else int(max_rows), skip_incomplete=bool(section.get("skip_incomplete", True)),
        match=str(section.get("match", "url")), naming=str(section.get("naming", "image-id")),
        allow_missing=bool(section.get("allow_missing", True)), surface_hubs=tuple(hubs),
        shards_hub=_hub(section.get("shards_hub"), f"{where}.shards_hub"))


def _local_root(pattern: str) -> Path:
    """The folder part of a path or glob before its first wildcard."""
    parts = Path(pattern).parts
    fixed = [p for p in parts[: next((i for i, p in enumerate(parts) if any(c in p for c in "*?[")), len(parts))]]
    root = Path(*fixed) if fixed else Path(".")
    return root if (root.is_dir() or not root.suffix) else root.parent


def is_present(pattern: str) -> bool:
    """Whether a path, folder or glob names at least one local file."""
    return bool(glob.glob(pattern, recursive=True)) if any(c in pattern for c in "*?[") else Path(pattern).exists()


def fetch_from_hub(pattern: str, hub: HubFiles) -> Dict[str, Any]:
    """Bring the local copy of ``hub`` in the folder of ``pattern`` up to date; what was used.

    Where the Hub answers, ``snapshot_download`` always runs: it resumes an interrupted download and
    checks what is there, so a partial copy is never taken for the whole; the commit it resolved is
    returned. Where it does not, an existing local copy is used and marked as not checked against the
    Hub (returned, and written to the stage summary); no copy at all is one line naming the repository.
    """
    from capaudit.surfaces.readers import hub_unreachable

    why = hub_unreachable()
    if why and is_present(pattern):
        return {"repo": hub.repo, "revision": hub.revision, "local": str(_local_root(pattern)),
                "checked_against_hub": False, "why": why}
    if why:
        raise OfflineError(f"{pattern} is not here and the Hugging Face dataset '{hub.repo}' it comes from cannot be "
                           f"downloaded ({why}); download it there (huggingface-cli download --repo-type dataset "
                           f"{hub.repo} --local-dir {_local_root(pattern)}) or point the path at a local copy",
                           path=pattern)
    from huggingface_hub import HfApi, snapshot_download

    commit = HfApi().dataset_info(hub.repo, revision=hub.revision).sha
    snapshot_download(repo_id=hub.repo, repo_type="dataset", revision=commit,
                      allow_patterns=list(hub.allow) or None, local_dir=str(_local_root(pattern)))
    if not is_present(pattern):
        raise InputError(f"the download of '{hub.repo}' holds no file matching this path", path=pattern)
    return {"repo": hub.repo, "revision": hub.revision, "commit": commit, "local": str(_local_root(pattern)),
            "checked_against_hub": True}


def run(cfg: Any) -> Dict[str, Any]:
    """Bridge → manifest located in the shards → images and per-surface caption files (module docstring)."""
    from capaudit.io.atomic import StagedFiles, check_output_dir, write_json_atomic

    from .bridge import run_bridge
    from .manifest import locate, manifest_from_joined
    from .materialize import materialize
    from .shard_index import build_index
    from .shards import expand_shards
    from .tables import write_table, write_table_to

    p = parse_params(cfg.section(SECTION))
    copies = {name: fetch_from_hub(next(s.path for s in p.surfaces if s.name == name), hub) for name, hub in p.surface_hubs}
    if p.shards_hub:
        copies["shards"] = fetch_from_hub(p.shards, p.shards_hub)
    index = build_index(expand_shards(p.shards))  # a bad shard is refused before anything is written
    art = cfg.dirs()["artifacts"] / "cc12m"
    bridge_dir = check_output_dir(art / "bridge")
    result = run_bridge(list(p.surfaces), anchor=p.anchor, key_mode=p.key_normalization, seed=p.seed,
                        max_rows=p.max_rows, skip_incomplete=p.skip_incomplete)
    if not result.rows:
        raise InputError("the bridge joined no image: no row is in every surface (see the counts above)",
                         path=bridge_dir)
    result.summary["outputs"] = {"joined": "joined.jsonl", "summary": "bridge_summary.json"}
    with StagedFiles(bridge_dir) as staged:
        write_table_to(result.rows, staged.path("joined.jsonl"), "jsonl")
        staged.commit()
    write_json_atomic(bridge_dir / "bridge_summary.json", result.summary)
    rows = manifest_from_joined(str(bridge_dir / "joined.jsonl"))
    located = locate(rows, index, p.match)
    write_table(rows, art / "manifest.jsonl")
    summary = materialize(str(art / "manifest.jsonl"), p.shards, str(art / "images"), match=p.match, naming=p.naming,
                          allow_missing=p.allow_missing, joined=str(bridge_dir / "joined.jsonl"), shard_index=index)
    if not summary["materialized"]:
        raise InputError("no image of the bridge was found in the shards", path=p.shards)
    out = {"spec": "CC12M four-caption bridge (reference build_cc12m_four_caption_llava_url_bridge_slice.py)",
           "params": {"anchor": p.anchor or p.surfaces[0].name, "seed": p.seed, "max_rows": p.max_rows,
                      "key_normalization": p.key_normalization, "match": p.match, "naming": p.naming,
                      "allow_missing": p.allow_missing, "skip_incomplete": p.skip_incomplete},
           "hub_copies": copies, "joined": len(result.rows), "located": located, "shards": index.stats(), "materialize": summary,
           "surfaces": {s.name: str(art / "images" / f"{s.name}.jsonl") for s in p.surfaces}}
    write_json_atomic(art / "cc12m_summary.json", out)
    return {"bridge": result.summary, **out}


def count_tables(result: Mapping[str, Any]) -> Tuple[Any, Any]:
    """Two frames of a :func:`run` result: per surface what the bridge kept and dropped, and per
    surface what the shards gave (rows with an image, without one)."""
    import pandas as pd

    m = result["materialize"]
    images = pd.DataFrame(m["caption_files"]).T
    images.attrs["images"] = {k: m[k] for k in ("requested", "materialized", "missing", "corrupt")}
    return pd.DataFrame(result["bridge"]["surfaces"]).T, images


__all__ = ["SECTION", "HubFiles", "CC12MParams", "parse_params", "is_present", "fetch_from_hub", "run", "count_tables"]
