"""The launch seal (``capaudit human seal --ethics-id ID --participant-info FILE``) and the launch gate.

Lifecycle: ``seal`` (items frozen) → ``invite`` → ``assign`` → ``materialize`` → ``validate`` →
``seal --ethics-id … --participant-info …`` → ``open`` → ``serve``. The launch seal is refused unless
the study validates now (:func:`~.validate.validate_study`, run afresh); it copies the participant
information file into the study folder (``participant_info/<sha256><suffix>``), writes the
validation report (also kept as ``validation.sealed.json``, never rewritten), records the ethics-determination id, the file's name and SHA-256, the report's
SHA-256 and the design digest in the one append-only ``launch_seal`` row, and mirrors that row in
``<study folder>/manifest.json``. From then on the store's triggers (:mod:`.store`) freeze the
assets, refuse new annotators and any change to an assignment, and :meth:`Study.assign` only adds
extension batches: the design is the one validated.

:func:`require_launchable`: ``capaudit human serve`` refuses a real study without its launch seal
unless told otherwise (``--allow-unsealed``); a simulated study (tests, the demo) and a rehearsal
need none.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, Union

from capaudit.errors import InputError
from capaudit.io.atomic import atomic_path, write_json_atomic
from capaudit.io.manifest import sha256_of

from .store import SCHEMA_VERSION, utcnow
from .study import Study
from .validate import VALIDATION_JSON, design_digest, validate_study

PathLike = Union[str, Path]
MANIFEST_JSON = "manifest.json"
#: the validation report the launch seal was given (``validation.json`` is the latest ``validate`` run's)
SEALED_VALIDATION_JSON = "validation.sealed.json"
PARTICIPANT_INFO_DIR = "participant_info"
MAX_ETHICS_ID = 200


def check_ethics_id(text: str) -> str:
    """The ethics-determination id: 1-200 printable characters on one line (spaces around trimmed)."""
    value = (text or "").strip()
    if not value or len(value) > MAX_ETHICS_ID or not value.isprintable():
        raise InputError(f"give the ethics-determination id: 1-{MAX_ETHICS_ID} printable characters on one line",
                         field="--ethics-id")
    return value


def check_participant_info(path: PathLike) -> Path:
    """The participant information file: an existing, readable, non-empty file."""
    p = Path(path)
    if not p.exists():
        raise InputError("participant information file not found", path=p)
    if not p.is_file():
        raise InputError("participant information file is not a file", path=p)
    try:
        with open(p, "rb") as fh:
            if not fh.read(1):
                raise InputError("participant information file is empty", path=p)
    except OSError as exc:
        raise InputError(f"participant information file cannot be read ({exc.strerror})", path=p) from None
    return p


def seal_for_launch(study: Study, ethics_id: str, participant_info: PathLike) -> Dict[str, Any]:
    """Seal ``study`` for launch (module docstring); returns the manifest written."""
    ethics = check_ethics_id(ethics_id)
    info = check_participant_info(participant_info)
    if study.rehearsal_of is not None:
        raise InputError("a rehearsal copy is never sealed for launch", path=study.path)
    old = study.launch_seal()
    if old is not None:
        raise InputError(f"study {study.study_id!r} is already sealed for launch (ethics id {old['ethics_id']!r}, "
                         f"{old['sealed_at']})", path=study.path)
    if study.status in ("created", "sampled"):
        raise InputError(f"study {study.study_id!r} is {study.status}: seal its items first (`capaudit human seal`), "
                         "then invite, assign, materialize and validate", path=study.path)
    if study.status != "sealed":
        raise InputError(f"study {study.study_id!r} is {study.status}: the launch seal comes before it opens",
                         path=study.path)
    rep = validate_study(study)
    if not rep.ok:
        classes = [c for c in rep.problems if rep.problems[c]]
        n = sum(len(rep.problems[c]) for c in classes)
        raise InputError(f"refusing to seal: validation finds {n} problems ({', '.join(classes)}); run "
                         "`capaudit human validate` for details", path=study.path)
    folder = study.folder
    info_sha = sha256_of(info)
    rel = f"{PARTICIPANT_INFO_DIR}/{info_sha}{info.suffix.lower()}"
    target = folder / rel
    if not (target.is_file() and sha256_of(target) == info_sha):
        with atomic_path(target) as tmp:
            shutil.copyfile(info, tmp)
    write_json_atomic(folder / VALIDATION_JSON, rep.to_dict(), indent=2)
    report = write_json_atomic(folder / SEALED_VALIDATION_JSON, rep.to_dict(), indent=2)
    report_sha = sha256_of(report)
    now = utcnow()

    def tx(conn: Any) -> None:
        if design_digest(study) != rep.design_sha256:
            raise InputError("the study changed while it was validated; run the seal again", path=study.path)
        conn.execute(
            "INSERT INTO launch_seal (seal_id, ethics_id, participant_info_file, participant_info_name, "
            "participant_info_sha256, validation_sha256, design_sha256, sealed_at) VALUES (1, ?, ?, ?, ?, ?, ?, ?)",
            (ethics, rel, info.name, info_sha, report_sha, rep.design_sha256, now))

    study.store.write(tx)
    seal_digest = study.store.one("SELECT seal_digest FROM studies")["seal_digest"]
    manifest = {
        "study_id": study.study_id, "mode": study.mode, "protocol": study.config.protocol,
        "schema_version": SCHEMA_VERSION, "sealed_at": now, "ethics_id": ethics,
        "participant_info": {"file": rel, "name": info.name, "sha256": info_sha},
        "validation": {"file": SEALED_VALIDATION_JSON, "sha256": report_sha, "validated_at": rep.validated_at},
        "design_sha256": rep.design_sha256, "items_sha256": seal_digest,
        "items": rep.checked.get("items"), "images": rep.checked.get("images"),
        "annotators": rep.checked.get("annotators"), "assignments": rep.checked.get("assignments"),
    }
    write_json_atomic(folder / MANIFEST_JSON, manifest, indent=2)
    return manifest


def read_manifest(study: Study) -> Dict[str, Any]:
    """``<study folder>/manifest.json`` (``{}`` when absent)."""
    p = study.folder / MANIFEST_JSON
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}


def require_launchable(study: Study, allow_unsealed: bool = False) -> None:
    """Refuse to serve real participants a study without its launch seal (module docstring)."""
    if study.mode != "real" or study.rehearsal_of is not None or allow_unsealed:
        return
    if study.launch_seal() is None:
        raise InputError(f"study {study.study_id!r} is not sealed for launch: run `capaudit human validate`, then "
                         "`capaudit human seal --ethics-id ID --participant-info FILE` (or pass --allow-unsealed)",
                         path=study.path)


__all__ = ["MANIFEST_JSON", "PARTICIPANT_INFO_DIR", "SEALED_VALIDATION_JSON", "check_ethics_id", "check_participant_info", "read_manifest",
           "require_launchable", "seal_for_launch"]
