"""Benchmark corpora resampled from the real captions under ``$CAPAUDIT_DATA_DIR`` (not a test).

``real_pools()``: short captions (COCO Karpathy test+val, nocaps val, CC3M validation alt-text,
img2dataset web alt-text: multilingual, noisy) and long descriptions (ImageInWords IIW-400,
DOCCI_Test, DCI_Test, CM_3600, LocNar_Eval). ``write_corpus(path, n, long_share, seed)`` writes a
JSONL of ``{"caption": ...}`` rows: each row is a long description with probability
``long_share`` (default 0.2: about 35 lexical units per caption on average, as the issue's corpus)
and a short caption otherwise.
"""

from __future__ import annotations

import csv
import json
import os
import random
from pathlib import Path
from typing import List, Optional, Tuple

LONG_FIELDS = (("IIW-400", ("IIW", "IIW-P5B")), ("DOCCI_Test", ("DOCCI", "IIW")), ("DCI_Test", ("IIW",)),
               ("CM_3600", ("IIW-P5B",)), ("LocNar_Eval", ("IIW-P5B",)))


def data_dir() -> Path:
    return Path(os.environ.get("CAPAUDIT_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data"))


def real_pools() -> Tuple[List[str], List[str]]:
    d = data_dir()
    long: List[str] = []
    for name, fields in LONG_FIELDS:
        for line in (d / "imageinwords" / name / "data.jsonl").read_text(encoding="utf-8").splitlines():
            obj = json.loads(line)
            long += [obj[f] for f in fields if isinstance(obj.get(f), str) and obj[f].strip()]
    short: List[str] = []
    for split in ("test", "val"):
        for caps in json.loads((d / "coco_karpathy_captions" / f"{split}_captions.json").read_text()).values():
            short += caps
    for item in json.loads((d / "nocaps_val" / "nocaps_corpus.json").read_text()):
        short += item["caption"]
    with open(d / "cc3m_validation" / "Validation_GCC-1.1.0-Validation.tsv", encoding="utf-8") as fh:
        short += [r[0] for r in csv.reader(fh, delimiter="\t") if r and r[0].strip()]
    import pyarrow.parquet as pq

    short += [t for t in pq.read_table(d / "img2dataset_alttext_sample" / "test_10000.parquet",
                                       columns=["TEXT"]).column("TEXT").to_pylist() if t and t.strip()]
    return short, long


def write_corpus(path: Path, n: int, long_share: float = 0.2, seed: int = 0) -> Path:
    short, long = real_pools()
    rng = random.Random(seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for _ in range(n):
            src = long if rng.random() < long_share else short
            fh.write(json.dumps({"caption": src[rng.randrange(len(src))]}, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def corpus(workdir: Path, n: int, long_share: float = 0.2, seed: int = 0) -> Path:
    """A cached corpus file ``<workdir>/corpus_<n>_<share>_<seed>.jsonl``."""
    p = Path(workdir) / f"corpus_{n}_{long_share:g}_{seed}.jsonl"
    return p if p.exists() else write_corpus(p, n, long_share, seed)


def read_captions(path: Path) -> List[str]:
    out = []
    loads = json.loads
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            out.append(loads(line)["caption"])
    return out


def run_measured(cmd, env=None, poll: float = 0.1) -> dict:
    """Run ``cmd``; wall seconds, CPU seconds (user + system of the process and of the children it
    waited for) and the peak RSS of the whole process tree, sampled every ``poll`` s with psutil
    (process-pool workers, Ray's raylet and workers)."""
    import subprocess
    import tempfile
    import time

    import psutil

    with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, stdout=fo, stderr=fe)
        ps = psutil.Process(proc.pid)
        peak = 0
        while True:
            pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            try:
                rss = 0
                for q in [ps] + ps.children(recursive=True):
                    try:
                        rss += q.memory_info().rss
                    except psutil.Error:
                        pass
                peak = max(peak, rss)
            except psutil.Error:
                pass
            time.sleep(poll)
        wall = time.monotonic() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        out, err = fo.read(), fe.read()
    return {"returncode": proc.returncode, "wall_s": round(wall, 2), "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
            "peak_rss_mb": round(peak / 2**20), "stdout": out.decode("utf-8", "replace"),
            "stderr": err.decode("utf-8", "replace")}


def capaudit_measured(*args: str) -> dict:
    """``python -m capaudit.cli ARGS`` in a fresh process (this checkout's ``lib``): wall s, CPU s and
    peak RSS (MB); a failed command raises with the end of its stderr."""
    import sys

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent / "lib"))
    r = run_measured([sys.executable, "-m", "capaudit.cli", *args], env=env)
    if r["returncode"] != 0:
        raise RuntimeError(f"capaudit {' '.join(args)} failed:\n{r['stderr'][-3000:]}")
    return {k: r[k] for k in ("wall_s", "cpu_s", "peak_rss_mb")}


def median(xs: list) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def ratio_line(name: str, runs: list, floors: list, target: float, floor_label: str, key: str = "wall_s") -> str:
    """``name / parse floor`` over interleaved (run, floor) pairs: median wall (``key``) and CPU ratios
    against the issue's target."""
    wall = [r[key] / max(f[key], 1e-9) for r, f in zip(runs, floors)]
    cpu = [r["cpu_s"] / max(f["cpu_s"], 1e-9) for r, f in zip(runs, floors)]
    ok = "OK" if median(wall) <= target else "ABOVE TARGET"
    record_target(f"{name} / parse floor ({floor_label})", median(wall), target, "x wall",
                  f"{median(cpu):.2f}x CPU; median of {len(wall)} interleaved pair(s)")
    return (f"{name} / parse floor ({floor_label}): {median(wall):.2f}x wall, {median(cpu):.2f}x CPU "
            f"(target <= {target:g}x: {ok}; median of {len(wall)} interleaved pair(s), wall ratios "
            f"{min(wall):.2f}-{max(wall):.2f}; summarize {median([r[key] for r in runs]):.2f} s, "
            f"floor {median([f[key] for f in floors]):.2f} s)")



def record_target(name: str, value: float, target: Optional[float], unit: str, detail: str = "") -> None:
    """Append one measured ratio (and the issue's target, ``value <= target``; ``None``: reported
    only) to the file named by ``CAPAUDIT_BENCH_TARGETS``, which ``make bench`` sets and
    ``benchmarks/targets.py`` prints at the end of the run. Without the variable: nothing."""
    dest = os.environ.get("CAPAUDIT_BENCH_TARGETS")
    if not dest:
        return
    with open(dest, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"name": name, "value": round(float(value), 3), "target": target, "unit": unit,
                             "detail": detail}) + "\n")
