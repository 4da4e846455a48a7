"""The study database: SQLite in WAL mode, STRICT tables, append-only judgments (reference-spec §7).

* One study per file. ``schema_metadata`` holds ``schema_version`` (also ``PRAGMA user_version``)
  and ``format = capaudit-human-study``; a file from an older version is migrated step by step
  (after a backup copy beside it), a newer or foreign one is refused with a clear error.
* ``annotations``, ``annotation_events``, ``consent_events``, ``adjudications`` and
  ``adjudication_events`` are append-only: triggers abort every UPDATE and DELETE. A changed
  answer is a new annotation row with the next ``revision``.
* Items are frozen once the study is sealed (triggers), and annotations are only accepted while the
  study is open (trigger).
* Schema 2 adds ``assets`` (materialised images, :mod:`.materialize`) and ``launch_seal`` (the
  ethics-determination id and participant information file, :mod:`.launch`; one append-only row).
  Once a study carries its launch seal, its assets are frozen and no annotator can be added (triggers).
* Every write is one ``BEGIN IMMEDIATE`` transaction committed at once (``synchronous = FULL``),
  with a busy timeout and bounded retries, so several annotators (kernels, voila sessions,
  processes) can write one study at the same time without losing a judgment.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import sqlite3
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar, Union

from capaudit.errors import InputError

from .protocol import ADJUDICABLE_FIELDS, CATEGORIES, PHASE_FIELDS

PathLike = Union[str, Path]
T = TypeVar("T")

FORMAT = "capaudit-human-study"
SCHEMA_VERSION = 2
BUSY_TIMEOUT_MS = 10_000
MAX_ATTEMPTS = 40
APPEND_ONLY = ("annotations", "annotation_events", "consent_events", "adjudications", "adjudication_events")
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _in(values) -> str:
    return "(" + ", ".join("'" + v + "'" for v in values) + ")"


_C = PHASE_FIELDS["caption"]
_I = PHASE_FIELDS["image"]
_ADJ_VALUES = sorted({v for f, ph in ADJUDICABLE_FIELDS.items() for v in PHASE_FIELDS[ph][f]})

SCHEMA_V1 = f"""
CREATE TABLE schema_metadata (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

CREATE TABLE studies (
  study_id TEXT PRIMARY KEY,
  protocol TEXT NOT NULL,
  mode TEXT NOT NULL CHECK (mode IN ('real', 'simulated')),
  status TEXT NOT NULL CHECK (status IN ('created', 'sampled', 'sealed', 'open', 'closed')),
  config_json TEXT NOT NULL,
  sample_json TEXT,
  seal_digest TEXT,
  created_at TEXT NOT NULL,
  sealed_at TEXT,
  opened_at TEXT,
  closed_at TEXT
) STRICT;

CREATE TABLE items (
  item_id TEXT PRIMARY KEY CHECK (length(item_id) = 32),
  question_id TEXT NOT NULL,
  caption_id TEXT NOT NULL,
  surface TEXT NOT NULL,
  surface_group TEXT NOT NULL,
  slice TEXT NOT NULL,
  category TEXT NOT NULL CHECK (category IN {_in(CATEGORIES)}),
  unit TEXT NOT NULL,
  target TEXT NOT NULL,
  span TEXT NOT NULL,
  span_start INTEGER,
  span_end INTEGER,
  caption_window TEXT NOT NULL,
  image_path TEXT,
  image_key TEXT NOT NULL,
  item_group TEXT NOT NULL,
  asset_status TEXT NOT NULL CHECK (asset_status IN ('ok', 'missing')),
  judge_answers TEXT NOT NULL,
  stratum TEXT NOT NULL,
  weight REAL NOT NULL CHECK (weight >= 0),
  population_size INTEGER NOT NULL CHECK (population_size >= 1),
  sample_size INTEGER NOT NULL CHECK (sample_size >= 1),
  sample_probability REAL NOT NULL CHECK (sample_probability > 0 AND sample_probability <= 1),
  repeat_index INTEGER NOT NULL CHECK (repeat_index >= 0),
  repeat_of TEXT REFERENCES items(item_id),
  overlap INTEGER NOT NULL CHECK (overlap IN (0, 1)),
  sample_order INTEGER NOT NULL,
  CHECK ((repeat_index = 0) = (repeat_of IS NULL)),
  CHECK (repeat_index = 0 OR weight = 0)
) STRICT;

CREATE TABLE participants (
  participant_id TEXT PRIMARY KEY,
  pseudonym TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK (kind IN ('human', 'simulated')),
  role TEXT NOT NULL CHECK (role IN ('annotator', 'adjudicator')),
  status TEXT NOT NULL CHECK (status IN ('invited', 'active', 'withdrawn')),
  profile_json TEXT NOT NULL DEFAULT '{{}}',
  target_items INTEGER NOT NULL CHECK (target_items >= 0),
  created_at TEXT NOT NULL
) STRICT;

CREATE TABLE participant_invites (
  invite_digest TEXT PRIMARY KEY CHECK (length(invite_digest) = 64),
  participant_id TEXT NOT NULL REFERENCES participants(participant_id),
  created_at TEXT NOT NULL,
  revoked_at TEXT
) STRICT;

CREATE TABLE bearer_sessions (
  token_digest TEXT PRIMARY KEY CHECK (length(token_digest) = 64),
  participant_id TEXT NOT NULL REFERENCES participants(participant_id),
  created_at TEXT NOT NULL,
  expires_at TEXT NOT NULL
) STRICT;

CREATE TABLE consent_events (
  event_id INTEGER PRIMARY KEY,
  participant_id TEXT NOT NULL REFERENCES participants(participant_id),
  consent TEXT NOT NULL CHECK (consent IN ('given', 'withdrawn')),
  consent_version TEXT NOT NULL,
  created_at TEXT NOT NULL
) STRICT;

CREATE TABLE assignments (
  participant_id TEXT NOT NULL REFERENCES participants(participant_id),
  item_id TEXT NOT NULL REFERENCES items(item_id),
  phase TEXT NOT NULL CHECK (phase IN ('caption', 'image', 'pair')),
  position INTEGER NOT NULL CHECK (position >= 0),
  tier INTEGER NOT NULL,
  order_key TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (participant_id, item_id, phase),
  UNIQUE (participant_id, phase, position)
) STRICT;

CREATE TABLE annotations (
  annotation_id INTEGER PRIMARY KEY,
  participant_id TEXT NOT NULL REFERENCES participants(participant_id),
  item_id TEXT NOT NULL REFERENCES items(item_id),
  phase TEXT NOT NULL CHECK (phase IN ('caption', 'image', 'pair')),
  revision INTEGER NOT NULL CHECK (revision >= 1),
  caption_licensed TEXT CHECK (caption_licensed IN {_in(_C['caption_licensed'])}),
  atomic_visual_claim TEXT CHECK (atomic_visual_claim IN {_in(_C['atomic_visual_claim'])}),
  category_check TEXT CHECK (category_check IN {_in(_C['category_check'])}),
  corrected_category TEXT CHECK (corrected_category IN {_in(CATEGORIES)}),
  image_support TEXT CHECK (image_support IN {_in(_I['image_support'])}),
  salient_coverage INTEGER CHECK (salient_coverage BETWEEN 1 AND 5),
  control_usefulness INTEGER CHECK (control_usefulness BETWEEN 1 AND 5),
  image_unavailable INTEGER NOT NULL CHECK (image_unavailable IN (0, 1)),
  confidence INTEGER CHECK (confidence BETWEEN 1 AND 5),
  reason_tags TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(reason_tags) AND json_type(reason_tags) = 'array'),
  note TEXT CHECK (note IS NULL OR length(note) <= 500),
  elapsed_ms INTEGER CHECK (elapsed_ms IS NULL OR elapsed_ms >= 0),
  simulated INTEGER NOT NULL CHECK (simulated IN (0, 1)),
  created_at TEXT NOT NULL,
  UNIQUE (participant_id, item_id, phase, revision),
  CHECK (phase <> 'caption' OR (caption_licensed IS NOT NULL AND atomic_visual_claim IS NOT NULL
         AND category_check IS NOT NULL AND image_support IS NULL AND salient_coverage IS NULL
         AND control_usefulness IS NULL AND image_unavailable = 0
         AND ((category_check = 'incorrect') = (corrected_category IS NOT NULL)))),
  CHECK (phase <> 'image' OR (image_support IS NOT NULL AND caption_licensed IS NULL
         AND atomic_visual_claim IS NULL AND category_check IS NULL AND corrected_category IS NULL
         AND salient_coverage IS NULL AND control_usefulness IS NULL
         AND (image_unavailable = 1) = (image_support = 'image_unavailable'))),
  CHECK (phase <> 'pair' OR (caption_licensed IS NULL AND atomic_visual_claim IS NULL
         AND category_check IS NULL AND corrected_category IS NULL AND image_support IS NULL
         AND ((image_unavailable = 1 AND salient_coverage IS NULL AND control_usefulness IS NULL)
           OR (image_unavailable = 0 AND salient_coverage IS NOT NULL AND control_usefulness IS NOT NULL))))
) STRICT;

CREATE TABLE annotation_events (
  event_id INTEGER PRIMARY KEY,
  annotation_id INTEGER REFERENCES annotations(annotation_id),
  participant_id TEXT NOT NULL REFERENCES participants(participant_id),
  item_id TEXT,
  phase TEXT,
  event TEXT NOT NULL CHECK (event IN ('saved', 'revised', 'duplicate_ignored', 'login', 'consent')),
  created_at TEXT NOT NULL
) STRICT;

CREATE TABLE adjudications (
  adjudication_id INTEGER PRIMARY KEY,
  item_id TEXT NOT NULL REFERENCES items(item_id),
  phase TEXT NOT NULL CHECK (phase IN ('caption', 'image')),
  field TEXT NOT NULL CHECK (field IN {_in(ADJUDICABLE_FIELDS)}),
  value TEXT NOT NULL CHECK (value IN {_in(_ADJ_VALUES)}),
  adjudicator TEXT NOT NULL,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  simulated INTEGER NOT NULL CHECK (simulated IN (0, 1)),
  created_at TEXT NOT NULL,
  UNIQUE (item_id, phase, field, revision)
) STRICT;

CREATE TABLE adjudication_events (
  event_id INTEGER PRIMARY KEY,
  adjudication_id INTEGER NOT NULL REFERENCES adjudications(adjudication_id),
  packet_sha256 TEXT NOT NULL CHECK (length(packet_sha256) = 64),
  response_sha256 TEXT NOT NULL CHECK (length(response_sha256) = 64),
  created_at TEXT NOT NULL
) STRICT;

CREATE INDEX annotations_by_item ON annotations(item_id, phase);
CREATE INDEX annotations_by_participant ON annotations(participant_id, phase);
CREATE INDEX assignments_by_item ON assignments(item_id);

CREATE TRIGGER items_frozen_insert BEFORE INSERT ON items
  WHEN (SELECT status FROM studies) NOT IN ('created', 'sampled')
  BEGIN SELECT RAISE(ABORT, 'study is sealed: items are frozen'); END;
CREATE TRIGGER items_frozen_update BEFORE UPDATE ON items
  WHEN (SELECT status FROM studies) NOT IN ('created', 'sampled')
  BEGIN SELECT RAISE(ABORT, 'study is sealed: items are frozen'); END;
CREATE TRIGGER items_frozen_delete BEFORE DELETE ON items
  WHEN (SELECT status FROM studies) NOT IN ('created', 'sampled')
  BEGIN SELECT RAISE(ABORT, 'study is sealed: items are frozen'); END;
CREATE TRIGGER annotations_need_open_study BEFORE INSERT ON annotations
  WHEN (SELECT status FROM studies) <> 'open'
  BEGIN SELECT RAISE(ABORT, 'study is not open for annotation'); END;
""" + "".join(
    f"""
CREATE TRIGGER {t}_no_update BEFORE UPDATE ON {t}
  BEGIN SELECT RAISE(ABORT, '{t} is append-only'); END;
CREATE TRIGGER {t}_no_delete BEFORE DELETE ON {t}
  BEGIN SELECT RAISE(ABORT, '{t} is append-only'); END;
"""
    for t in APPEND_ONLY
)

SCHEMA_V2 = """
CREATE TABLE assets (
  image_key TEXT PRIMARY KEY,
  file TEXT NOT NULL,
  sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
  source_path TEXT NOT NULL,
  source_sha256 TEXT NOT NULL CHECK (length(source_sha256) = 64),
  width INTEGER NOT NULL CHECK (width >= 1),
  height INTEGER NOT NULL CHECK (height >= 1),
  bytes INTEGER NOT NULL CHECK (bytes >= 1),
  created_at TEXT NOT NULL
) STRICT;

CREATE TABLE launch_seal (
  seal_id INTEGER PRIMARY KEY CHECK (seal_id = 1),
  ethics_id TEXT NOT NULL CHECK (length(ethics_id) BETWEEN 1 AND 200),
  participant_info_file TEXT NOT NULL,
  participant_info_name TEXT NOT NULL,
  participant_info_sha256 TEXT NOT NULL CHECK (length(participant_info_sha256) = 64),
  validation_sha256 TEXT NOT NULL CHECK (length(validation_sha256) = 64),
  design_sha256 TEXT NOT NULL CHECK (length(design_sha256) = 64),
  sealed_at TEXT NOT NULL
) STRICT;

CREATE TRIGGER launch_seal_no_update BEFORE UPDATE ON launch_seal
  BEGIN SELECT RAISE(ABORT, 'launch_seal is append-only'); END;
CREATE TRIGGER launch_seal_no_delete BEFORE DELETE ON launch_seal
  BEGIN SELECT RAISE(ABORT, 'launch_seal is append-only'); END;
CREATE TRIGGER launch_seal_needs_items_sealed BEFORE INSERT ON launch_seal
  WHEN (SELECT status FROM studies) IN ('created', 'sampled')
  BEGIN SELECT RAISE(ABORT, 'seal the items before the launch seal'); END;
CREATE TRIGGER assets_frozen_insert BEFORE INSERT ON assets WHEN EXISTS (SELECT 1 FROM launch_seal)
  BEGIN SELECT RAISE(ABORT, 'study is sealed for launch: assets are frozen'); END;
CREATE TRIGGER assets_frozen_update BEFORE UPDATE ON assets WHEN EXISTS (SELECT 1 FROM launch_seal)
  BEGIN SELECT RAISE(ABORT, 'study is sealed for launch: assets are frozen'); END;
CREATE TRIGGER assets_frozen_delete BEFORE DELETE ON assets WHEN EXISTS (SELECT 1 FROM launch_seal)
  BEGIN SELECT RAISE(ABORT, 'study is sealed for launch: assets are frozen'); END;
CREATE TRIGGER annotators_frozen BEFORE INSERT ON participants
  WHEN NEW.role = 'annotator' AND EXISTS (SELECT 1 FROM launch_seal)
  BEGIN SELECT RAISE(ABORT, 'study is sealed for launch: no annotator can be added'); END;
CREATE TRIGGER assignments_frozen_update BEFORE UPDATE ON assignments WHEN EXISTS (SELECT 1 FROM launch_seal)
  BEGIN SELECT RAISE(ABORT, 'study is sealed for launch: assignments are frozen'); END;
CREATE TRIGGER assignments_frozen_delete BEFORE DELETE ON assignments WHEN EXISTS (SELECT 1 FROM launch_seal)
  BEGIN SELECT RAISE(ABORT, 'study is sealed for launch: assignments are frozen'); END;
"""


def _v1_to_v2(conn: sqlite3.Connection) -> None:
    """Schema 2: materialised image assets and the launch seal (module docstring)."""
    for stmt in _split_sql(SCHEMA_V2):
        conn.execute(stmt)


#: ``MIGRATIONS[v]`` upgrades a database from schema version ``v`` to ``v + 1`` (in one transaction).
MIGRATIONS: Dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2}


def utcnow() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _is_busy(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


class SchemaVersionError(InputError):
    """A study database from another schema version that cannot be migrated."""


class StudyStore:
    """A connection to one study database (see the module docstring)."""

    def __init__(self, path: PathLike, *, create: bool = False, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
                 read_only: bool = False):
        self.path = Path(path).resolve()
        self.busy_timeout_ms = busy_timeout_ms
        self.read_only = read_only
        if self.path.is_dir():
            raise InputError("is a directory, not a study database", path=self.path)
        exists = self.path.exists() and self.path.stat().st_size > 0
        if not exists and not create:
            raise InputError("no study database here; create one with `capaudit human init`", path=self.path)
        if exists:
            with open(self.path, "rb") as fh:
                if fh.read(16) != _SQLITE_MAGIC:
                    raise InputError("not a SQLite database (not a capaudit study)", path=self.path)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # read-only: SQLite itself refuses every write (mode=ro), and query_only backs it up
        target = f"{self.path.as_uri()}?mode=ro" if read_only else str(self.path)
        self.conn = sqlite3.connect(target, uri=read_only, timeout=busy_timeout_ms / 1000.0, isolation_level=None,
                                    check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        try:
            if exists:  # a foreign or damaged file is refused before anything (WAL mode) is written to it
                self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                version = self.schema_version()
            if read_only:
                self.conn.execute("PRAGMA query_only = ON")
                if version != SCHEMA_VERSION:
                    raise SchemaVersionError(f"study database has schema version {version}; open it read-write once "
                                             f"to migrate it to {SCHEMA_VERSION}", path=self.path,
                                             field="schema_metadata.schema_version")
                return
            self._pragmas()
            if exists:
                self._check_version()
            else:
                self.write(self._create)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise InputError(f"not a readable study database ({exc})", path=self.path) from None
        except BaseException:
            self.close()
            raise

    # -- connection -------------------------------------------------------------------------------
    def _pragmas(self) -> None:
        c = self.conn
        c.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        for attempt in range(MAX_ATTEMPTS):
            try:
                mode = c.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt == MAX_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        if str(mode).lower() != "wal":
            raise InputError(f"could not switch the study database to WAL mode (got {mode!r})", path=self.path)
        c.execute("PRAGMA synchronous = FULL")
        c.execute("PRAGMA foreign_keys = ON")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()

    def __enter__(self) -> "StudyStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions -------------------------------------------------------------------------------
    def write(self, fn: Callable[[sqlite3.Connection], T], attempts: int = MAX_ATTEMPTS) -> T:
        """Run ``fn(conn)`` in one ``BEGIN IMMEDIATE`` transaction and commit; retry while busy."""
        if self.read_only:
            raise InputError("the study database is open read-only", path=self.path)
        delay = 0.01
        for attempt in range(attempts):
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if _is_busy(exc) and attempt < attempts - 1:
                    time.sleep(delay * (1 + random.random()))
                    delay = min(delay * 2, 0.5)
                    continue
                raise
            try:
                out = fn(self.conn)
                self.conn.execute("COMMIT")
                return out
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
                if _is_busy(exc) and attempt < attempts - 1:
                    time.sleep(delay * (1 + random.random()))
                    delay = min(delay * 2, 0.5)
                    continue
                raise
        raise InputError("the study database stayed locked; try again", path=self.path)  # pragma: no cover

    def read(self, sql: str, params: Tuple[Any, ...] = ()) -> List[sqlite3.Row]:
        for attempt in range(MAX_ATTEMPTS):
            try:
                return self.conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or attempt == MAX_ATTEMPTS - 1:
                    raise
                time.sleep(0.02 * (attempt + 1))
        return []  # pragma: no cover

    def one(self, sql: str, params: Tuple[Any, ...] = ()) -> Optional[sqlite3.Row]:
        rows = self.read(sql, params)
        return rows[0] if rows else None

    # -- schema -------------------------------------------------------------------------------------
    def _create(self, conn: sqlite3.Connection) -> None:
        for stmt in _split_sql(SCHEMA_V1):
            conn.execute(stmt)
        conn.execute("INSERT INTO schema_metadata (key, value) VALUES ('format', ?), ('schema_version', '1'), "
                     "('created_at', ?), ('export_salt', ?)", (FORMAT, utcnow(), secrets.token_hex(16)))
        conn.execute("PRAGMA user_version = 1")
        v = 1
        while v < SCHEMA_VERSION:
            MIGRATIONS[v](conn)
            v += 1
            conn.execute("UPDATE schema_metadata SET value = ? WHERE key = 'schema_version'", (str(v),))
            conn.execute(f"PRAGMA user_version = {v}")

    def schema_version(self) -> int:
        tables = {r[0] for r in self.read("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "schema_metadata" not in tables:
            raise SchemaVersionError("not a capaudit human-study database (no schema_metadata table)", path=self.path)
        meta = {r["key"]: r["value"] for r in self.read("SELECT key, value FROM schema_metadata")}
        if meta.get("format") != FORMAT:
            raise SchemaVersionError(f"not a capaudit human-study database (format {meta.get('format')!r}, "
                                     f"expected {FORMAT!r})", path=self.path, field="schema_metadata.format")
        try:
            return int(meta["schema_version"])
        except (KeyError, ValueError):
            raise SchemaVersionError("schema_metadata has no valid schema_version", path=self.path,
                                     field="schema_metadata.schema_version") from None

    def _check_version(self) -> None:
        v = self.schema_version()
        if v == SCHEMA_VERSION:
            return
        if v > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"study database has schema version {v}, newer than this capaudit supports ({SCHEMA_VERSION}); "
                "upgrade capaudit to open it", path=self.path, field="schema_metadata.schema_version")
        missing = [s for s in range(v, SCHEMA_VERSION) if s not in MIGRATIONS]
        if missing:
            raise SchemaVersionError(
                f"study database has schema version {v}; this capaudit uses {SCHEMA_VERSION} and has no migration "
                f"from version {missing[0]}", path=self.path, field="schema_metadata.schema_version")
        backup = self.path.with_name(f"{self.path.name}.v{v}.bak")
        self.backup(backup)

        def migrate(conn: sqlite3.Connection) -> None:
            cur = int(conn.execute("SELECT value FROM schema_metadata WHERE key = 'schema_version'").fetchone()[0])
            while cur < SCHEMA_VERSION:
                MIGRATIONS[cur](conn)
                cur += 1
                conn.execute("UPDATE schema_metadata SET value = ? WHERE key = 'schema_version'", (str(cur),))
                conn.execute(f"PRAGMA user_version = {cur}")

        self.write(migrate)

    def meta(self, key: str) -> Optional[str]:
        row = self.one("SELECT value FROM schema_metadata WHERE key = ?", (key,))
        return row["value"] if row else None

    def backup(self, dest: PathLike) -> Path:
        """A consistent copy of the database (SQLite online backup), written atomically."""
        from capaudit.io.atomic import atomic_path

        dest = Path(dest)
        if dest.resolve() == self.path:
            raise InputError("backup target is the study database itself", path=dest)
        with atomic_path(dest) as tmp:
            tmp.unlink(missing_ok=True)
            target = sqlite3.connect(str(tmp))
            try:
                self.conn.backup(target)
                target.execute("PRAGMA journal_mode = DELETE")
            finally:
                target.close()
        return dest


def _split_sql(script: str) -> Iterator[str]:
    """Statements of a schema script (triggers keep their ``BEGIN … END;`` bodies)."""
    buf: List[str] = []
    for line in script.splitlines():
        if not line.strip():
            continue
        buf.append(line)
        stmt = "\n".join(buf)
        if stmt.rstrip().endswith(";") and sqlite3.complete_statement(stmt):
            yield stmt
            buf = []
    if "".join(buf).strip():
        raise ValueError("incomplete SQL statement in schema")  # pragma: no cover


__all__ = ["APPEND_ONLY", "FORMAT", "MIGRATIONS", "SCHEMA_VERSION", "SchemaVersionError", "StudyStore", "utcnow"]
