"""``capaudit cc12m materialize``: the manifest's images out of WebDataset tar shards.

Two passes over the shards that hold wanted images. Pass 1 finds every wanted image (recorded
shard/member, else normalised sidecar URL or key), reads its bytes and decodes them fully; a
missing image (unless ``allow_missing``) or an image that does not decode stops the run here,
before anything is written. Pass 2 writes each image atomically under ``OUT/images/`` and appends
one line per image to a journal; a file already there with the same sha256 is not rewritten.
Last, the manifest (``image``, ``sha256``, ``bytes``, ``width``, ``height``, ``status``), the
per-surface caption files (with ``--joined``) and the summary are written, and the journal goes.

Resuming: images recorded in a previous run's manifest or journal whose file still has the
recorded sha256 count as present and are not read from the shards again (nor rewritten).
Deviation from the reference (``materialize_cc12m_*``): it trusts any file already at the target
name and never decodes; here files are checked by sha256 and images by a full decode.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from capaudit.errors import InputError
from capaudit.io.atomic import StagedFiles, check_output_dir, write_bytes_atomic, write_json_atomic
from capaudit.io.manifest import sha256_of

from .image_check import CorruptImage, decoded_size, image_file_name
from .manifest import check_manifest_row
from .shard_index import ShardIndex, build_index
from .shards import ShardSample, expand_shards, read_members
from .tables import read_table, table_format, write_table_to

JOURNAL = ".materialize-journal.jsonl"
IMAGES = "images"
SUMMARY = "materialize_summary.json"
SHOWN = 3  # image ids named in an error about missing images


@dataclass
class Found:
    """One image read and decoded in pass 1."""

    shard: Path
    member: str
    sha256: str
    size: int
    width: int
    height: int


def _load_manifest(path: Path) -> Tuple[List[Dict[str, Any]], Dict[str, str]]:
    rows: List[Dict[str, Any]] = []
    where_of: Dict[str, str] = {}
    for row, where, _ in read_table(path):
        image_id, _, _ = check_manifest_row(row, where)
        if image_id in where_of:
            raise InputError(f"{where}: field 'image_id': {image_id!r} repeats {where_of[image_id]}")
        where_of[image_id] = where
        rows.append(row)
    if not rows:
        raise InputError("manifest has no rows", path=path)
    return rows, where_of


def _previous_records(out_dir: Path, manifest_name: str) -> Dict[str, Dict[str, Any]]:
    """Records of images written by an earlier run (its manifest, then its journal)."""
    records: Dict[str, Dict[str, Any]] = {}
    prev = out_dir / manifest_name
    if prev.is_file():
        for row, _, _ in read_table(prev):
            if row.get("status") == "materialized" and row.get("image_id"):
                records[str(row["image_id"])] = row
    journal = out_dir / JOURNAL
    if journal.is_file():
        with open(journal, encoding="utf-8") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:  # a line cut by an interruption: ignore it
                    continue
                if isinstance(rec, dict) and rec.get("image_id"):
                    records[str(rec["image_id"])] = rec
    return records


def _still_valid(rec: Dict[str, Any], row: Dict[str, Any], out_dir: Path, naming: str) -> bool:
    """A previous record counts when it is for the same URL (and location), the file has its
    name under the current naming, and the bytes still hash to the recorded sha256."""
    if rec.get("normalized_url") != row.get("normalized_url"):
        return False
    if row.get("shard") and (rec.get("shard"), rec.get("member")) != (row.get("shard"), row.get("member")):
        return False
    sha, image = rec.get("sha256"), rec.get("image")
    if not isinstance(sha, str) or not isinstance(image, str) or not rec.get("shard") or not rec.get("member"):
        return False
    expected = f"{IMAGES}/" + image_file_name(naming, str(row["image_id"]), sha, str(rec["shard"]), str(rec["member"]))
    path = out_dir / image
    return image == expected and path.is_file() and sha256_of(path) == sha


def materialize(manifest: str, shards: str, out: str, *, match: str = "url", naming: str = "image-id",
                allow_missing: bool = False, joined: Optional[str] = None,
                shard_index: Optional[ShardIndex] = None) -> Dict[str, Any]:
    """Run both passes and write the outputs; returns the summary (also written to OUT).
    ``shard_index``: the index of every shard of ``shards`` when the caller built it already."""
    manifest_path = Path(manifest)
    fmt = table_format(manifest_path)
    rows, where_of = _load_manifest(manifest_path)
    out_dir = check_output_dir(out)
    joined_rows = _load_joined(joined) if joined else None
    manifest_name = f"manifest.{fmt}"

    previous = _previous_records(out_dir, manifest_name) if out_dir.is_dir() else {}
    present = {str(r["image_id"]): previous[str(r["image_id"])] for r in rows
               if str(r["image_id"]) in previous and _still_valid(previous[str(r["image_id"])], r, out_dir, naming)}
    wanted = [r for r in rows if str(r["image_id"]) not in present]

    index: Optional[ShardIndex] = shard_index
    samples: Dict[str, ShardSample] = {}
    missing: List[str] = []
    if wanted:
        shard_paths = expand_shards(shards)
        names = {p.name for p in shard_paths}
        for r in wanted:
            if r.get("shard") and str(r["shard"]) not in names:
                raise InputError(f"{where_of[str(r['image_id'])]}: field 'shard': {r['shard']!r} is not among the "
                                 f"{len(shard_paths)} shard(s) of {shards}")
        if all(r.get("shard") for r in wanted):  # every location known: read only those shards
            shard_paths = [p for p in shard_paths if p.name in {str(r["shard"]) for r in wanted}]
        if index is None:
            index = build_index(shard_paths)
        for r in wanted:
            s = index.find(r, match)
            if s is None and r.get("shard"):
                raise InputError(f"{where_of[str(r['image_id'])]}: field 'member': {r['member']!r} is not an image "
                                 f"member of shard {r['shard']!r} (unknown shard member)")
            if s is None:
                missing.append(str(r["image_id"]))
            else:
                samples[str(r["image_id"])] = s
        if missing and not allow_missing:
            shown = "; ".join(f"{where_of[i]}: image {i!r}" for i in missing[:SHOWN])
            raise InputError(f"{len(missing)} of {len(rows)} requested images are in none of the {len(shard_paths)} "
                             f"shard(s) (matched by {match}): {shown}{' ...' if len(missing) > SHOWN else ''} "
                             f"(--allow-missing writes the others and counts these)")

    found, corrupt = _pass1(samples, where_of, allow_missing)
    if not present and not found:
        raise InputError(f"none of the {len(rows)} requested images was found or decodes "
                         f"({len(missing)} missing, {len(corrupt)} corrupt)", path=manifest_path)
    url_of = {str(r["image_id"]): str(r["normalized_url"]) for r in rows}
    written, files_written, kept = _pass2(found, url_of, out_dir, naming)

    out_rows = _final_rows(rows, present, found, written, missing, corrupt)
    staged = StagedFiles(out_dir)
    with staged:
        write_table_to(out_rows, staged.path(manifest_name), fmt)
        caption_counts = _write_caption_files(joined_rows, out_rows, staged) if joined_rows is not None else {}
        staged.commit()
    summary = {
        "manifest": str(manifest_path), "shards": shards, "out": str(out_dir), "match": match, "naming": naming,
        "allow_missing": allow_missing, "requested": len(rows), "already_present": len(present),
        "found_in_shards": len(found), "files_written": files_written, "files_kept_unchanged": kept,
        "materialized": len(present) + len(found), "missing": len(missing), "corrupt": len(corrupt),
        "missing_examples": missing[:SHOWN], "corrupt_examples": sorted(corrupt)[:SHOWN],
        "shard_index": index.stats() if index is not None else None,
        "caption_files": caption_counts,
        "outputs": {"manifest": manifest_name, "images": IMAGES,
                    "caption_files": {s: f"{s}.jsonl" for s in caption_counts}},
    }
    write_json_atomic(out_dir / SUMMARY, summary)
    (out_dir / JOURNAL).unlink(missing_ok=True)
    return summary


def _pass1(samples: Dict[str, ShardSample], where_of: Dict[str, str],
           allow_missing: bool) -> Tuple[Dict[str, Found], Dict[str, str]]:
    """Read and decode every wanted member once; a member that does not decode stops the run
    (``allow_missing``: counted as corrupt instead)."""
    by_shard: Dict[Path, Dict[str, List[str]]] = defaultdict(lambda: defaultdict(list))
    for image_id, s in samples.items():
        by_shard[s.shard][str(s.image_member)].append(image_id)
    found: Dict[str, Found] = {}
    corrupt: Dict[str, str] = {}
    for shard in sorted(by_shard):
        members = by_shard[shard]
        for member, data in read_members(shard, list(members)):
            ids = members[member]
            try:
                width, height = decoded_size(data)
            except CorruptImage as exc:
                if not allow_missing:
                    raise InputError(f"{shard}: member {member!r} (image {ids[0]!r}, {where_of[ids[0]]}) does not "
                                     f"decode as an image ({exc}); nothing was written "
                                     f"(--allow-missing counts it as corrupt and goes on)") from None
                corrupt.update({i: member for i in ids})
                continue
            sha = hashlib.sha256(data).hexdigest()
            for i in ids:
                found[i] = Found(shard=shard, member=member, sha256=sha, size=len(data), width=width, height=height)
    return found, corrupt


def _pass2(found: Dict[str, Found], url_of: Dict[str, str], out_dir: Path,
           naming: str) -> Tuple[Dict[str, str], int, int]:
    """Write the images (atomically, journalled); returns image id → relative path, the number of
    files written and the number already there with the same bytes (not rewritten)."""
    written: Dict[str, str] = {}
    kept = 0
    if not found:
        return written, 0, kept
    (out_dir / IMAGES).mkdir(parents=True, exist_ok=True)
    by_shard: Dict[Path, Dict[str, List[str]]] = defaultdict(lambda: defaultdict(list))
    for image_id, f in found.items():
        by_shard[f.shard][f.member].append(image_id)
    done: Set[str] = set()
    with open(out_dir / JOURNAL, "a", encoding="utf-8") as journal:
        for shard in sorted(by_shard):
            for member, data in read_members(shard, list(by_shard[shard])):
                ids = by_shard[shard][member]
                sha = hashlib.sha256(data).hexdigest()
                if sha != found[ids[0]].sha256:
                    raise InputError(f"{shard}: member {member!r} changed while this run read it (sha256 "
                                     f"{found[ids[0]].sha256[:12]}... then {sha[:12]}...)")
                for image_id in ids:
                    name = f"{IMAGES}/" + image_file_name(naming, image_id, sha, shard.name, member)
                    dest = out_dir / name
                    if name not in done:
                        if dest.is_file() and sha256_of(dest) == sha:
                            kept += 1
                        else:
                            write_bytes_atomic(dest, data)
                        done.add(name)
                    written[image_id] = name
                    f = found[image_id]
                    journal.write(json.dumps({"image_id": image_id, "normalized_url": url_of[image_id],
                                              "image": name, "sha256": sha, "bytes": f.size,
                                              "width": f.width, "height": f.height, "shard": shard.name,
                                              "member": member}) + "\n")
                    journal.flush()
            os.fsync(journal.fileno())
    return written, len(done) - kept, kept


def _final_rows(rows: List[Dict[str, Any]], present: Dict[str, Dict[str, Any]], found: Dict[str, Found],
                written: Dict[str, str], missing: List[str], corrupt: Dict[str, str]) -> List[Dict[str, Any]]:
    """The manifest rows with what materialisation learnt (input order kept)."""
    missing_set = set(missing)
    out = []
    for r in rows:
        i = str(r["image_id"])
        row = dict(r)
        if i in present:
            rec = present[i]
            row.update({k: rec.get(k) for k in ("image", "sha256", "bytes", "width", "height", "shard", "member")})
            row["status"] = "materialized"
        elif i in found:
            f = found[i]
            row.update({"image": written[i], "sha256": f.sha256, "bytes": f.size, "width": f.width,
                        "height": f.height, "shard": f.shard.name, "member": f.member, "status": "materialized"})
        elif i in corrupt:
            row.update({"image": None, "sha256": None, "status": "corrupt", "member": corrupt[i]})
        else:
            assert i in missing_set
            row.update({"image": None, "sha256": None, "status": "missing"})
        out.append(row)
    return out


def _load_joined(path: str) -> List[Dict[str, Any]]:
    """Joined rows (``capaudit cc12m bridge`` output) whose captions go into per-surface files."""
    rows = []
    for row, where, _ in read_table(path):
        image_id = row.get("image_id")
        if not isinstance(image_id, str) or not image_id.strip():
            raise InputError(f"{where}: field 'image_id': missing or blank (is this a 'cc12m bridge' table?)")
        if not any(k.startswith("caption_") for k in row):
            raise InputError(f"{where}: no 'caption_<surface>' field (is this a 'cc12m bridge' table?)")
        rows.append(row)
    if not rows:
        raise InputError("joined table has no rows", path=path)
    return rows


def _write_caption_files(joined: List[Dict[str, Any]], out_rows: List[Dict[str, Any]],
                         staged: StagedFiles) -> Dict[str, Dict[str, int]]:
    """``<surface>.jsonl`` per surface: ``caption_id`` (``<surface>:<image id>``), ``image_id``,
    ``surface``, ``caption``, ``image`` (relative to this folder: ``judges build --image-field
    image``) and ``url``, for the joined rows whose image was materialised; the rest are counted."""
    by_id = {str(r["image_id"]): r for r in out_rows}
    surfaces = [k[len("caption_"):] for k in joined[0] if k.startswith("caption_")]
    counts = {s: {"rows": 0, "without_image": 0, "without_manifest_row": 0} for s in surfaces}
    handles = {s: open(staged.path(f"{s}.jsonl"), "w", encoding="utf-8", newline="\n") for s in surfaces}
    try:
        for row in joined:
            m = by_id.get(str(row["image_id"]))
            for s in surfaces:
                caption = row.get(f"caption_{s}")
                if m is None:
                    counts[s]["without_manifest_row"] += 1
                elif m["status"] != "materialized":
                    counts[s]["without_image"] += 1
                elif isinstance(caption, str) and caption.strip():
                    handles[s].write(json.dumps({"caption_id": f"{s}:{row['image_id']}", "image_id": row["image_id"],
                                                 "surface": s, "caption": caption, "image": m["image"],
                                                 "url": m["normalized_url"]}, ensure_ascii=False) + "\n")
                    counts[s]["rows"] += 1
                else:
                    raise InputError(f"joined row of image {row['image_id']!r}: field 'caption_{s}': missing or blank")
    finally:
        for h in handles.values():
            h.close()
    return counts


__all__ = ["JOURNAL", "IMAGES", "SUMMARY", "Found", "materialize"]
