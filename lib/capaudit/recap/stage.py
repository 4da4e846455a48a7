"""Recap stage (reference-spec §6): caption the configured images under each policy and export
one surface per policy, through the production path (notebook ``06_recap``).

Params section ``recap``::

    recap:
      model: capaudit-offline-coco-captioner   # served in-process by capaudit serve, or the model at `url`
      url: null                                # an OpenAI-compatible vision endpoint (list allowed)
      revision: null                           # hashed into ids; default for the offline captioner: its version
      policies: [photorealistic, naive]        # names in params/policies (policies_dir to change)
      inputs:                                  # registry folders ({dataset, path}) or user paths ({file})
        - {dataset: coco_mini, path: train2017}
        - {dataset: coco_mini, path: val2017}
      surface_prefix: recap_coco_mini          # surface names <prefix>_<policy with - → _>
      formats: [jsonl, parquet]
      image_mode: data
      concurrency: 8
      workers: 2                               # preprocessing processes
      server_workers: 1
      timeout: 60
      retries: 3
      mask_pii: false
      limit: null                              # at most this many images per policy

Outputs under ``artifacts/recap/``: ``stores/<policy>/`` (the resumable store; re-running the
stage asks nothing already answered), ``<surface>.{jsonl,parquet}`` with their
``.manifest.json`` and ``<surface>.failures.jsonl``, ``stage_manifest.json``; the summary table's
rows ``artifacts/tables/recap_summary.json`` (:mod:`.summary_rows`; the paper renders them); the
numbers fragment ``numbers/recap.json``. Who captioned is the model card the server declared and
the client recorded beside each store (:func:`capaudit.llm.store.answered_by`): its label (the
offline captioner says what it is) is in every table and manifest, its kind sets the table's
heuristic-captioner caveat, and its version is the default revision.
"""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.llm.cards import cards_label
from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic

from .export import collect, export_surface
from .inputs import ImageInput, open_images
from .pii import mask_pii
from .policies import load_policy
from .runner import StoreLayout, recap
from .summary_rows import recap_numbers, summary_row, write_summary_rows

#: the model when the params name none: the offline captioner (a stand-in) served in process
DEFAULT_MODEL = "capaudit-offline-coco-captioner"


def model_revision(model: str, section: Mapping[str, Any], url: Optional[str] = None) -> Optional[str]:
    """``recap.revision``; else the version the server at ``url`` declares for ``model`` (the offline
    captioner's composition version; hashed into ids); else ``None``."""
    if section.get("revision") is not None:
        return str(section["revision"])
    if url:
        from capaudit.llm.cards import model_revision as declared_revision

        return declared_revision(url, model)
    return None


def surface_name(prefix: str, policy: str) -> str:
    return f"{prefix}_{policy.replace('-', '_')}"


def resolve_inputs(section: Mapping[str, Any], cfg_path: Any, context_fields: Sequence[str] = ()) -> List[ImageInput]:
    """``recap.inputs`` → image inputs (registry folders are fetched and sha256-checked)."""
    items = section.get("inputs")
    if not isinstance(items, list) or not items:
        raise InputError("must be a non-empty list of {dataset, path} or {file}", path=cfg_path, field="recap.inputs")
    out = []
    for i, item in enumerate(items, 1):
        if isinstance(item, str):
            item = {"file": item}
        if not isinstance(item, Mapping):
            raise InputError(f"item {i} must be a mapping", path=cfg_path, field="recap.inputs")
        if item.get("dataset") and item.get("path"):
            from capaudit.data.registry import fetch

            spec: Any = fetch(str(item["dataset"]), str(item["path"]))
        elif item.get("file"):
            spec = item["file"]
        else:
            raise InputError(f"item {i} needs dataset + path or file", path=cfg_path, field="recap.inputs")
        out.append(open_images(spec, id_column=item.get("id_column"), image_column=item.get("image_column"),
                               context_fields=context_fields))
    return out


def run(cfg: RunConfig) -> Dict[str, Any]:
    """Run the recap stage for the params file (module docstring); returns tables and paths."""
    import pandas as pd

    from capaudit.summaries.numbers_fragments import write_numbers_fragment

    section = cfg.section("recap")
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "recap"
    art.mkdir(parents=True, exist_ok=True)
    model = str(section.get("model", DEFAULT_MODEL))
    policies = [load_policy(p, section.get("policies_dir")) for p in section.get("policies", ["photorealistic", "naive"])]
    prefix = str(section.get("surface_prefix", "recap"))
    formats = section.get("formats", ["jsonl", "parquet"])
    formats = [formats] if isinstance(formats, str) else list(formats)
    if not formats or any(f not in ("jsonl", "parquet") for f in formats):
        raise InputError("formats must be jsonl and/or parquet", path=cfg.path, field="recap.formats")
    url = section.get("url")
    urls = [url] if isinstance(url, str) else list(url or [])
    if urls:
        server_cm: Any = nullcontext(urls)
    else:
        from capaudit.llm.server import background_server

        server_cm = background_server([model], workers=int(section.get("server_workers", 1)))
    t0 = time.monotonic()
    rows: List[Dict[str, Any]] = []
    surfaces: Dict[str, Dict[str, Any]] = {}
    run_stats: Dict[str, Any] = {}
    captions: Dict[str, Dict[str, str]] = {}
    answered: List[Dict[str, Any]] = []
    with server_cm as base:
        from capaudit.llm.store import answered_by

        endpoint = base if isinstance(base, list) else [base]
        revision = model_revision(model, section, endpoint[0])
        for pol in policies:
            inputs = resolve_inputs(section, cfg.path, pol.context_fields)
            store = art / "stores" / pol.name
            stats = recap(
                inputs, pol, store, endpoint, model, revision=revision,
                image_mode=str(section.get("image_mode", "data")), concurrency=int(section.get("concurrency", 8)),
                timeout=float(section.get("timeout", 60)), retries=int(section.get("retries", 3)),
                workers=int(section.get("workers", 2)), resume=True, progress=bool(section.get("progress", False)),
                handle_signals=False, limit=section.get("limit"), inputs_description=[i.describe() for i in inputs],
            )
            run_stats[pol.name] = stats.to_dict()
            cards = answered_by(str(StoreLayout(store).responses) + os.sep)
            answered += [c for c in cards if c not in answered]
            name = surface_name(prefix, pol.name)
            paths = {}
            mask = bool(section.get("mask_pii", False))
            for f in formats:
                export = export_surface(store, art / f"{name}.{f}", mask=mask)
                paths[f] = str(export.path)
            exported, _ = collect(store)
            captions[pol.name] = {r["image_id"]: (mask_pii(r["caption"]).text if mask else r["caption"])
                                  for r in exported}
            surfaces[pol.name] = {"name": name, "paths": paths, "failures": str(export.failures_path)}
            rows.append(summary_row(pol, name, model, export.rows, export.failures, list(captions[pol.name].values()),
                                    stats.sent, stats.skipped_answered, cards))
    write_summary_rows(rows, dirs["artifacts"], inputs=[s["paths"][formats[0]] for s in surfaces.values()])
    table = pd.DataFrame(rows)
    ex_n = int(section.get("examples", 3))
    examples = pd.DataFrame({p.name: pd.Series(captions[p.name], dtype=object) for p in policies}).dropna().head(ex_n)
    examples.index.name = "image_id"
    label = cards_label(answered, model)
    numbers = recap_numbers(rows, len(policies), label)
    write_numbers_fragment(dirs["artifacts"], "recap", numbers, backend=label)
    manifest = {"backend": label, "model": model, "revision": revision, "answered_by": answered,
                "url": urls or "in-process capaudit serve", "policies": [p.to_dict() for p in policies],
                "surfaces": surfaces, "run_stats": run_stats, "elapsed_sec": round(time.monotonic() - t0, 2),
                "surfaces_yaml": [surface_spec(surfaces[p.name]["name"], next(iter(surfaces[p.name]["paths"].values())))
                                  for p in policies]}
    write_json_atomic(art / "stage_manifest.json", manifest)
    return {"table": table, "examples": examples, "surfaces": surfaces, "manifest": manifest, "artifacts": art,
            "backend": label}


def surface_spec(name: str, path: str) -> Dict[str, Any]:
    """The ``surfaces:`` entry that names an exported recap surface in a params file."""
    return {"name": name, "file": path, "format": "jsonl" if path.endswith(".jsonl") else "parquet",
            "caption_field": "caption", "key_field": "image_id", "image_field": "image_path",
            "meta_fields": ["model", "policy", "backend", "image_key"]}


__all__ = ["DEFAULT_MODEL", "model_revision", "surface_name", "resolve_inputs", "run", "surface_spec"]
