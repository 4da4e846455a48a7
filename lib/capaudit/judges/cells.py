"""Paper rollup (reference-spec §5.4): both-judges cells, caption bootstrap, judge agreement, extraction.

For one slice and its judges:

1. each judge's responses are merged answered-wins and validated (:func:`.answers.load_answers`);
2. **both-judges intersection**: the captions — keyed by ``(surface, caption_id)``, because the
   request id hashes the judge model — answered by *every* judge of the slice; each judge is
   summarized on that common set;
3. per (slice, judge, surface) cell over those captions: ``responses`` (captions), ``questions`` =
   yes + no + uncertain, ``supported_cap`` = yes/responses, ``risk`` = no/questions,
   ``uncertain_rate`` = uncertain/questions; the same excluding ``count`` and ``relation``
   (responses unchanged); ``by_type`` yes/no/uncertain per category (sorted type names);
4. caption-level bootstrap (§5.4): per-caption (yes, no, questions) in row order — the order in
   which the captions first appear in the request files —, a fresh ``np.random.default_rng(0)``
   per cell, 2,000 replicates of ``rng.integers(0, n, size=n)``, supported = Σyes/n, risk =
   Σno/Σquestions; ``*_std`` = sample std (ddof = 1). :func:`bootstrap_stds` computes every view
   of one (slice, surface) from the same draws — identical to
   :func:`capaudit.stats.bootstrap.caption_bootstrap` per view (tested bit for bit), because each
   cell's fresh generator with the same seed and the same n draws the same indices; for the same
   reason surfaces with equal caption counts share one pass. Replicate sums are exact integers
   (float32 matrix products while every partial sum stays below 2**24, else float64), and a large
   bootstrap is cut into replicate blocks run in worker processes, each drawing and dropping the
   replicates before its block so the draws are those of one sequential run;
5. judge agreement, per category and ``__all__``: ``judge_agreement`` (the reference study's block,
   first two judges only) joins their answers on question id over the intersection: ``joined``,
   ``exact``, ``exact_rate``. With two or more judges, ``judges_agreement`` (all judges given,
   :func:`multi_agreement`) joins on question id across *every* judge — a question counts when each
   judge's request for the caption has it — and reports ``questions``, ``exact_all`` (every judge
   gave the same answer) and its rate, Fleiss' κ, Gwet's AC1 (``q`` = 3 labels) and Krippendorff's
   nominal α over all judges, and per judge pair exact agreement and Cohen's κ on the same
   questions (:mod:`capaudit.stats.agreement`'s count-table forms, run on each category's distinct
   count rows weighted by their number of questions: a few ``bincount`` passes over the questions);
   undefined statistics are ``null`` and a category with no joined question is left out.
   With two judges its pair counts equal ``judge_agreement``'s;
6. extraction accounting per surface from the claims run: ``requests``, ``valid`` (an ok answer),
   ``invalid``, ``invalid_at_token_cap`` (failed with ``usage.completion_tokens`` equal to the
   request's ``max_tokens``), ``valid_zero_claims`` (valid with no judgeable unit).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from capaudit.errors import InputError
from capaudit.stats.agreement import (cohen_kappa_table, fleiss_kappa_table, gwet_ac1_table, krippendorff_alpha_table,
                                      rating_table)
from capaudit.stats.bootstrap import CAPTION_REPS, CAPTION_SEED
from capaudit.summaries.categories import UNIT_CATEGORIES
from capaudit.summaries.cells import (
    AGREEMENT_ALL,
    EXCLUDED_TYPES,
    Agreement,
    Cell,
    CellsFile,
    CellStats,
    AGREEMENT_LABELS,
    Extraction,
    JudgesAgreement,
    MultiAgreement,
    PairAgreement,
    SliceAgreement,
    TypeCounts,
    pair_keys,
)

from capaudit.engine.forked import default_workers, run_tasks
from ._stream import CutLine, RowReader, check_cut_lines, check_not_empty, expand, scan_winners, store_file_list
from .answers import CAT_CODE, JudgeAnswers, RequestIndex, load_answers, question_positions
from .questions import questions_from_units
from .requests import iter_claims_requests

PathLike = Union[str, Path]
_EXCL = frozenset(CAT_CODE[t] for t in EXCLUDED_TYPES)
#: Memory budget of one batch of bootstrap count vectors.
_BATCH_BYTES = 1 << 26
#: float32 sums are exact while every partial sum stays below 2**24
_F32_EXACT = 1 << 24
#: bootstraps of at least this many draws (n * reps) are split over the workers
_PARALLEL_DRAWS = 50_000_000
#: cost of drawing (and dropping) one replicate, relative to a full replicate
_SKIP = 0.4
#: response stores at least this large (all judges) are loaded one judge per worker process
_PARALLEL_BYTES = 32 << 20


def _heap_hint() -> None:
    """Free one 31 MiB block: glibc's malloc then serves the per-replicate arrays (2 MB at n =
    250,000) from its heap instead of a fresh ``mmap`` each time (mallopt(3), dynamic
    ``M_MMAP_THRESHOLD``), which costs a page fault per 4 KiB — seconds per million captions. A
    no-op for results, and elsewhere."""
    block = np.empty(31 << 20, dtype=np.uint8)
    del block


def _bootstrap_sums(m: np.ndarray, reps: int, seed: int, start: int = 0, stop: Optional[int] = None) -> np.ndarray:
    """Per replicate ``start..stop-1`` of the caption bootstrap, the column sums of ``m`` over the
    resampled rows (``rng = default_rng(seed)``, one ``rng.integers(0, n, size=n)`` per replicate;
    the replicates before ``start`` are drawn and dropped). Exact integers, as float64."""
    n = m.shape[0]
    stop = reps if stop is None else stop
    _heap_hint()
    rng = np.random.default_rng(seed)
    for _ in range(start):
        rng.integers(0, n, size=n)
    sums = np.empty((stop - start, m.shape[1]))
    batch = max(1, min(stop - start, _BATCH_BYTES // (m.itemsize * n)))
    counts = np.empty((batch, n), dtype=m.dtype)
    for b0 in range(0, stop - start, batch):
        b = min(batch, stop - start - b0)
        for j in range(b):
            counts[j] = np.bincount(rng.integers(0, n, size=n), minlength=n)
        sums[b0:b0 + b] = counts[:b] @ m
    return sums


def _count_matrix(cols: np.ndarray) -> np.ndarray:
    """The columns as the float type whose matrix products stay exact (module docstring, item 4)."""
    n = cols.shape[0]
    top = int(np.abs(cols).max()) if cols.size else 0
    return cols.astype(np.float32 if n * max(top, 1) < _F32_EXACT else np.float64)


def bootstrap_sums(columns: np.ndarray, reps: int = CAPTION_REPS, seed: int = CAPTION_SEED,
                   workers: Optional[int] = None) -> np.ndarray:
    """``(reps, k)`` bootstrap column sums of an ``(n, k)`` integer array (see :func:`bootstrap_stds`).

    With ``workers`` > 1 the replicates are cut into one block per worker (each block draws and
    drops the replicates before it, so the draws are those of one sequential run); the blocks are
    sized so that the later ones, which draw more to skip ahead, finish together.
    """
    cols = np.asarray(columns, dtype=np.int64)
    n = cols.shape[0]
    m = _count_matrix(cols)
    workers = default_workers() if workers is None else max(1, int(workers))
    if workers <= 1 or reps < 64 or n * reps < _PARALLEL_DRAWS:
        return _bootstrap_sums(m, reps, seed)
    w = min(workers, 8)
    # block k starts at replicate s_k and takes ~ SKIP * s_k + (s_{k+1} - s_k); equal times T give
    # s_{k+1} = (1 - SKIP) s_k + T, hence T = reps * SKIP / (1 - (1 - SKIP) ** w)
    t = reps * _SKIP / (1 - (1 - _SKIP) ** w)
    cuts = [0]
    for _ in range(w - 1):
        cuts.append(min(reps, int(round((1 - _SKIP) * cuts[-1] + t))))
    cuts.append(reps)
    blocks = [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    parts = run_tasks([lambda a=a, b=b: _one_blas_thread(_bootstrap_sums, m, reps, seed, a, b) for a, b in blocks], w)
    return np.concatenate(parts, axis=0)


def _one_blas_thread(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` with the BLAS pool at one thread (one block per core already; a multi-threaded
    BLAS in every block would oversubscribe the cores)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        return fn(*args)
    with threadpool_limits(1, user_api="blas"):
        return fn(*args)


def _stds_from_sums(sums: np.ndarray, n: int, views: Sequence[Tuple[int, int, int]]) -> List[Tuple[float, float]]:
    reps = sums.shape[0]
    out = []
    for y, no, q in views:
        sup = sums[:, y] / n
        qs = sums[:, q]
        risk = np.divide(sums[:, no], qs, out=np.zeros(reps), where=qs > 0)
        out.append((float(np.std(sup, ddof=1)), float(np.std(risk, ddof=1))))
    return out


def bootstrap_stds(columns: np.ndarray, views: Sequence[Tuple[int, int, int]], reps: int = CAPTION_REPS,
                   seed: int = CAPTION_SEED, workers: Optional[int] = 1) -> List[Tuple[float, float]]:
    """Caption-bootstrap ``(supported_cap_std, risk_std)`` of several views sharing one row set.

    ``columns`` is an ``(n, k)`` integer array of per-caption counts; each view is the column
    indices ``(yes, no, questions)``. Equal, bit for bit, to calling ``caption_bootstrap`` with a
    fresh ``default_rng(seed)`` on each view's triples: the draws depend only on (seed, n, reps).
    Counts of each replicate are ``bincount`` vectors, summed against the columns by one matrix
    product per batch — in float32 when every partial sum stays below 2**24, else float64 (exact
    for counts below 2**53), so the sums are the exact integers either way.
    """
    cols = np.asarray(columns, dtype=np.int64)
    if cols.ndim != 2:
        raise ValueError(f"bootstrap_stds: expected an (n, k) array, got shape {cols.shape}")
    n = cols.shape[0]
    if n == 0:
        return [(0.0, 0.0) for _ in views]
    if reps < 2:
        raise ValueError(f"bootstrap_stds: reps must be >= 2, got {reps}")
    return _stds_from_sums(bootstrap_sums(cols, reps, seed, workers), n, views)


def _per_caption(rows: np.ndarray, codes_all: np.ndarray, arr: Mapping[str, np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """Per caption (row) ``(yes, no, questions, yes_excl, no_excl, questions_excl)`` and the
    ``(type, answer)`` count table of one judge, vectorised over all rows."""
    n = len(rows)
    out = np.zeros((n, 6), dtype=np.int64)
    tc = np.zeros((len(UNIT_CATEGORIES), 3), dtype=np.int64)
    if n == 0:
        return out, tc
    lengths = arr["qlen"][rows].astype(np.int64)
    pos = question_positions(arr["qoff"], arr["qlen"], rows)
    codes = codes_all[pos]
    cats = arr["cats"][pos]
    starts = np.cumsum(lengths) - lengths
    keep = ~np.isin(cats, np.fromiter(_EXCL, dtype=np.uint8))
    yes, no = codes == 0, codes == 1
    out[:, 0] = np.add.reduceat(yes, starts)
    out[:, 1] = np.add.reduceat(no, starts)
    out[:, 2] = lengths
    out[:, 3] = np.add.reduceat(yes & keep, starts)
    out[:, 4] = np.add.reduceat(no & keep, starts)
    out[:, 5] = np.add.reduceat(keep, starts)
    tc += np.bincount(cats.astype(np.int64) * 3 + codes, minlength=3 * len(UNIT_CATEGORIES)).reshape(-1, 3)
    return out, tc


def _rows(a: JudgeAnswers) -> np.ndarray:
    return np.frombuffer(a.answered_rows, dtype=np.dtype(a.answered_rows.typecode)).astype(np.int64)


def _intersection(index: RequestIndex, answers: Sequence[JudgeAnswers]) -> Tuple[np.ndarray, List[np.ndarray]]:
    """Caption-key ordinals answered by every judge (ascending = ``index.order``) and, per judge,
    the index row answering each (the last in merge order when a judge answered a key twice)."""
    key_of = index.arrays()["key_of"]
    nk = len(index.key_surface)
    common = np.ones(nk, dtype=bool)
    per: List[np.ndarray] = []
    for a in answers:
        rows = _rows(a)
        keyrow = np.full(nk, -1, dtype=np.int64)
        if len(rows):
            rev = rows[::-1]
            uk, first = np.unique(key_of[rev], return_index=True)
            keyrow[uk] = rev[first]
        per.append(keyrow)
        common &= keyrow >= 0
    keys = np.flatnonzero(common)
    return keys, [k[keys] for k in per]


def intersect(index: RequestIndex, answers: Sequence[JudgeAnswers]) -> Tuple[List[Tuple[int, str]], List[Dict[Tuple[int, str], str]]]:
    """Captions answered by every judge (ordered by ``index.order``) and, per judge, key → request id."""
    per_judge: List[Dict[Tuple[int, str], str]] = []
    surface_of, cids, rids = index.surface_of, index.caption_ids, index.request_ids
    for a in answers:
        m: Dict[Tuple[int, str], str] = {}
        for r in a.answered_rows:
            m[(surface_of[r], cids[r])] = rids[r]
        per_judge.append(m)
    common = set(per_judge[0])
    for m in per_judge[1:]:
        common &= set(m)
    keys = sorted(common, key=index.order.__getitem__)
    return keys, per_judge


def build_cells(slice_name: str, judges: Sequence[Tuple[str, Sequence[PathLike]]], requests: Sequence[PathLike],
                reps: int = CAPTION_REPS, seed: int = CAPTION_SEED,
                extraction: Optional[Mapping[str, Extraction]] = None,
                surfaces: Optional[Sequence[str]] = None, workers: Optional[int] = None) -> Tuple[CellsFile, Dict[str, Any]]:
    """Cells of one slice (module docstring) and a report ``{judge: {responses, answered, failed, unknown}}``.

    ``surfaces`` fixes the cell order (default: request order); a listed surface with no answered
    caption gets an empty cell (0 responses) so every judge has one. ``workers`` (default: the CPU
    count) load the judges' answers and run the bootstrap blocks in parallel; results do not
    depend on it.
    """
    index, answers = load_slice(judges, requests, workers=workers)
    return cells_from_answers(slice_name, [j for j, _ in judges], index, answers, reps, seed, extraction, surfaces,
                              workers=workers)


def _load_detached(index: RequestIndex, paths: Sequence[PathLike], keep_examples: int) -> JudgeAnswers:
    return load_answers(index, paths, keep_examples).detached()


def load_slice(judges: Sequence[Tuple[str, Sequence[PathLike]]], requests: Sequence[PathLike],
               keep_examples: int = 0, workers: Optional[int] = None,
               allow_in_progress: bool = False) -> Tuple[RequestIndex, List[JudgeAnswers]]:
    """The request index of all judges' requests and each judge's validated answers (one judge
    per worker process where ``fork`` is available and the stores are large — ``workers=None`` —
    or ``workers`` > 1; the same answers either way). A cut last line in a response store is an
    error naming file and line (with ``allow_in_progress``, not while its store is being written)."""
    if not judges:
        raise InputError("at least one --judge NAME=RESPONSES is needed")
    names = [j for j, _ in judges]
    if len(set(names)) != len(names):
        raise InputError(f"judge names must be distinct, got {names}")
    index = RequestIndex.from_files(requests)
    if workers is None:  # worker processes only where they pay (not for the demo's few hundred rows)
        try:
            size = sum(f.stat().st_size for _, paths in judges for f in expand(paths))
        except (OSError, ValueError):
            size = 0
        workers = default_workers() if size >= _PARALLEL_BYTES else 1
    tasks = [lambda p=paths: _load_detached(index, p, keep_examples) for _, paths in judges]
    answers = [a.attach(index) for a in run_tasks(tasks, workers)]
    for a in answers:
        check_cut_lines(a.cut_lines, allow_in_progress)
    return index, answers


def cells_from_answers(slice_name: str, names: Sequence[str], index: RequestIndex, answers: Sequence[JudgeAnswers],
                       reps: int = CAPTION_REPS, seed: int = CAPTION_SEED,
                       extraction: Optional[Mapping[str, Extraction]] = None,
                       surfaces: Optional[Sequence[str]] = None,
                       workers: Optional[int] = None) -> Tuple[CellsFile, Dict[str, Any]]:
    """:func:`build_cells` on loaded answers (``names[i]`` is the judge of ``answers[i]``)."""
    names = list(names)
    nj = len(names)
    if nj >= 2 and len(set(pair_keys(names))) != len(pair_keys(names)):
        raise InputError(f"judge names {names} give colliding judge pair keys {pair_keys(names)} "
                         "(a judge name holds '|'): rename a judge")
    arr = index.arrays()
    keys, krows = _intersection(index, answers)
    key_surface = arr["key_surface"][keys]
    order = list(surfaces) if surfaces else list(index.surfaces)
    unknown = [s for s in order if s not in index.surfaces]
    by_surface: Dict[int, np.ndarray] = {index.surfaces.index(s): np.flatnonzero(key_surface == index.surfaces.index(s))
                                         for s in order if s not in unknown}
    codes = [np.frombuffer(a.codes, dtype=np.uint8) for a in answers]
    # per surface: per-caption columns (6 per judge) and per-judge type tables
    per_surface: Dict[str, Tuple[int, np.ndarray, List[np.ndarray]]] = {}
    for s_name in order:
        s = index.surfaces.index(s_name) if s_name not in unknown else None
        sel = by_surface.get(s, np.zeros(0, dtype=np.int64)) if s is not None else np.zeros(0, dtype=np.int64)
        n = len(sel)
        cols = np.zeros((n, 6 * nj), dtype=np.int64)
        type_counts: List[np.ndarray] = []
        for ji in range(nj):
            cols[:, 6 * ji:6 * ji + 6], tc = _per_caption(krows[ji][sel], codes[ji], arr)
            type_counts.append(tc)
        per_surface[s_name] = (n, cols, type_counts)
    # caption bootstrap: the draws depend only on (seed, n, reps), so surfaces with the same
    # caption count share one pass (their columns side by side)
    views = [(6 * ji + o, 6 * ji + o + 1, 6 * ji + o + 2) for ji in range(nj) for o in (0, 3)]
    stds: Dict[str, List[Tuple[float, float]]] = {}
    groups: Dict[int, List[str]] = {}
    for s_name, (n, _, _) in per_surface.items():
        if n == 0:
            stds[s_name] = [(0.0, 0.0) for _ in views]
        else:
            groups.setdefault(n, []).append(s_name)
    if groups and reps < 2:
        raise ValueError(f"bootstrap_stds: reps must be >= 2, got {reps}")
    for n, members in groups.items():
        big = np.concatenate([per_surface[s][1] for s in members], axis=1)
        sums = bootstrap_sums(big, reps, seed, workers)
        width = 6 * nj
        for g, s_name in enumerate(members):
            stds[s_name] = _stds_from_sums(sums[:, g * width:(g + 1) * width], n, views)
    cells: List[Cell] = []
    for s_name in order:
        n, cols, type_counts = per_surface[s_name]
        st = stds[s_name]
        for ji, jname in enumerate(names):
            tot = cols[:, 6 * ji:6 * ji + 6].sum(axis=0) if n else np.zeros(6, dtype=np.int64)
            y, no, q, ye, ne, qe = (int(v) for v in tot)
            all_t = CellStats.from_counts(n, y, no, q - y - no, *st[2 * ji])
            excl = CellStats.from_counts(n, ye, ne, qe - ye - ne, *st[2 * ji + 1])
            tc = type_counts[ji]
            by_type = {t: TypeCounts(int(tc[i, 0]), int(tc[i, 1]), int(tc[i, 2]))
                       for t, i in sorted((t, CAT_CODE[t]) for t in UNIT_CATEGORIES) if tc[i].sum()}
            cells.append(Cell(slice_name, jname, s_name, all_t, excl, by_type))
    # order cells judge-major, like the reference file (all surfaces of judge 1, then judge 2)
    cells.sort(key=lambda c: (names.index(c.judge), order.index(c.surface)))
    agreement: Dict[str, SliceAgreement] = {}
    if nj >= 2:
        agreement[slice_name] = SliceAgreement((names[0], names[1]),
                                               _agreement(index, answers[0], answers[1], krows[0], krows[1]))
    multi: Dict[str, JudgesAgreement] = {}
    if nj >= 2:
        multi[slice_name] = multi_agreement(index, answers, krows, names)
    report = {name: {"responses": a.responses, "answered": len(a.answered_rows), "failed": len(a.failures),
                     "unknown": a.unknown, "failures": [f.example() for f in a.failures[:20]]}
              for name, a in zip(names, answers)}
    report["__intersection__"] = {"captions": len(keys),
                                  "surfaces": {index.surfaces[s]: len(v) for s, v in by_surface.items()}}
    out = CellsFile(cells=cells, judge_agreement=agreement,
                    extraction={slice_name: dict(extraction)} if extraction else {}, judges_agreement=multi)
    out.validate(f"cells of slice {slice_name!r}")
    return out, report


def judge_agreement(index: RequestIndex, a: JudgeAnswers, b: JudgeAnswers, ka: Mapping[Tuple[int, str], str],
                    kb: Mapping[Tuple[int, str], str], keys: Sequence[Tuple[int, str]]) -> Dict[str, Agreement]:
    """Exact agreement joined on question id over ``keys`` (the intersection), per type and ``__all__``."""
    ra = np.array([index.ids[ka[k]] for k in keys], dtype=np.int64)
    rb = np.array([index.ids[kb[k]] for k in keys], dtype=np.int64)
    return _agreement(index, a, b, ra, rb)


def _agreement(index: RequestIndex, a: JudgeAnswers, b: JudgeAnswers, ra: np.ndarray,
               rb: np.ndarray) -> Dict[str, Agreement]:
    """:func:`judge_agreement` on aligned index rows (``ra[i]``, ``rb[i]``: the two judges'
    requests of one caption): rows with the same question indices compare position by position
    (vectorised), the others join on the raw unit index."""
    nt = len(UNIT_CATEGORIES)
    arr = index.arrays()
    qoff, qlen, qidx, cats = arr["qoff"], arr["qlen"], arr["qidx"], arr["cats"]
    ca, cb = np.frombuffer(a.codes, dtype=np.uint8), np.frombuffer(b.codes, dtype=np.uint8)
    joined = np.zeros(nt, dtype=np.int64)
    exact = np.zeros(nt, dtype=np.int64)
    ra = np.asarray(ra, dtype=np.int64)
    rb = np.asarray(rb, dtype=np.int64)
    same = qlen[ra] == qlen[rb]
    cand = np.flatnonzero(same)
    if len(cand):
        pa = question_positions(qoff, qlen, ra[cand])
        pb = question_positions(qoff, qlen, rb[cand])
        lens = qlen[ra[cand]].astype(np.int64)
        starts = np.cumsum(lens) - lens
        differ = np.add.reduceat((qidx[pa] != qidx[pb]).astype(np.int64), starts)
        same[cand[differ > 0]] = False
        ok = np.repeat(differ == 0, lens)
        t = cats[pa[ok]].astype(np.int64)
        joined += np.bincount(t, minlength=nt)
        exact += np.bincount(t[ca[pa[ok]] == cb[pb[ok]]], minlength=nt)
    for i in np.flatnonzero(~same):
        x, y = int(ra[i]), int(rb[i])
        oa, ob = int(qoff[x]), int(qoff[y])
        ia = qidx[oa:oa + int(qlen[x])].tolist()
        ib = qidx[ob:ob + int(qlen[y])].tolist()
        pos_b = {u: k for k, u in enumerate(ib)}
        for k, u in enumerate(ia):
            if u in pos_b:
                t = int(cats[oa + k])
                joined[t] += 1
                exact[t] += int(ca[oa + k] == cb[ob + pos_b[u]])
    out: Dict[str, Agreement] = {}
    tj, te = int(joined.sum()), int(exact.sum())
    out[AGREEMENT_ALL] = Agreement(tj, te, te / tj if tj else 0.0)
    for t in sorted(UNIT_CATEGORIES):
        i = CAT_CODE[t]
        if joined[i]:
            out[t] = Agreement(int(joined[i]), int(exact[i]), int(exact[i]) / int(joined[i]))
    return out


def join_questions(index: RequestIndex, rows: Sequence[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    """Questions every judge answered, joined on question id: ``(pos, cats)`` with ``pos[j]`` the
    question positions of judge ``j`` (an ``(m, Q)`` array) and ``cats`` their categories (judge 0's).

    ``rows[j][i]`` is judge ``j``'s index row of caption ``i`` (aligned, as :func:`_intersection`
    gives them). Captions whose requests have the same question indices in the same order for every
    judge compare position by position (vectorised); the others join on the raw unit index, in judge
    0's order, taking a judge's last question with that index (as :func:`_agreement` does, so with
    two judges the joined questions are ``judge_agreement``'s).
    """
    arr = index.arrays()
    qoff, qlen, qidx, cats = arr["qoff"], arr["qlen"], arr["qidx"], arr["cats"]
    rs = [np.asarray(r, dtype=np.int64) for r in rows]
    m = len(rs)
    r0 = rs[0]
    same = np.ones(len(r0), dtype=bool)
    for r in rs[1:]:
        same &= qlen[r] == qlen[r0]
    cand = np.flatnonzero(same)
    pos_parts: List[np.ndarray] = []
    cat_parts: List[np.ndarray] = []
    if len(cand):
        lens = qlen[r0[cand]].astype(np.int64)
        ps = [question_positions(qoff, qlen, r[cand]) for r in rs]
        bad = np.zeros(len(ps[0]), dtype=bool)
        for p in ps[1:]:
            bad |= qidx[p] != qidx[ps[0]]
        seg = np.repeat(np.arange(len(cand), dtype=np.int64), lens)
        differ = np.bincount(seg[bad], minlength=len(cand)) > 0
        same[cand[differ]] = False
        ok = ~differ[seg]
        pos_parts.append(np.stack([p[ok] for p in ps]) if len(ps[0]) else np.zeros((m, 0), dtype=np.int64))
        cat_parts.append(cats[ps[0][ok]])
    slow_pos: List[List[int]] = []
    for i in np.flatnonzero(~same):
        offs = [int(qoff[r[i]]) for r in rs]
        idxs = [qidx[o:o + int(qlen[r[i]])].tolist() for o, r in zip(offs, rs)]
        maps = [{u: k for k, u in enumerate(ix)} for ix in idxs[1:]]
        for k, u in enumerate(idxs[0]):
            if all(u in mp for mp in maps):
                slow_pos.append([offs[0] + k] + [o + mp[u] for o, mp in zip(offs[1:], maps)])
    if slow_pos:
        sp = np.array(slow_pos, dtype=np.int64).T
        pos_parts.append(sp)
        cat_parts.append(cats[sp[0]])
    if not pos_parts:
        return np.zeros((m, 0), dtype=np.int64), np.zeros(0, dtype=np.uint8)
    return np.concatenate(pos_parts, axis=1), np.concatenate(cat_parts)


def _none_if_nan(x: Optional[float]) -> Optional[float]:
    return None if x is None or not np.isfinite(x) else float(x)


def agreement_from_codes(codes: np.ndarray, cats: np.ndarray, names: Sequence[str]) -> JudgesAgreement:
    """:class:`JudgesAgreement` of an ``(m, Q)`` array of answer codes (0 yes, 1 no, 2 uncertain;
    row ``j`` = judge ``names[j]``, one column per joined question) with category codes ``cats``.

    Vectorised: per-category confusion matrices of every pair by one ``bincount`` each, and one
    ``bincount`` of (category, count row) — the statistics then run, once per category present and
    once for ``__all__``, on the distinct count rows weighted by their number of questions."""
    names = list(names)
    c = np.asarray(codes, dtype=np.uint8)
    m, nq = c.shape
    if m != len(names) or m < 2:
        raise ValueError(f"agreement_from_codes: {m} rows of codes for judges {names} (two or more needed)")
    keys = pair_keys(names)
    if len(set(keys)) != len(keys):
        raise InputError(f"judge names {names} give colliding pair keys {keys}: a judge name holds '|'")
    nt = len(UNIT_CATEGORIES)
    nl = len(AGREEMENT_LABELS)
    t = np.asarray(cats, dtype=np.int64)
    conf = {}
    for k, (a, b) in zip(keys, ((a, b) for a in range(m) for b in range(a + 1, m))):
        conf[k] = np.bincount(t * (nl * nl) + c[a].astype(np.int64) * nl + c[b],
                              minlength=nt * nl * nl).reshape(nt, nl, nl)
    # each question's count row (r_yes, r_no, r_uncertain) as one pattern number in base m + 1;
    # per category, the distinct patterns and how many questions have each: the statistics run on
    # these few weighted rows (at most (m + 1)**3), not on the questions
    base = m + 1
    powers = base ** np.arange(nl, dtype=np.int64)
    pid = rating_table(c, nl) @ powers
    npat = int(base ** nl)
    if nt * npat <= 1 << 24:
        flat = np.bincount(t * npat + pid, minlength=nt * npat)
        ukey = np.flatnonzero(flat)
        wts = flat[ukey]
    else:  # many judges: only the patterns that occur
        ukey, wts = np.unique(t * npat + pid, return_counts=True)
    ucat, upat = ukey // npat, ukey % npat

    def rows_of(p: np.ndarray) -> np.ndarray:
        return (p[:, None] // powers[None, :]) % base

    def entry(p: np.ndarray, w: np.ndarray, cms: Mapping[str, np.ndarray]) -> MultiAgreement:
        table = rows_of(p)
        n = int(w.sum())
        ea = int(w[table.max(axis=1) == m].sum())
        pairs = {}
        for k in keys:
            cm = cms[k]
            ex = int(np.trace(cm))
            pairs[k] = PairAgreement(n, ex, ex / n, _none_if_nan(cohen_kappa_table(cm)))
        return MultiAgreement(questions=n, exact_all=ea, exact_all_rate=ea / n,
                              fleiss_kappa=_none_if_nan(fleiss_kappa_table(table, w)),
                              gwet_ac1=_none_if_nan(gwet_ac1_table(table, w)),
                              krippendorff_alpha=_none_if_nan(krippendorff_alpha_table(table, w)), pairs=pairs)

    by_type: Dict[str, MultiAgreement] = {}
    if nq:
        allp, inv = np.unique(upat, return_inverse=True)
        by_type[AGREEMENT_ALL] = entry(allp, np.bincount(inv, weights=wts).astype(np.int64),
                                       {k: v.sum(axis=0) for k, v in conf.items()})
    for name in sorted(UNIT_CATEGORIES):
        i = CAT_CODE[name]
        sel = ucat == i
        if sel.any():
            by_type[name] = entry(upat[sel], wts[sel], {k: v[i] for k, v in conf.items()})
    return JudgesAgreement(judges=tuple(names), by_type=by_type, labels=AGREEMENT_LABELS)


def multi_agreement(index: RequestIndex, answers: Sequence[JudgeAnswers], rows: Sequence[np.ndarray],
                    names: Sequence[str]) -> JudgesAgreement:
    """Agreement among all judges (module docstring, item 5) on aligned index rows ``rows[j]`` of
    ``answers[j]`` (judge ``names[j]``), one per caption of the intersection."""
    pos, cats = join_questions(index, rows)
    codes = np.empty(pos.shape, dtype=np.uint8)
    for j, a in enumerate(answers):
        codes[j] = np.frombuffer(a.codes, dtype=np.uint8)[pos[j]]
    return agreement_from_codes(codes, cats, names)


def extraction_accounting(claims_responses: Sequence[PathLike], claims_requests: Sequence[PathLike],
                          surfaces: Optional[Sequence[str]] = None) -> Dict[str, Extraction]:
    """Per surface of the claims run (module docstring, item 6); surfaces in request order.
    A missing or empty claims response store, or a cut last line in one, is an error."""
    files, stores = store_file_list(claims_responses, "claims response")
    cut: List[CutLine] = []
    rows: Dict[str, int] = {}
    winners = scan_winners(files, cut, stores, rows)
    check_not_empty(rows, "claims response")
    check_cut_lines(cut)
    acc: Dict[str, List[int]] = {}
    seen: set = set()
    with RowReader(files) as reader:
        for _, _, req in iter_claims_requests(claims_requests):
            rid = req["request_id"]
            if rid in seen:
                continue
            seen.add(rid)
            inp = req["input"]
            s = str(inp.get("surface", ""))
            a = acc.setdefault(s, [0, 0, 0, 0, 0])  # requests, valid, zero, invalid, at cap
            a[0] += 1
            w = winners.get(rid)
            if w is None:
                a[3] += 1
                continue
            row = reader.read(w[2], w[3])
            parsed = row.get("parsed")
            if w[0] and isinstance(parsed, dict):
                a[1] += 1
                if not questions_from_units(inp["caption_id"], parsed.get("claimed_units")):
                    a[2] += 1
                continue
            a[3] += 1
            usage = row.get("usage") or {}
            cap = (req.get("decoding") or {}).get("max_tokens")
            if isinstance(usage, dict) and cap is not None and usage.get("completion_tokens") == cap:
                a[4] += 1
    names = list(surfaces) if surfaces else list(acc)
    return {s: Extraction(requests=acc[s][0], valid=acc[s][1], valid_zero_claims=acc[s][2], invalid=acc[s][3],
                          invalid_at_token_cap=acc[s][4]) for s in names if s in acc}



def check_cells_have_data(report: Dict[str, Any], names: List[str], surfaces: List[str], stores: List[str]) -> None:
    """No cell may be a number from no data: refuse when no caption, or no caption of a surface,
    is answered by every judge (the error says how many each judge answered)."""
    inter = report["__intersection__"]
    answered = ", ".join(f"{n}: {report[n]['answered']} answered, {report[n]['failed']} failed" for n in names)
    if not inter["captions"]:
        raise InputError(f"no caption is answered by every judge ({answered}); no cell can be computed",
                         path=", ".join(stores))
    empty = [s for s in surfaces if not inter["surfaces"].get(s)]
    if empty:
        raise InputError(f"surface(s) {', '.join(map(repr, empty))} have no caption answered by every judge "
                         f"({answered}); their cells would be numbers from no data: leave them out of --surface "
                         "or complete the runs", path=", ".join(stores))


__all__ = ["check_cells_have_data", "bootstrap_stds", "bootstrap_sums", "build_cells", "load_slice", "cells_from_answers", "judge_agreement",
           "extraction_accounting", "intersect", "join_questions", "agreement_from_codes", "multi_agreement"]
