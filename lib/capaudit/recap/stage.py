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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from capaudit.llm.cards import cards_label
from capaudit.config import RunConfig
from capaudit.errors import InputError
from capaudit.io.atomic import write_json_atomic
from capaudit.results import StageResult

from .export import collect, export_surface
from .params import DEFAULT_MODEL, SECTION, RecapParams
from .inputs import ImageInput, open_images
from .pii import mask_pii
from .policies import load_policy
from .runner import StoreLayout, recap
from .summary_rows import recap_numbers, summary_row, write_summary_rows

def model_revision(model: str, revision: Optional[str], url: Optional[str] = None) -> Optional[str]:
    """``revision`` (``recap.revision``, ``--revision``); else the version the server at ``url``
    declares for ``model`` (the offline captioner's composition version; hashed into ids); else ``None``."""
    if revision is not None:
        return str(revision)
    if url:
        from capaudit.llm.cards import model_revision as declared_revision

        return declared_revision(url, model)
    return None


def surface_name(prefix: str, policy: str) -> str:
    return f"{prefix}_{policy.replace('-', '_')}"


def resolve_inputs(items: Sequence[Any], cfg_path: Any, context_fields: Sequence[str] = ()) -> List[ImageInput]:
    """``recap.inputs`` → image inputs (registry folders are fetched and sha256-checked)."""
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


def caption_policy(params: RecapParams, policy: Any, inputs: Sequence[ImageInput], store: Path,
                   endpoint: Sequence[str], revision: Optional[str]) -> Any:
    """Caption ``inputs`` under ``policy`` into the resumable ``store`` (:func:`capaudit.recap.runner.recap`
    with the params' request settings); the run's stats."""
    return recap(inputs, policy, store, list(endpoint), params.model, revision=revision, image_mode=params.image_mode,
                 concurrency=params.concurrency, timeout=params.timeout, retries=params.retries,
                 workers=params.workers, resume=True, progress=params.progress, handle_signals=False,
                 limit=params.limit, inputs_description=[i.describe() for i in inputs])


@dataclass(frozen=True, eq=False)
class RecapResult(StageResult):
    """What :func:`run` wrote: the summary table, caption examples, surfaces, the stage manifest."""

    table: Any
    examples: Any
    surfaces: Dict[str, Dict[str, Any]]
    manifest: Dict[str, Any]
    artifacts: Path
    backend: str


def run(cfg: RunConfig) -> RecapResult:
    """Run the recap stage for the params file (module docstring); returns tables and paths."""
    import pandas as pd

    from capaudit.summaries.numbers_fragments import write_numbers_fragment

    params = RecapParams.from_section(cfg.section(SECTION), cfg.path)
    dirs = cfg.dirs()
    art = dirs["artifacts"] / "recap"
    art.mkdir(parents=True, exist_ok=True)
    model = params.model
    policies = [load_policy(p, params.policies_dir) for p in params.policies]
    prefix = params.surface_prefix
    formats = list(params.formats)
    urls = list(params.url)
    if urls:
        server_cm: Any = nullcontext(urls)
    else:
        from capaudit.llm.server import background_server

        server_cm = background_server([model], workers=params.server_workers)
    t0 = time.monotonic()
    rows: List[Dict[str, Any]] = []
    surfaces: Dict[str, Dict[str, Any]] = {}
    run_stats: Dict[str, Any] = {}
    captions: Dict[str, Dict[str, str]] = {}
    answered: List[Dict[str, Any]] = []
    with server_cm as base:
        from capaudit.llm.store import answered_by

        endpoint = base if isinstance(base, list) else [base]
        revision = model_revision(model, params.revision, endpoint[0])
        for pol in policies:
            inputs = resolve_inputs(params.inputs, cfg.path, pol.context_fields)
            store = art / "stores" / pol.name
            stats = caption_policy(params, pol, inputs, store, endpoint, revision)
            run_stats[pol.name] = stats.to_dict()
            cards = answered_by(str(StoreLayout(store).responses) + os.sep)
            answered += [c for c in cards if c not in answered]
            name = surface_name(prefix, pol.name)
            paths = {}
            mask = params.mask_pii
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
    ex_n = params.examples
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
    return RecapResult(table, examples, surfaces, manifest, art, label)


def surface_spec(name: str, path: str) -> Dict[str, Any]:
    """The ``surfaces:`` entry that names an exported recap surface in a params file."""
    return {"name": name, "file": path, "format": "jsonl" if path.endswith(".jsonl") else "parquet",
            "caption_field": "caption", "key_field": "image_id", "image_field": "image_path",
            "meta_fields": ["model", "policy", "backend", "image_key"]}


__all__ = ["DEFAULT_MODEL", "RecapResult", "caption_policy", "model_revision", "surface_name", "resolve_inputs", "run",
           "surface_spec"]
