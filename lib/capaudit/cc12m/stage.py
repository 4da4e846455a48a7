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
from typing import Any, Dict, Mapping, Tuple

from capaudit.errors import InputError, OfflineError
from capaudit.results import StageResult

from .params import SECTION, CC12MParams, HubFiles, parse_params


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


BRIDGE_SUMMARY = "bridge_summary.json"


def write_bridge(p: CC12MParams, out_dir: Any, fmt: str = "jsonl", refuse_empty: bool = False) -> Any:
    """Join the params' surfaces (:func:`capaudit.cc12m.bridge.run_bridge`) and write ``joined.<fmt>``
    and ``bridge_summary.json`` (last: it describes the table) in ``out_dir``; the bridge result.
    ``refuse_empty``: a join with no row is an error, before anything is written."""
    from capaudit.io.atomic import StagedFiles, write_json_atomic

    from .bridge import run_bridge
    from .tables import write_table_to

    out = Path(out_dir)
    result = run_bridge(list(p.surfaces), anchor=p.anchor, key_mode=p.key_normalization, seed=p.seed,
                        max_rows=p.max_rows, skip_incomplete=p.skip_incomplete)
    if refuse_empty and not result.rows:
        raise InputError("the bridge joined no image: no row is in every surface (see the counts above)", path=out)
    name = f"joined.{fmt}"
    result.summary["outputs"] = {"joined": name, "summary": BRIDGE_SUMMARY}
    with StagedFiles(out) as staged:
        write_table_to(result.rows, staged.path(name), fmt)
        staged.commit()
    write_json_atomic(out / BRIDGE_SUMMARY, result.summary)
    return result


@dataclass(frozen=True, eq=False)
class CC12MResult(StageResult):
    """What :func:`run` wrote (``cc12m_summary.json`` is :meth:`summary`; ``bridge`` the bridge counts)."""

    bridge: Dict[str, Any]
    spec: str
    params: Dict[str, Any]
    hub_copies: Dict[str, Any]
    joined: int
    located: Dict[str, Any]
    shards: Dict[str, Any]
    materialize: Dict[str, Any]
    surfaces: Dict[str, str]

    def summary(self) -> Dict[str, Any]:
        """The stage summary as written to ``artifacts/cc12m/cc12m_summary.json``."""
        out = self.to_dict()
        out.pop("bridge")
        return out


def run(cfg: Any) -> CC12MResult:
    """Bridge → manifest located in the shards → images and per-surface caption files (module docstring)."""
    from capaudit.io.atomic import check_output_dir, write_json_atomic

    from .manifest import locate, manifest_from_joined
    from .materialize import materialize
    from .shard_index import build_index
    from .shards import expand_shards
    from .tables import write_table

    p = CC12MParams.from_section(cfg.section(SECTION), cfg.path)
    copies = {name: fetch_from_hub(next(s.path for s in p.surfaces if s.name == name), hub) for name, hub in p.surface_hubs}
    if p.shards_hub:
        copies["shards"] = fetch_from_hub(p.shards, p.shards_hub)
    index = build_index(expand_shards(p.shards))  # a bad shard is refused before anything is written
    art = cfg.dirs()["artifacts"] / "cc12m"
    bridge_dir = check_output_dir(art / "bridge")
    result = write_bridge(p, bridge_dir, refuse_empty=True)
    rows = manifest_from_joined(str(bridge_dir / "joined.jsonl"))
    located = locate(rows, index, p.match)
    write_table(rows, art / "manifest.jsonl")
    summary = materialize(str(art / "manifest.jsonl"), p.shards, str(art / "images"), match=p.match, naming=p.naming,
                          allow_missing=p.allow_missing, joined=str(bridge_dir / "joined.jsonl"), shard_index=index)
    if not summary["materialized"]:
        raise InputError("no image of the bridge was found in the shards", path=p.shards)
    out = CC12MResult(
        bridge=result.summary,
        spec="CC12M four-caption bridge (reference build_cc12m_four_caption_llava_url_bridge_slice.py)",
        params={"anchor": p.anchor or p.surfaces[0].name, "seed": p.seed, "max_rows": p.max_rows,
                "key_normalization": p.key_normalization, "match": p.match, "naming": p.naming,
                "allow_missing": p.allow_missing, "skip_incomplete": p.skip_incomplete},
        hub_copies=copies, joined=len(result.rows), located=located, shards=index.stats(), materialize=summary,
        surfaces={s.name: str(art / "images" / f"{s.name}.jsonl") for s in p.surfaces})
    write_json_atomic(art / "cc12m_summary.json", out.summary())
    return out


def count_tables(result: Mapping[str, Any]) -> Tuple[Any, Any]:
    """Two frames of a :func:`run` result: per surface what the bridge kept and dropped, and per
    surface what the shards gave (rows with an image, without one)."""
    import pandas as pd

    m = result["materialize"]
    images = pd.DataFrame(m["caption_files"]).T
    images.attrs["images"] = {k: m[k] for k in ("requested", "materialized", "missing", "corrupt")}
    return pd.DataFrame(result["bridge"]["surfaces"]).T, images


__all__ = ["SECTION", "BRIDGE_SUMMARY", "CC12MParams", "CC12MResult", "HubFiles", "count_tables", "fetch_from_hub",
           "is_present", "parse_params", "run", "write_bridge"]
