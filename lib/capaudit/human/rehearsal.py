"""Rehearsal (``capaudit human participant-test``): run the annotation flow as a test participant
whose answers are discarded.

A rehearsal never writes to the study database: its items (with
the image each would show, the materialised copy where there is one) and frozen config are copied
into a separate database, ``<study folder>/rehearsal/<db stem>.rehearsal.sqlite``, rebuilt afresh by
every run (the previous rehearsal's answers are dropped). That copy is labelled everywhere: its
study id ends in ``--rehearsal``, ``schema_metadata.rehearsal_of`` names the study, its one
participant is ``REHEARSAL001``, and the notebook, ``status`` and the dashboard say "rehearsal";
``export`` refuses it. It is sealed, assigned and opened, so the test participant sees the study's
real screens, batches and blinding — and no agreement, export or dashboard number of the study
can include a rehearsal answer, because none is ever stored in the study.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from capaudit.errors import EmptyInputError, InputError

from .study import Study, study_folder

PathLike = Union[str, Path]
REHEARSAL_PREFIX = "REHEARSAL"
REHEARSAL_SUFFIX = "--rehearsal"


@dataclass(frozen=True)
class Rehearsal:
    """A fresh rehearsal copy: its database, the test participant and their invite code."""

    db: Path
    study_id: str
    pseudonym: str
    invite_code: str
    items: int
    assigned_items: int


def rehearsal_path(study_db: PathLike) -> Path:
    p = Path(study_db).resolve()
    return study_folder(p) / "rehearsal" / f"{p.stem}.rehearsal.sqlite"


def _remove_db(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)


def build_rehearsal(study_db: PathLike) -> Rehearsal:
    """A fresh rehearsal copy of the study at ``study_db`` (module docstring)."""
    with Study.load(study_db) as main:  # read only (a mode=ro open of a WAL database would leave -shm files)
        if main.rehearsal_of is not None:
            raise InputError(f"this is already a rehearsal copy (of study {main.rehearsal_of!r})", path=main.path)
        items = main.items()
        if not items:
            raise EmptyInputError("the study has no items yet: run `capaudit human sample` first", path=main.path)
        assets = main.assets()
        rows = []
        for it in sorted(items, key=lambda r: r["repeat_index"]):  # originals before their repeats
            row = dict(it)
            row["image_path"] = main.image_file(it, assets)
            rows.append(row)
        conf = dataclasses.replace(main.config, study_id=main.study_id[:100 - len(REHEARSAL_SUFFIX)] + REHEARSAL_SUFFIX,
                                   namespace=main.config.item_namespace, participants=1)
        sample_json = main.store.one("SELECT sample_json FROM studies")["sample_json"]
        source_id, source_path = main.study_id, str(main.path)
    target = rehearsal_path(study_db)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        st = Study.create(tmp, conf)
        try:
            cols = list(rows[0])

            def tx(conn) -> None:
                conn.execute("INSERT INTO schema_metadata (key, value) VALUES ('rehearsal_of', ?), "
                             "('rehearsal_source', ?)", (source_id, source_path))
                conn.executemany(f"INSERT INTO items ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                                 [tuple(r[c] for c in cols) for r in rows])
                conn.execute("UPDATE studies SET status = 'sampled', sample_json = ?", (sample_json,))

            st.store.write(tx)
            st.seal()
            invite = st.invite(1, kind="human", prefix=REHEARSAL_PREFIX)[0]
            assigned = st.assign()
            st.open()
        finally:
            st.close()
        _remove_db(target)
        os.replace(tmp, target)
    finally:
        _remove_db(tmp)
    return Rehearsal(db=target, study_id=conf.study_id, pseudonym=invite.pseudonym, invite_code=invite.code,
                     items=len(rows), assigned_items=sum(assigned["items_per_participant"].values()))


__all__ = ["REHEARSAL_PREFIX", "REHEARSAL_SUFFIX", "Rehearsal", "build_rehearsal", "rehearsal_path"]
