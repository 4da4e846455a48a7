"""A human-verification study: lifecycle and the annotator API (reference-spec §7).

Lifecycle: ``init`` (config frozen into a new database) → ``sample`` (may be repeated until sealed)
→ ``seal`` (items frozen; a sealed study cannot be re-sampled) → ``invite`` (pseudonymous
participants, one-time-shown invite codes stored as SHA-256 digests) → ``assign`` (two labels per
item, overlap items first, hidden repeats to a holder of the original) → ``open`` → annotation →
``close``. :class:`AnnotatorSession` is the only way judgments are written, by people (through the
widgets) and by the simulated annotators alike.

Phases are worked in batches of ``batch_size`` items (0: one batch of every item): a participant's
queue is, batch by batch, the batch's caption phases, then its image phases (in another order), then
its whole-pair steps; an item's image phase is only accepted after that participant's caption phase,
its pair step only after its image phase, so blinding holds per item.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from capaudit.errors import EmptyInputError, InputError

from .protocol import (
    ADJUDICABLE_FIELDS, PHASE_FIELDS, PHASES, StudyConfig, validate_judgment,
    validate_profile,
)
from .claim_display import shown_claim
from .sampling import SampleReport, file_digest, read_judged_claims, resolve_image, sample_items
from .store import StudyStore, utcnow

PathLike = Union[str, Path]
_CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
_VALUE_FIELDS = (
    "caption_licensed", "atomic_visual_claim", "category_check", "corrected_category", "image_support",
    "salient_coverage", "control_usefulness", "image_unavailable", "confidence", "reason_tags", "note",
)


class AccessError(InputError):
    """A participant who is not invited, a withdrawn participant, an expired session, an item not assigned."""


class StaleJudgmentError(InputError):
    """A judgment made on a screen that another window has since answered differently."""


def study_folder(db: PathLike) -> Path:
    """The study's own folder beside its database, ``<db stem>_files/``: materialised images, the
    participant information file, the validation report, the launch manifest and rehearsals."""
    p = Path(db).resolve()
    return p.parent / f"{p.stem}_files"


def resolve_study_db(path: PathLike) -> Path:
    """``path`` itself, or for a folder: the database of a study folder (``<stem>_files/`` beside
    ``<stem>.sqlite``), else the folder's one ``*.sqlite`` file; any other folder is returned as given
    (and refused by the store)."""
    p = Path(path)
    if not p.is_dir():
        return p
    if p.name.endswith("_files"):
        db = p.parent / f"{p.name[:-len('_files')]}.sqlite"
        if db.is_file():
            return db
    found = sorted(q for q in p.glob("*.sqlite") if q.is_file())
    return found[0] if len(found) == 1 else p


def digest(secret: str) -> str:
    """SHA-256 hex of an invite code or session token (normalized: no spaces or dashes, upper case)."""
    norm = "".join(secret.split()).replace("-", "").upper()
    return hashlib.sha256(norm.encode("utf-8")).hexdigest()


def new_invite_code() -> str:
    """A random 16-character invite code in groups of four (80 bits)."""
    raw = "".join(secrets.choice(_CODE_ALPHABET) for _ in range(16))
    return "-".join(raw[i:i + 4] for i in range(0, 16, 4))


@dataclass(frozen=True)
class Invite:
    """An invitation: the code is shown once and never stored."""

    pseudonym: str
    code: str
    participant_id: str
    kind: str


@dataclass(frozen=True)
class Task:
    """One (item, phase) of a participant's queue.

    ``position`` counts within the phase over the whole queue, ``index`` within the queue; ``batch``
    is the 0-based batch, ``in_batch`` the position within the batch's phase of ``batch_items`` items.
    """

    item_id: str
    phase: str
    position: int
    index: int
    batch: int = 0
    in_batch: int = 0
    batch_items: int = 0


@dataclass(frozen=True)
class ItemView:
    """What an annotator sees of an item in one phase (no surface, no judge answers)."""

    item_id: str
    phase: str
    claim: str
    category: Optional[str]
    caption_window: Optional[str]
    span_offsets: Optional[Tuple[int, int]]
    image_path: Optional[str]
    image_available: bool


@dataclass(frozen=True)
class Saved:
    """The latest revision of a participant's judgment of an (item, phase)."""

    annotation_id: int
    revision: int
    values: Dict[str, Any]
    elapsed_ms: Optional[int]


@dataclass(frozen=True)
class RecordResult:
    annotation_id: int
    revision: int
    duplicate: bool


@dataclass(frozen=True)
class Progress:
    """Judgments done / assigned: overall, per phase and per batch (``by_batch[k]``)."""

    done: int
    assigned: int
    by_phase: Dict[str, Tuple[int, int]]
    mean_seconds: Optional[float]
    by_batch: Tuple[Tuple[int, int], ...] = ()


def _values_of(row: Mapping[str, Any]) -> Dict[str, Any]:
    out = {k: row[k] for k in _VALUE_FIELDS}
    out["reason_tags"] = json.loads(out["reason_tags"]) if isinstance(out["reason_tags"], str) else list(out["reason_tags"] or [])
    return out


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Study:
    """One study database (one study per file)."""

    def __init__(self, store: StudyStore):
        self.store = store
        row = store.one("SELECT * FROM studies")
        if row is None:
            raise InputError("study database has no study row (was `capaudit human init` interrupted?)", path=store.path)
        self.study_id: str = row["study_id"]
        stored = json.loads(row["config_json"])
        stored.setdefault("batch_size", 0)  # frozen before batches existed: keep its phase-block order
        self.config = StudyConfig.from_mapping(stored, source=str(store.path))

    # -- opening -------------------------------------------------------------------------------------
    @classmethod
    def create(cls, db: PathLike, config: StudyConfig) -> "Study":
        """A new study database at ``db`` (refused if one exists)."""
        path = Path(db)
        if path.exists() and path.stat().st_size > 0:
            raise InputError("a study database already exists here; use another path or remove it", path=path)
        store = StudyStore(path, create=True)

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO studies (study_id, protocol, mode, status, config_json, created_at) "
                "VALUES (?, ?, ?, 'created', ?, ?)",
                (config.study_id, config.protocol, config.mode, json.dumps(config.to_dict(), sort_keys=True), utcnow()),
            )

        store.write(tx)
        return cls(store)

    @classmethod
    def load(cls, db: PathLike, read_only: bool = False) -> "Study":
        """Open an existing study database (schema checked, migrated when possible; ``read_only``:
        nothing can be written, e.g. the study lead's dashboard)."""
        return cls(StudyStore(db, read_only=read_only))

    @property
    def path(self) -> Path:
        return self.store.path

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> "Study":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def status(self) -> str:
        return self.store.one("SELECT status FROM studies")["status"]

    @property
    def mode(self) -> str:
        return self.config.mode

    @property
    def folder(self) -> Path:
        """:func:`study_folder` of this study (not created here)."""
        return study_folder(self.path)

    @property
    def rehearsal_of(self) -> Optional[str]:
        """The study id this database rehearses (``capaudit human participant-test``), else ``None``."""
        return self.store.meta("rehearsal_of")

    def launch_seal(self) -> Optional[Dict[str, Any]]:
        """The launch seal (ethics id, participant information file, digests), or ``None`` (:mod:`.launch`)."""
        row = self.store.one("SELECT * FROM launch_seal")
        return dict(row) if row is not None else None

    def assets(self) -> Dict[str, sqlite3.Row]:
        """Materialised images by image key (:mod:`.materialize`)."""
        return {r["image_key"]: r for r in self.store.read("SELECT * FROM assets")}

    def image_file(self, item: Mapping[str, Any], assets: Optional[Mapping[str, Any]] = None) -> Optional[str]:
        """The image annotators see for ``item``: its materialised copy in the study folder when one is
        recorded, else the source path found at sampling."""
        if assets is None:
            row = self.store.one("SELECT file FROM assets WHERE image_key = ?", (item["image_key"],))
        else:
            row = assets.get(item["image_key"])
        if row is not None:
            return str(self.folder / row["file"])
        return item["image_path"]

    def item_view(self, item_id: str, phase: str) -> "ItemView":
        """The blinded view of an item: caption phase without the image, image phase without the caption."""
        it = self.item(item_id)
        claim = shown_claim(it["unit"], it["span"], it["target"], it["category"])
        offsets = (it["span_start"], it["span_end"]) if it["span_start"] is not None else None
        path = self.image_file(it)
        available = bool(path) and Path(path).is_file()
        show_caption = phase in ("caption", "pair")
        show_image = phase in ("image", "pair")
        return ItemView(
            item_id=item_id, phase=phase, claim=claim, category=it["category"] if phase == "caption" else None,
            caption_window=it["caption_window"] if show_caption else None, span_offsets=offsets if show_caption else None,
            image_path=path if show_image else None, image_available=available if show_image else False,
        )

    def sample_report(self) -> Dict[str, Any]:
        row = self.store.one("SELECT sample_json FROM studies")
        return json.loads(row["sample_json"]) if row and row["sample_json"] else {}

    @property
    def judges(self) -> List[str]:
        return list(self.config.judges) or list(self.sample_report().get("judges", []))

    def _require(self, *statuses: str, action: str) -> None:
        st = self.status
        if st not in statuses:
            raise InputError(f"cannot {action}: study {self.study_id!r} is {st} (needs {' or '.join(statuses)})",
                             path=self.path)

    # -- sampling ------------------------------------------------------------------------------------
    def sample(self, judged_claims: Sequence[PathLike]) -> SampleReport:
        """Sample items from judged-claims files (§7); refused once the study is sealed."""
        st = self.status
        if st not in ("created", "sampled"):
            raise InputError(f"study {self.study_id!r} is {st}: a sealed study cannot be re-sampled", path=self.path)
        claims, counts = read_judged_claims(judged_claims)
        try:
            items, report = sample_items(claims, self.config)
        except EmptyInputError as exc:
            if exc.path is not None:
                raise
            raise EmptyInputError(str(exc), path=", ".join(str(p) for p in judged_claims)) from None
        report.counts.update(counts)
        report.sources = [{"path": str(Path(p).resolve()), "sha256": file_digest(p)} for p in judged_claims]
        rows = []
        for it in items:
            c = it.claim
            img = resolve_image(c.image_path, self.config.image_root)
            ok = img is not None and img.is_file()
            rows.append((
                it.item_id, c.question_id, c.caption_id, c.surface, it.surface_group, c.slice, c.category, c.unit,
                c.target, c.span, c.span_offsets[0] if c.span_offsets else None,
                c.span_offsets[1] if c.span_offsets else None, c.caption_window,
                str(img.resolve()) if img is not None else None, c.image_key, c.image_key, "ok" if ok else "missing",
                json.dumps({j: c.answers[j] for j in report.judges}, sort_keys=True), it.stratum, it.weight,
                it.population_size, it.sample_size, it.sample_probability, it.repeat_index, it.repeat_of,
                int(it.overlap), it.sample_order,
            ))
        # originals before repeats (repeat_of references them)
        rows.sort(key=lambda r: r[23])

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute("DELETE FROM items WHERE repeat_of IS NOT NULL")
            conn.execute("DELETE FROM items")
            conn.executemany(
                "INSERT INTO items (item_id, question_id, caption_id, surface, surface_group, slice, category, unit, "
                "target, span, span_start, span_end, caption_window, image_path, image_key, item_group, asset_status, "
                "judge_answers, stratum, weight, population_size, sample_size, sample_probability, repeat_index, "
                "repeat_of, overlap, sample_order) VALUES (" + ", ".join("?" * 27) + ")", rows)
            conn.execute("UPDATE studies SET status = 'sampled', sample_json = ?", (json.dumps(report.to_dict()),))

        self.store.write(tx)
        return report

    def seal(self) -> str:
        """Freeze the items (triggers refuse later changes); returns their SHA-256 digest."""
        self._require("sampled", action="seal")
        h = hashlib.sha256()
        for r in self.store.read("SELECT * FROM items ORDER BY item_id"):
            h.update(json.dumps(dict(r), sort_keys=True, default=str).encode("utf-8"))
        d = h.hexdigest()

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE studies SET status = 'sealed', seal_digest = ?, sealed_at = ?", (d, utcnow()))

        self.store.write(tx)
        return d

    # -- participants ----------------------------------------------------------------------------------
    def invite(self, count: int, kind: str = "human", role: str = "annotator", prefix: Optional[str] = None) -> List[Invite]:
        """``count`` new pseudonymous participants and their invite codes (only digests are stored)."""
        if count < 1:
            raise InputError("invite at least one participant", field="count")
        if kind not in ("human", "simulated"):
            raise InputError("kind must be 'human' or 'simulated'", field="kind")
        if role not in ("annotator", "adjudicator"):
            raise InputError("role must be 'annotator' or 'adjudicator'", field="role")
        self._require("created", "sampled", "sealed", "open", action="invite participants")
        if role == "annotator" and self.launch_seal() is not None:
            raise InputError(f"study {self.study_id!r} is sealed for launch: no annotator can be added (its "
                             "design, assignments included, is frozen)", path=self.path)
        prefix = prefix or {"human": "P", "simulated": "SIM"}[kind] + ("A" if role == "adjudicator" else "")
        invites: List[Invite] = []

        def tx(conn: sqlite3.Connection) -> None:
            invites.clear()
            taken = {r[0] for r in conn.execute("SELECT pseudonym FROM participants")}
            n = 1
            now = utcnow()
            for _ in range(count):
                while f"{prefix}{n:03d}" in taken:
                    n += 1
                pseudonym = f"{prefix}{n:03d}"
                taken.add(pseudonym)
                pid = secrets.token_hex(16)
                code = new_invite_code()
                conn.execute(
                    "INSERT INTO participants (participant_id, pseudonym, kind, role, status, target_items, created_at) "
                    "VALUES (?, ?, ?, ?, 'invited', ?, ?)",
                    (pid, pseudonym, kind, role, self.config.target_items if role == "annotator" else 0, now))
                conn.execute("INSERT INTO participant_invites (invite_digest, participant_id, created_at) VALUES (?, ?, ?)",
                             (digest(code), pid, now))
                invites.append(Invite(pseudonym, code, pid, kind))

        self.store.write(tx)
        return invites

    def participants(self) -> List[sqlite3.Row]:
        return self.store.read("SELECT participant_id, pseudonym, kind, role, status, target_items FROM participants "
                               "ORDER BY pseudonym")

    def withdraw(self, pseudonym: str) -> None:
        """Mark a participant withdrawn (their judgments stay; they cannot log in again)."""
        def tx(conn: sqlite3.Connection) -> None:
            cur = conn.execute("UPDATE participants SET status = 'withdrawn' WHERE pseudonym = ?", (pseudonym,))
            if cur.rowcount != 1:
                raise AccessError(f"no participant {pseudonym!r}", path=self.path, field="pseudonym")
            pid = conn.execute("SELECT participant_id FROM participants WHERE pseudonym = ?", (pseudonym,)).fetchone()[0]
            conn.execute("INSERT INTO consent_events (participant_id, consent, consent_version, created_at) "
                         "VALUES (?, 'withdrawn', ?, ?)", (pid, self.config.consent_version, utcnow()))

        self.store.write(tx)

    def set_profile(self, pseudonym: str, profile: Mapping[str, Any]) -> None:
        """Store the coarse allow-listed profile of a participant (§7 privacy)."""
        prof = validate_profile(profile)

        def tx(conn: sqlite3.Connection) -> None:
            cur = conn.execute("UPDATE participants SET profile_json = ? WHERE pseudonym = ?",
                               (json.dumps(prof, sort_keys=True), pseudonym))
            if cur.rowcount != 1:
                raise AccessError(f"no participant {pseudonym!r}", field="pseudonym")

        self.store.write(tx)

    # -- assignment ----------------------------------------------------------------------------------------
    def assign(self, extend: Sequence[str] = (), extend_all: bool = False) -> Dict[str, Any]:
        """Give every item ``labels_per_item`` labels from distinct annotators (§7).

        Order of filling: overlap items (all their labels), then a first label for every other item,
        then the remaining labels, then each hidden repeat to one annotator holding its original.
        Each slot goes to the least-loaded eligible annotator (ties: a seeded order) under their
        ``target_items`` cap; ``extend`` raises named annotators' caps by ``extension_batch`` (at most
        ``max_items``). Existing assignments are never moved; new tasks are appended to each phase
        block (tier, then a seeded key). Re-running fills slots left open.
        """
        self._require("sealed", "open", action="assign items")
        if self.launch_seal() is not None and not (extend or extend_all):
            raise InputError(f"study {self.study_id!r} is sealed for launch: its assignments are frozen (only "
                             "extension batches, --extend / --extend-all, can be added)", path=self.path)
        cfg = self.config
        L = cfg.labels_per_item
        assigned_items: Dict[str, int] = {}

        def tx(conn: sqlite3.Connection) -> Dict[str, Any]:
            people = conn.execute("SELECT participant_id, pseudonym, target_items FROM participants "
                                  "WHERE role = 'annotator' AND status <> 'withdrawn' ORDER BY pseudonym").fetchall()
            if not people:
                raise InputError("no annotators to assign: run `capaudit human invite` first", path=self.path)
            by_name = {p["pseudonym"]: p for p in people}
            cap = {p["participant_id"]: p["target_items"] for p in people}
            for name in ([p["pseudonym"] for p in people] if extend_all else list(extend)):
                if name not in by_name:
                    raise AccessError(f"no active annotator {name!r}", field="extend")
                pid = by_name[name]["participant_id"]
                cap[pid] = min(cap[pid] + cfg.extension_batch, cfg.max_items)
                conn.execute("UPDATE participants SET target_items = ? WHERE participant_id = ?", (cap[pid], pid))
            pids = [p["participant_id"] for p in people]
            rng = random.Random(f"{cfg.seed}:assign")
            order = list(pids)
            rng.shuffle(order)
            rank = {p: i for i, p in enumerate(order)}
            items = conn.execute("SELECT item_id, repeat_of, overlap FROM items ORDER BY sample_order").fetchall()
            holders: Dict[str, set] = {it["item_id"]: set() for it in items}
            load = {p: 0 for p in pids}
            for r in conn.execute("SELECT participant_id, item_id FROM assignments WHERE phase = 'caption'"):
                holders[r["item_id"]].add(r["participant_id"])
                if r["participant_id"] in load:
                    load[r["participant_id"]] += 1
            new: List[Tuple[str, str, int]] = []

            def pick(item_id: str, candidates: Iterable[str]) -> Optional[str]:
                ok = [p for p in candidates if p in load and p not in holders[item_id] and load[p] < cap[p]]
                if not ok:
                    return None
                p = min(ok, key=lambda q: (load[q], rank[q]))
                holders[item_id].add(p)
                load[p] += 1
                return p

            base = [it for it in items if it["repeat_of"] is None]
            overlap = [it for it in base if it["overlap"]]
            rest = [it for it in base if not it["overlap"]]
            for it in overlap:
                while len(holders[it["item_id"]]) < L:
                    p = pick(it["item_id"], pids)
                    if p is None:
                        break
                    new.append((p, it["item_id"], 0))
            for tier, target in ((1, 1), (2, L)):
                for it in rest:
                    while len(holders[it["item_id"]]) < target:
                        p = pick(it["item_id"], pids)
                        if p is None:
                            break
                        new.append((p, it["item_id"], tier))
            for it in items:
                if it["repeat_of"] is not None and not holders[it["item_id"]]:
                    p = pick(it["item_id"], sorted(holders[it["repeat_of"]], key=lambda q: rank.get(q, 0)))
                    if p is not None:
                        new.append((p, it["item_id"], 3))
            now = utcnow()
            pseudo = {p["participant_id"]: p["pseudonym"] for p in people}
            per: Dict[str, List[Tuple[str, int]]] = {}
            for p, item_id, tier in new:
                per.setdefault(p, []).append((item_id, tier))
            for p, tasks in per.items():
                for phase in PHASES:
                    start = conn.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM assignments "
                                         "WHERE participant_id = ? AND phase = ?", (p, phase)).fetchone()[0]
                    keyed = sorted(
                        (tier, hashlib.blake2b(f"{cfg.seed}\0{pseudo[p]}\0{item_id}\0{phase}".encode(),
                                               digest_size=8).hexdigest(), item_id) for item_id, tier in tasks)
                    conn.executemany(
                        "INSERT INTO assignments (participant_id, item_id, phase, position, tier, order_key, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(p, item_id, phase, start + i, tier, key, now) for i, (tier, key, item_id) in enumerate(keyed)])
            open_slots = sum(max(0, L - len(holders[it["item_id"]])) for it in base)
            open_repeats = sum(1 for it in items if it["repeat_of"] is not None and not holders[it["item_id"]])
            names = {p["participant_id"]: p["pseudonym"] for p in people}
            assigned_items.update({names[p]: n for p, n in load.items()})
            return {"new_items": len(new), "open_label_slots": open_slots, "open_repeats": open_repeats,
                    "items_per_participant": dict(sorted(assigned_items.items()))}

        return self.store.write(tx)

    def open(self) -> None:
        """Accept annotations (needs a sealed study with assignments)."""
        self._require("sealed", "closed", action="open the study")
        if self.store.one("SELECT 1 FROM assignments LIMIT 1") is None:
            raise InputError("no assignments yet: run `capaudit human assign` first", path=self.path)
        self.store.write(lambda c: c.execute("UPDATE studies SET status = 'open', opened_at = ?", (utcnow(),)))

    def close_study(self) -> None:
        """Stop accepting annotations (``open`` reopens)."""
        self._require("open", action="close the study")
        self.store.write(lambda c: c.execute("UPDATE studies SET status = 'closed', closed_at = ?", (utcnow(),)))

    # -- sessions ------------------------------------------------------------------------------------------
    def login(self, invite_code: str) -> "AnnotatorSession":
        """A session for the participant holding ``invite_code`` (not invited → :class:`AccessError`)."""
        if not isinstance(invite_code, str) or not invite_code.strip():
            raise AccessError("enter your invite code", field="invite_code")
        d = digest(invite_code)
        token = secrets.token_urlsafe(32)
        ttl = timedelta(hours=float(self.config.session_ttl_hours))

        def tx(conn: sqlite3.Connection) -> str:
            row = conn.execute(
                "SELECT p.participant_id, p.status, p.role FROM participant_invites i JOIN participants p "
                "USING (participant_id) WHERE i.invite_digest = ? AND i.revoked_at IS NULL", (d,)).fetchone()
            if row is None:
                raise AccessError("this invite code is not valid for this study (participant not invited)",
                                  field="invite_code")
            if row["status"] == "withdrawn":
                raise AccessError("this participant has withdrawn from the study", field="participant")
            now = _now()
            conn.execute("INSERT INTO bearer_sessions (token_digest, participant_id, created_at, expires_at) "
                         "VALUES (?, ?, ?, ?)", (digest(token), row["participant_id"], _iso(now), _iso(now + ttl)))
            conn.execute("UPDATE participants SET status = 'active' WHERE participant_id = ? AND status = 'invited'",
                         (row["participant_id"],))
            conn.execute("INSERT INTO annotation_events (participant_id, event, created_at) VALUES (?, 'login', ?)",
                         (row["participant_id"], _iso(now)))
            return row["participant_id"]

        pid = self.store.write(tx)
        return AnnotatorSession(self, pid, token)

    def session(self, token: str) -> "AnnotatorSession":
        """Resume a session from its bearer token (expired or unknown → :class:`AccessError`)."""
        row = self.store.one("SELECT participant_id FROM bearer_sessions WHERE token_digest = ? AND expires_at > ?",
                             (digest(token), _iso(_now())))
        if row is None:
            raise AccessError("session expired or unknown; log in with your invite code again", field="token")
        return AnnotatorSession(self, row["participant_id"], token)

    # -- reading -------------------------------------------------------------------------------------------
    def items(self) -> List[sqlite3.Row]:
        return self.store.read("SELECT * FROM items ORDER BY sample_order")

    def item(self, item_id: str) -> sqlite3.Row:
        row = self.store.one("SELECT * FROM items WHERE item_id = ?", (item_id,))
        if row is None:
            raise InputError(f"no item {item_id!r} in study {self.study_id!r}", field="item_id")
        return row

    def latest_annotations(self) -> List[Dict[str, Any]]:
        """The latest revision of every (participant, item, phase) judgment, with participant kind."""
        rows = self.store.read(
            "SELECT a.*, p.pseudonym, p.kind FROM annotations a JOIN participants p USING (participant_id) "
            "WHERE a.revision = (SELECT MAX(b.revision) FROM annotations b WHERE b.participant_id = a.participant_id "
            "AND b.item_id = a.item_id AND b.phase = a.phase) ORDER BY p.pseudonym, a.phase, a.annotation_id")
        return [dict(r) for r in rows]

    def adjudicated(self) -> Dict[Tuple[str, str, str], str]:
        """Latest adjudicated value per (item, phase, field)."""
        rows = self.store.read(
            "SELECT item_id, phase, field, value FROM adjudications a WHERE revision = (SELECT MAX(revision) "
            "FROM adjudications b WHERE b.item_id = a.item_id AND b.phase = a.phase AND b.field = a.field)")
        return {(r["item_id"], r["phase"], r["field"]): r["value"] for r in rows}

    def adjudicate(self, item_id: str, field_name: str, value: str, adjudicator: str, *, simulated: bool = False,
                   packet: Optional[Mapping[str, Any]] = None) -> int:
        """Record an adjudicated value for a nominal field of an item (append-only, with packet/response hashes)."""
        if field_name not in ADJUDICABLE_FIELDS:
            raise InputError(f"not an adjudicable field (one of {sorted(ADJUDICABLE_FIELDS)})", field="field")
        phase = ADJUDICABLE_FIELDS[field_name]
        allowed = PHASE_FIELDS[phase][field_name]
        if value not in allowed:
            raise InputError(f"{value!r} is not one of {list(allowed)}", field="value")
        if not isinstance(adjudicator, str) or not adjudicator or len(adjudicator) > 32 or not all(
                ch.isalnum() or ch in "_-" for ch in adjudicator):
            raise InputError("adjudicator must be a pseudonym (1-32 letters, digits, '_' or '-')", field="adjudicator")
        if self.store.one("SELECT 1 FROM items WHERE item_id = ?", (item_id,)) is None:
            raise InputError(f"no item {item_id!r} in study {self.study_id!r}", path=self.path, field="item_id")
        if self.mode == "real" and simulated:
            raise InputError("simulated adjudication is refused in a real study", field="simulated")
        pkt = dict(packet) if packet is not None else {
            "item_id": item_id, "phase": phase, "field": field_name,
            "labels": sorted(a[field_name] for a in self.latest_annotations()
                             if a["item_id"] == item_id and a["phase"] == phase),
        }
        resp = {"item_id": item_id, "field": field_name, "value": value, "adjudicator": adjudicator}

        def h(obj: Any) -> str:
            return hashlib.sha256(json.dumps(obj, sort_keys=True).encode("utf-8")).hexdigest()

        def tx(conn: sqlite3.Connection) -> int:
            rev = conn.execute("SELECT COALESCE(MAX(revision), 0) + 1 FROM adjudications WHERE item_id = ? AND phase = ? "
                               "AND field = ?", (item_id, phase, field_name)).fetchone()[0]
            cur = conn.execute(
                "INSERT INTO adjudications (item_id, phase, field, value, adjudicator, revision, simulated, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (item_id, phase, field_name, value, adjudicator, rev, int(simulated),
                                                    utcnow()))
            conn.execute("INSERT INTO adjudication_events (adjudication_id, packet_sha256, response_sha256, created_at) "
                         "VALUES (?, ?, ?, ?)", (cur.lastrowid, h(pkt), h(resp), utcnow()))
            return int(cur.lastrowid)

        return self.store.write(tx)

    def backup(self, dest: PathLike) -> Path:
        return self.store.backup(dest)


class AnnotatorSession:
    """One participant's session: their queue, blinded item views, and :meth:`record`."""

    def __init__(self, study: Study, participant_id: str, token: str):
        self.study = study
        self.participant_id = participant_id
        self._token_digest = digest(token)
        self.token = token
        row = study.store.one("SELECT pseudonym, kind FROM participants WHERE participant_id = ?", (participant_id,))
        self.pseudonym: str = row["pseudonym"]
        self.simulated: bool = row["kind"] == "simulated"
        self._tasks: Optional[List[Task]] = None

    def _check(self, conn: Optional[sqlite3.Connection] = None) -> None:
        q = ("SELECT p.status FROM bearer_sessions s JOIN participants p USING (participant_id) "
             "WHERE s.token_digest = ? AND s.expires_at > ?")
        args = (self._token_digest, _iso(_now()))
        row = conn.execute(q, args).fetchone() if conn is not None else self.study.store.one(q, args)
        if row is None:
            raise AccessError("session expired; log in with your invite code again", field="token")
        if row["status"] == "withdrawn":
            raise AccessError("this participant has withdrawn from the study", field="participant")

    # -- consent ---------------------------------------------------------------------------------------
    def needs_consent(self) -> bool:
        row = self.study.store.one("SELECT consent FROM consent_events WHERE participant_id = ? ORDER BY event_id DESC "
                                   "LIMIT 1", (self.participant_id,))
        return row is None or row["consent"] != "given"

    def give_consent(self) -> None:
        self._check()
        now = utcnow()

        def tx(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO consent_events (participant_id, consent, consent_version, created_at) "
                         "VALUES (?, 'given', ?, ?)", (self.participant_id, self.study.config.consent_version, now))
            conn.execute("INSERT INTO annotation_events (participant_id, event, created_at) VALUES (?, 'consent', ?)",
                         (self.participant_id, now))

        self.study.store.write(tx)

    # -- queue -----------------------------------------------------------------------------------------
    def tasks(self, refresh: bool = False) -> List[Task]:
        """Batch by batch: the batch's caption, image and pair phases, each in assignment position order.

        Batch membership follows the caption phase's positions (``batch_size`` original items per
        batch); a hidden repeat joins its original's batch.
        """
        if self._tasks is None or refresh:
            rows = self.study.store.read("SELECT item_id, phase, position FROM assignments WHERE participant_id = ?",
                                         (self.participant_id,))
            size = int(self.study.config.batch_size)
            repeat_of = {r["item_id"]: r["repeat_of"] for r in self.study.store.read(
                "SELECT i.item_id, i.repeat_of FROM items i JOIN assignments a USING (item_id) WHERE "
                "a.participant_id = ? AND a.phase = ? AND i.repeat_of IS NOT NULL", (self.participant_id, PHASES[0]))}
            captions = sorted((r for r in rows if r["phase"] == PHASES[0] and r["item_id"] not in repeat_of),
                              key=lambda r: r["position"])
            batch_of = {r["item_id"]: (i // size if size else 0) for i, r in enumerate(captions)}
            # a hidden repeat joins its original's batch (after its caption steps), so its caption step
            # still precedes the original's image step: the repeat is judged blind of the image
            last = max(batch_of.values(), default=0)
            batch_of.update({i: batch_of.get(o, last) for i, o in repeat_of.items()})
            ordered = sorted(rows, key=lambda r: (batch_of.get(r["item_id"], 0), PHASES.index(r["phase"]),
                                                  r["position"]))
            sizes: Dict[Tuple[int, str], int] = {}
            for r in ordered:
                key = (batch_of.get(r["item_id"], 0), r["phase"])
                sizes[key] = sizes.get(key, 0) + 1
            tasks: List[Task] = []
            seen: Dict[Tuple[int, str], int] = {}
            for i, (r, pos) in enumerate(zip(ordered, _positions(ordered))):
                key = (batch_of.get(r["item_id"], 0), r["phase"])
                tasks.append(Task(r["item_id"], r["phase"], pos, i, key[0], seen.get(key, 0), sizes[key]))
                seen[key] = seen.get(key, 0) + 1
            self._tasks = tasks
        return self._tasks

    def answers(self) -> Dict[Tuple[str, str], Saved]:
        rows = self.study.store.read(
            "SELECT * FROM annotations a WHERE participant_id = ? AND revision = (SELECT MAX(revision) FROM annotations b "
            "WHERE b.participant_id = a.participant_id AND b.item_id = a.item_id AND b.phase = a.phase)",
            (self.participant_id,))
        return {(r["item_id"], r["phase"]): Saved(r["annotation_id"], r["revision"], _values_of(r), r["elapsed_ms"])
                for r in rows}

    def saved(self, item_id: str, phase: str) -> Optional[Saved]:
        r = self.study.store.one(
            "SELECT * FROM annotations WHERE participant_id = ? AND item_id = ? AND phase = ? ORDER BY revision DESC LIMIT 1",
            (self.participant_id, item_id, phase))
        return Saved(r["annotation_id"], r["revision"], _values_of(r), r["elapsed_ms"]) if r else None

    def first_unanswered(self) -> Optional[int]:
        """Index (into :meth:`tasks`) of the first task without a saved judgment; ``None`` when all are done."""
        done = self.answers()
        for t in self.tasks(refresh=True):
            if (t.item_id, t.phase) not in done:
                return t.index
        return None

    def progress(self) -> Progress:
        tasks = self.tasks()
        done = self.answers()
        by_phase: Dict[str, Tuple[int, int]] = {}
        for ph in PHASES:
            ts = [t for t in tasks if t.phase == ph]
            by_phase[ph] = (sum((t.item_id, ph) in done for t in ts), len(ts))
        batches: Dict[int, List[int]] = {}
        for t in tasks:
            b = batches.setdefault(t.batch, [0, 0])
            b[0] += (t.item_id, t.phase) in done
            b[1] += 1
        el = [s.elapsed_ms for s in done.values() if s.elapsed_ms is not None]
        return Progress(done=sum(d for d, _ in by_phase.values()), assigned=len(tasks), by_phase=by_phase,
                        mean_seconds=(sum(el) / len(el) / 1000.0) if el else None,
                        by_batch=tuple((d, n) for _, (d, n) in sorted(batches.items())))

    def view(self, item_id: str, phase: str) -> ItemView:
        """The blinded view of an item (:meth:`Study.item_view`)."""
        return self.study.item_view(item_id, phase)

    # -- writing -----------------------------------------------------------------------------------------
    def record(self, item_id: str, phase: str, values: Mapping[str, Any], *, expected_revision: Optional[int] = None,
               elapsed_ms: Optional[int] = None) -> RecordResult:
        """Commit one judgment now (one transaction).

        ``expected_revision`` is the revision the caller showed (0 for an unanswered screen): a second
        submission of the same screen with the same values is a duplicate (no new row; a double click
        records one judgment); different values on a screen someone has since answered raise
        :class:`StaleJudgmentError`. Re-submitting the saved values is never a new revision.
        """
        if phase not in PHASES:
            raise InputError(f"unknown phase {phase!r}", field="phase")
        it = self.study.item(item_id)
        vals = dict(values)
        if elapsed_ms is not None:
            vals["elapsed_ms"] = elapsed_ms
        norm = validate_judgment(phase, vals, item_category=it["category"])
        el = norm.pop("elapsed_ms", None)
        full = {k: norm.get(k) for k in _VALUE_FIELDS}
        full["reason_tags"] = norm.get("reason_tags", [])

        def tx(conn: sqlite3.Connection) -> RecordResult:
            self._check(conn)
            st = conn.execute("SELECT status FROM studies").fetchone()[0]
            if st != "open":
                raise AccessError(f"the study is {st}, not open for annotation", field="status")
            if conn.execute("SELECT 1 FROM consent_events WHERE participant_id = ? AND consent = 'given' AND event_id = "
                            "(SELECT MAX(event_id) FROM consent_events WHERE participant_id = ?)",
                            (self.participant_id, self.participant_id)).fetchone() is None:
                raise AccessError("consent has not been given", field="consent")
            if conn.execute("SELECT 1 FROM assignments WHERE participant_id = ? AND item_id = ? AND phase = ?",
                            (self.participant_id, item_id, phase)).fetchone() is None:
                raise AccessError(f"item {item_id} ({phase} phase) is not assigned to {self.pseudonym}", field="item_id")
            i = PHASES.index(phase)
            if i > 0 and conn.execute("SELECT 1 FROM annotations WHERE participant_id = ? AND item_id = ? AND phase = ?",
                                      (self.participant_id, item_id, PHASES[i - 1])).fetchone() is None:
                raise InputError(f"the {phase} phase of an item follows its {PHASES[i - 1]} phase", field="phase")
            last = conn.execute("SELECT * FROM annotations WHERE participant_id = ? AND item_id = ? AND phase = ? "
                                "ORDER BY revision DESC LIMIT 1", (self.participant_id, item_id, phase)).fetchone()
            last_rev = last["revision"] if last else 0
            same = last is not None and _values_of(last) == full
            if same or (expected_revision is not None and expected_revision != last_rev):
                if not same:
                    raise StaleJudgmentError(
                        f"this screen was answered elsewhere (revision {last_rev}) after it was shown (revision "
                        f"{expected_revision}); reload to see the saved answer", field="revision")
                conn.execute("INSERT INTO annotation_events (annotation_id, participant_id, item_id, phase, event, "
                             "created_at) VALUES (?, ?, ?, ?, 'duplicate_ignored', ?)",
                             (last["annotation_id"], self.participant_id, item_id, phase, utcnow()))
                return RecordResult(last["annotation_id"], last_rev, True)
            now = utcnow()
            cur = conn.execute(
                "INSERT INTO annotations (participant_id, item_id, phase, revision, caption_licensed, atomic_visual_claim, "
                "category_check, corrected_category, image_support, salient_coverage, control_usefulness, "
                "image_unavailable, confidence, reason_tags, note, elapsed_ms, simulated, created_at) "
                "VALUES (" + ", ".join("?" * 18) + ")",
                (self.participant_id, item_id, phase, last_rev + 1, full["caption_licensed"], full["atomic_visual_claim"],
                 full["category_check"], full["corrected_category"], full["image_support"], full["salient_coverage"],
                 full["control_usefulness"], full["image_unavailable"] or 0, full["confidence"],
                 json.dumps(full["reason_tags"]), full["note"], el, int(self.simulated), now))
            conn.execute("INSERT INTO annotation_events (annotation_id, participant_id, item_id, phase, event, created_at) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (cur.lastrowid, self.participant_id, item_id, phase,
                                                        "saved" if last_rev == 0 else "revised", now))
            return RecordResult(int(cur.lastrowid), last_rev + 1, False)

        return self.study.store.write(tx)


def _positions(ordered: Sequence[sqlite3.Row]) -> List[int]:
    """0-based position of each task within its phase block."""
    out: List[int] = []
    counts: Dict[str, int] = {}
    for r in ordered:
        out.append(counts.get(r["phase"], 0))
        counts[r["phase"]] = out[-1] + 1
    return out


__all__ = [
    "AccessError", "AnnotatorSession", "Invite", "ItemView", "Progress", "RecordResult", "Saved", "StaleJudgmentError",
    "Study", "Task", "digest", "new_invite_code", "resolve_study_db", "study_folder",
]
