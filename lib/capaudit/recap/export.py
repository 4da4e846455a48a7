"""``capaudit recap export``: a recap store → a caption surface (JSONL or Parquet) + failures list.

One row per captioned image, sorted by ``image_id``:

=====================  ==========================================================================
``image_id``           the input's id (file stem for a folder of images, §6 id rules)
``image_path``         the image file (``<shard>#<member>`` / ``<file>#row=<n>`` when embedded)
``caption``            the cleaned caption (PII-masked when asked; ``pii_masked`` counts the spans)
``model``              the model that answered (offline backends say ``offline`` in their name)
``policy``             policy name; ``policy_version`` and ``prompt_version`` alongside
``backend``            ``offline`` for capaudit's local backends (``capaudit-*``), else ``model``
``image_key``          ``sha256:<hex>`` of the image bytes
``source``             the input (``--images`` value) the image came from (§6 ``source``)
``prompt_tokens``,     from the server's ``usage`` (``usage_unit`` = ``words`` for ``capaudit serve``,
``completion_tokens``  which has no tokenizer, else ``tokens``)
``finish_reason``      the server's (``length`` = cut at ``max_tokens``; still a caption, as in §6)
``timestamp``          when the answer arrived (UTC ISO ``Z``)
``request_id``         the content address of the request
=====================  ==========================================================================

Rows come from :func:`capaudit.llm.store.merge` (one row per request id, answered beats failed,
independent of file order). When one image id has answers under several request ids (the file
changed between runs), the latest answer wins. Images with no answer are listed, with the latest
reason, in ``<out stem>.failures.jsonl``; ``<out>.manifest.json`` (written last) gives counts and
the ``surfaces:`` entry that names the export in a params file. All files are written atomically.
The merged rows of a store are held in memory while exporting (about 1-2 KB per image).

A part file whose last line is cut (no newline, not JSON) is refused, naming file and line: the
run that wrote it was interrupted (``recap run --resume`` drops the cut line and asks that image
again). While a run is still writing the store (its ``run.lock`` held) the export is a snapshot and
says so out loud: the manifest's ``store_in_progress`` is true and ``cut_last_lines`` lists the
lines not counted (both also on the command's line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from capaudit.errors import EmptyInputError, InputError
from capaudit.io.atomic import atomic_path, check_output_path, write_json_atomic
from capaudit.io.lock import lock_held
from capaudit.io.canonical_json import dumps_line, loads
from capaudit.llm.store import merge, store_files

from .pii import mask_pii
from .runner import StoreLayout

PathLike = Union[str, Path]
COLUMNS = ("image_id", "image_path", "caption", "model", "policy", "policy_version", "prompt_version", "backend",
           "image_key", "source", "prompt_tokens", "completion_tokens", "usage_unit", "finish_reason", "timestamp",
           "request_id")
FORMATS = ("jsonl", "parquet")


def backend_kind(model: str) -> str:
    """``offline`` for capaudit's local backends (named ``capaudit-*``), else ``model``."""
    return "offline" if str(model).startswith("capaudit-") else "model"


@dataclass
class ExportResult:
    """What an export wrote."""

    path: Path
    rows: int
    failures: int
    failures_path: Path
    manifest_path: Path
    models: List[str] = field(default_factory=list)
    policies: List[str] = field(default_factory=list)
    pii_spans: Dict[str, int] = field(default_factory=dict)
    #: a run was writing the store while it was exported (a snapshot)
    in_progress: bool = False
    #: ``{file, line}`` of cut last lines not counted (only while a run is in progress)
    cut_last_lines: List[Dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {"path": str(self.path), "rows": self.rows, "failures": self.failures,
                "failures_path": str(self.failures_path), "manifest": str(self.manifest_path),
                "models": self.models, "policies": self.policies, "pii_spans": self.pii_spans,
                "in_progress": self.in_progress, "cut_last_lines": self.cut_last_lines}


def _format_of(out: Path, fmt: Optional[str]) -> str:
    if fmt:
        if fmt not in FORMATS:
            raise InputError(f"format must be one of {FORMATS}", path=out, field="format")
        return fmt
    s = out.name.lower()
    if s.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if s.endswith(".parquet"):
        return "parquet"
    raise InputError("cannot tell the format from the name; use .jsonl or .parquet", path=out, field="out")


def cut_last_line(file: PathLike) -> Optional[int]:
    """The 1-based number of ``file``'s last line when it is cut (no newline and not JSON), else ``None``."""
    with open(file, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        if size == 0:
            return None
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return None
        fh.seek(0)
        data = fh.read()
    tail = data[data.rfind(b"\n") + 1:]
    try:
        loads(tail)
        return None
    except ValueError:
        return data.count(b"\n") + 1


def check_store_complete(store: PathLike) -> Tuple[bool, List[Dict[str, Any]]]:
    """``(in progress, cut last lines)`` of a recap store: a cut line is an :class:`InputError`
    naming file and line unless a run holds the store's lock (then it is returned, to be said)."""
    layout = StoreLayout(Path(store))
    running = lock_held(layout.lock)
    cut = []
    for f in store_files(str(layout.responses) + "/"):
        n = cut_last_line(f)
        if n is None:
            continue
        if not running:
            raise InputError("last line is cut (no newline, not JSON): a run was interrupted; 'capaudit recap run "
                             "--resume' drops the cut line and asks that image again", path=f, line=n)
        cut.append({"file": str(f), "line": n})
    return running, cut


def collect(store: PathLike) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """``(answered rows, failures)``: one export row per captioned image id and one failure row per
    image id without any answer (module docstring)."""
    layout = StoreLayout(Path(store))
    if not layout.responses.is_dir():
        raise InputError("not a recap store (no responses/ folder)", path=store, field="store")
    merged = merge(str(layout.responses))
    best: Dict[str, Dict[str, Any]] = {}
    failed: Dict[str, Dict[str, Any]] = {}
    for rid, row in merged.items():
        meta = row.get("recap") or {}
        iid = meta.get("image_id")
        if not isinstance(iid, str):
            raise InputError(f"response row {rid} has no recap.image_id (not written by capaudit recap)",
                             path=layout.responses, field="recap.image_id")
        when = str(row.get("finished_at") or row.get("started_at") or "")
        if row["ok"]:
            cur = best.get(iid)
            if cur is None or (when, rid) > (str(cur.get("finished_at") or cur.get("started_at") or ""), cur["request_id"]):
                best[iid] = row
        else:
            cur = failed.get(iid)
            if cur is None or (when, rid) > (str(cur.get("finished_at") or cur.get("started_at") or ""), cur["request_id"]):
                failed[iid] = row
    rows = [_export_row(best[k]) for k in sorted(best)]
    failures = [{"image_id": k, "image_path": (failed[k].get("recap") or {}).get("image_path"),
                 "error_kind": failed[k].get("error_kind"), "reason": failed[k].get("error"),
                 "stage": (failed[k].get("recap") or {}).get("stage"), "attempts": failed[k].get("attempts"),
                 "model": failed[k].get("model"), "policy": (failed[k].get("recap") or {}).get("policy"),
                 "timestamp": failed[k].get("finished_at") or failed[k].get("started_at"),
                 "request_id": failed[k]["request_id"]}
                for k in sorted(failed) if k not in best]
    return rows, failures


def _export_row(row: Dict[str, Any]) -> Dict[str, Any]:
    meta = row.get("recap") or {}
    usage = row.get("usage") if isinstance(row.get("usage"), dict) else {}
    model = str(row.get("model") or "")

    def _int(v: Any) -> Optional[int]:
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    return {
        "image_id": meta.get("image_id"), "image_path": meta.get("image_path"), "caption": row.get("caption"),
        "model": model, "policy": meta.get("policy"), "policy_version": meta.get("policy_version"),
        "prompt_version": meta.get("prompt_version"), "backend": backend_kind(model),
        "image_key": meta.get("image_key"), "source": meta.get("source"),
        "prompt_tokens": _int(usage.get("prompt_tokens")),
        "completion_tokens": _int(usage.get("completion_tokens")),
        "usage_unit": str(usage.get("unit") or "tokens") if usage else None,
        "finish_reason": row.get("finish_reason"),
        "timestamp": row.get("finished_at") or row.get("started_at"), "request_id": row["request_id"],
    }


def _write_rows(rows: List[Dict[str, Any]], out: Path, fmt: str, columns: List[str]) -> None:
    with atomic_path(out) as tmp:
        if fmt == "jsonl":
            with open(tmp, "wb") as fh:
                for r in rows:
                    fh.write(dumps_line({c: r.get(c) for c in columns}))
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            types = {"policy_version": pa.int64(), "prompt_tokens": pa.int64(), "completion_tokens": pa.int64(),
                     "pii_masked": pa.int64()}
            schema = pa.schema([(c, types.get(c, pa.string())) for c in columns])
            table = pa.Table.from_pylist([{c: r.get(c) for c in columns} for r in rows], schema=schema)
            pq.write_table(table, tmp)


def failures_path_for(out: Path) -> Path:
    stem = out.name.rsplit(".", 1)[0]
    return out.with_name(f"{stem}.failures.jsonl")


def export_surface(store: PathLike, out: PathLike, *, fmt: Optional[str] = None, mask: bool = False,
                   pii_names: str = "rules", allow_empty: bool = False) -> ExportResult:
    """Write the surface of a recap store (module docstring); ``mask`` applies
    :func:`capaudit.recap.pii.mask_pii` to every caption (``pii_names``: rules, ner or off)."""
    out_p = Path(out)
    for p in (out_p, failures_path_for(out_p), out_p.with_name(out_p.name + ".manifest.json")):
        check_output_path(p)
    f = _format_of(out_p, fmt)
    if not StoreLayout(Path(store)).responses.is_dir():
        raise InputError("not a recap store (no responses/ folder)", path=store, field="store")
    in_progress, cut = check_store_complete(store)
    rows, failures = collect(store)
    if not rows and not allow_empty:
        raise EmptyInputError(f"no captioned image in the store ({len(failures)} failed)", path=store)
    columns = list(COLUMNS)
    spans: Dict[str, int] = {}
    if mask:
        columns.append("pii_masked")
        for r in rows:
            m = mask_pii(r["caption"] or "", names=pii_names)
            r["caption"] = m.text
            r["pii_masked"] = m.total
            for k, v in m.counts.items():
                spans[k] = spans.get(k, 0) + v
    _write_rows(rows, out_p, f, columns)
    fpath = failures_path_for(out_p)
    with atomic_path(fpath) as tmp:
        with open(tmp, "wb") as fh:
            for r in failures:
                fh.write(dumps_line(r))
    models = sorted({r["model"] for r in rows})
    policies = sorted({str(r["policy"]) for r in rows})
    res = ExportResult(out_p, len(rows), len(failures), fpath, out_p.with_name(out_p.name + ".manifest.json"),
                       models, policies, spans, in_progress, cut)
    manifest = {
        "surface": str(out_p), "format": f, "rows": len(rows), "failures": len(failures),
        "failures_file": fpath.name, "store": str(store), "models": models, "policies": policies,
        "backends": sorted({backend_kind(m) for m in models}), "pii_masked": mask,
        "pii_names": pii_names if mask else None, "pii_spans": spans, "columns": columns,
        "store_in_progress": in_progress, "cut_last_lines": cut,
        "surface_spec": {"file": str(out_p), "format": f, "caption_field": "caption", "key_field": "image_id",
                         "image_field": "image_path"},
    }
    layout = StoreLayout(Path(store))
    if layout.manifest.is_file():
        try:
            manifest["run"] = loads(layout.manifest.read_bytes())
        except ValueError:
            pass
    write_json_atomic(res.manifest_path, manifest)
    return res


def read_failures(path: PathLike) -> List[Dict[str, Any]]:
    """Rows of a ``*.failures.jsonl`` file."""
    out = []
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as exc:
                    raise InputError(f"invalid JSON ({exc})", path=path, line=lineno) from None
    return out


__all__ = ["COLUMNS", "FORMATS", "ExportResult", "backend_kind", "collect", "export_surface", "failures_path_for",
           "read_failures"]
