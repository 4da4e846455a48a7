"""Issue 16: one writer per store (two real processes), all-or-nothing outputs, manifests checked.

* two ``capaudit llm run`` processes on one ``--out``: the second exits non-zero with one line and
  writes nothing, the store holds one row per request;
* a failing ``prompt-pools prepare`` leaves the previous pools and manifest untouched; a pool file
  that no longer matches its manifest (a truncated file) is refused by ``prompt-support``;
* a slice file that does not match its manifest is refused; request files are checked against
  their manifest by ``llm run``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capaudit.cli import main
from capaudit.errors import InputError, LockHeldError

REPO = Path(__file__).resolve().parents[1]
CAPAUDIT = REPO / ".venv" / "bin" / "capaudit"
EXE = [str(CAPAUDIT)] if CAPAUDIT.exists() else [sys.executable, "-m", "capaudit.cli"]


def _snapshot(root: Path):
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SLOW_BACKEND = '''
import json, time

def answer(messages, payload):
    time.sleep(0.15)
    return json.dumps({"x": "y"})
'''


def test_two_llm_run_processes_one_store(tmp_path):
    """The lock is taken before anything is sent: process 2 exits 3 with one line, writes nothing."""
    from capaudit.llm.requests import make_request, write_requests

    reqs = [make_request(task="probe", task_version=1, model="slow", revision=None, prompt_version=1,
                         schema={"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
                         messages=[{"role": "user", "content": f"q{i}"}], decoding={"max_tokens": 8},
                         input={"i": i}) for i in range(30)]
    write_requests(tmp_path / "requests.jsonl", reqs)
    (tmp_path / "slow_backend.py").write_text(SLOW_BACKEND)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "PYTHONWARNINGS": "ignore"}
    server = subprocess.Popen([*EXE, "serve", "--port", str(port), "--backend", "slow=slow_backend:answer"],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = None
    try:
        url = f"http://127.0.0.1:{port}"
        subprocess.run([*EXE, "llm", "wait", "--url", url, "--timeout", "60"], cwd=tmp_path, env=env, check=True,
                       capture_output=True)
        cmd = [*EXE, "llm", "run", "--requests", "requests.jsonl", "--out", "resp.jsonl", "--url", url,
               "--model", "slow", "--concurrency", "1", "--no-progress", "--resume"]
        first = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lock = tmp_path / "resp.jsonl.lock"
        t0 = time.monotonic()
        while not lock.exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() - t0 < 60
            time.sleep(0.05)
        before = (tmp_path / "resp.jsonl").read_bytes() if (tmp_path / "resp.jsonl").exists() else b""
        second = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert first.poll() is None, "the first run finished before the second started; the test proves nothing"
        assert second.returncode == 3, second.stderr
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and "in use by process" in lines[0] and "resp.jsonl.lock" in lines[0], lines
        out1, err1 = first.communicate(timeout=120)
        assert first.returncode == 0, err1
    finally:
        if first is not None and first.poll() is None:
            first.kill()
            first.wait(timeout=30)
        server.terminate()
        server.wait(timeout=30)
    rows = [json.loads(x) for x in (tmp_path / "resp.jsonl").read_text().splitlines()]
    assert len(rows) == 30 and len({r["request_id"] for r in rows}) == 30 and all(r["ok"] for r in rows)
    assert not lock.exists()
    assert before == b"" or (tmp_path / "resp.jsonl").read_bytes().startswith(before)


def test_exclusive_lock_between_processes(tmp_path):
    from capaudit.io.lock import ExclusiveLock

    lk = ExclusiveLock(tmp_path / "x.lock", what="thing").acquire()
    code = ("import sys; from capaudit.io.lock import ExclusiveLock\n"
            "try:\n    ExclusiveLock(sys.argv[1], what='thing').acquire()\nexcept Exception as e:\n"
            "    print(type(e).__name__, e); sys.exit(3)\n")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.lock")], capture_output=True, text=True)
    assert p.returncode == 3 and p.stdout.startswith("LockHeldError thing: in use by process") and str(os.getpid()) in p.stdout
    lk.release()
    assert not (tmp_path / "x.lock").exists()
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.lock")], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout  # free again (and its holder's exit released it)


# ---------------------------------------------------------------------------------------------
# prompt pools: all or nothing, manifest checked by the reader

def _pools(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("a red bus on a street\na photo of a dog\nan old station at night\n")
    (tmp_path / "b.txt").write_text("a cat on a mat\nthe city at night\ntwo dogs in a park\n")
    (tmp_path / "bad.txt").write_bytes(b"fine prompt here\nna\xefve prompt\n")
    (tmp_path / "pairs.jsonl").write_text("".join(
        json.dumps({"local_caption": f"a red bus number {i} at night", "reference_caption": "a dog"}) + "\n"
        for i in range(12)))
    out = tmp_path / "pools"
    assert main(["prompt-pools", "prepare", "--source", f"a={tmp_path / 'a.txt'}", "--source",
                 f"b={tmp_path / 'b.txt'}", "--out", str(out)]) == 0
    return out


def test_failing_prepare_leaves_previous_pools_untouched(tmp_path, capsys):
    out = _pools(tmp_path)
    man = json.loads((out / "manifest.json").read_text())
    assert set(man["files"]) == {"a.prompt_only.jsonl", "a.filtered.jsonl", "b.prompt_only.jsonl",
                                 "b.filtered.jsonl", "pool_overlap.tsv"}
    rec = man["files"]["a.filtered.jsonl"]
    assert rec["bytes"] == (out / "a.filtered.jsonl").stat().st_size
    assert rec["sha256"] == hashlib.sha256((out / "a.filtered.jsonl").read_bytes()).hexdigest()
    before = _snapshot(tmp_path)
    capsys.readouterr()
    # source a succeeds, then source bad fails on line 2: nothing of this run may land
    rc = main(["prompt-pools", "prepare", "--source", f"a={tmp_path / 'b.txt'}", "--source",
               f"bad={tmp_path / 'bad.txt'}", "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and f"{tmp_path / 'bad.txt'}:2" in err[0] and "UTF-8" in err[0]
    assert _snapshot(tmp_path) == before
    assert not any(p.name.startswith(".staging") for p in out.iterdir())


def test_prompt_support_refuses_a_pool_that_does_not_match_its_manifest(tmp_path, capsys):
    out = _pools(tmp_path)
    args = ["prompt-support", "--pairs", str(tmp_path / "pairs.jsonl"), "--pool", f"a={out / 'a.filtered.jsonl'}",
            "--out", str(tmp_path / "s.tsv"), "--reps", "50", "--block-size", "4"]
    assert main(args) == 0
    capsys.readouterr()
    data = (out / "a.filtered.jsonl").read_bytes()
    (out / "a.filtered.jsonl").write_bytes(data[: len(data) // 2])  # what an interrupted writer leaves
    rc = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1
    assert f"{out / 'a.filtered.jsonl'}" in err[0] and "does not match its manifest" in err[0] and "bytes" in err[0]
    # same size, other bytes: the sha256 catches it
    (out / "a.filtered.jsonl").write_bytes(data.replace(b"a", b"A", 1))
    assert main(args) == 1
    assert "sha256 differs" in capsys.readouterr().err


def test_old_manifest_without_checksums_is_refused(tmp_path, capsys):
    out = _pools(tmp_path)
    man = json.loads((out / "manifest.json").read_text())
    del man["files"]
    (out / "manifest.json").write_text(json.dumps(man))
    rc = main(["prompt-support", "--pairs", str(tmp_path / "pairs.jsonl"), "--pool", f"a={out / 'a.filtered.jsonl'}",
               "--out", str(tmp_path / "s.tsv")])
    assert rc == 1 and "records no checksum" in capsys.readouterr().err


def test_check_file_and_manifest_helpers(tmp_path):
    from capaudit.io.manifest import check_file, files_block

    f = tmp_path / "x.jsonl"
    f.write_text("abc\n")
    assert check_file(f) is False  # no manifest: nothing to check
    (tmp_path / "manifest.json").write_text(json.dumps({"files": files_block([f])}))
    assert check_file(f) is True
    f.write_text("abd\n")
    with pytest.raises(InputError, match="sha256 differs"):
        check_file(f)
    (tmp_path / "manifest.json").write_text('{"files": {"x.jsonl": ')
    with pytest.raises(InputError, match=r"manifest.json:1: manifest is not valid JSON"):
        check_file(f)


def test_slice_file_checked_against_its_manifest(tmp_path, capsys):
    from capaudit.surfaces.slices import SliceManifest

    for name, cap in (("a", "a red bus"), ("b", "a dog")):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps({"id": i, "caption": f"{cap} {i}"}) + "\n"
                                                        for i in range(5)))
    assert main(["slice", "--surface", f"a={tmp_path / 'a.jsonl'}:caption:id", "--surface",
                 f"b={tmp_path / 'b.jsonl'}:caption:id", "--out", str(tmp_path / "sl")]) == 0
    folder = tmp_path / "sl" / "a_vs_b" / "nall_seed0"
    m = SliceManifest.load(folder)
    assert len(m.pairs()) == 5
    with open(folder / "pairs.jsonl", "a") as fh:
        fh.write('{"extra": 1}\n')
    with pytest.raises(InputError, match="pairs.jsonl.*does not match its manifest"):
        m.verify("pairs.jsonl")
    # prompt-support reads pairs.jsonl of a slice: refused too
    (tmp_path / "p.txt").write_text("a red bus\n")
    capsys.readouterr()
    assert main(["prompt-support", "--pairs", str(folder / "pairs.jsonl"), "--pool", f"p={tmp_path / 'p.txt'}",
                 "--out", str(tmp_path / "s.tsv")]) == 1
    assert "does not match its manifest" in capsys.readouterr().err


def test_llm_run_checks_requests_against_their_manifest(tmp_path, capsys):
    src = tmp_path / "caps.jsonl"
    src.write_text("".join(json.dumps({"caption": f"a dog number {i}"}) + "\n" for i in range(3)))
    req = tmp_path / "requests.jsonl"
    assert main(["claims", "build", "--input", str(src), "--surface", "s", "--model", "m", "--out", str(req)]) == 0
    man = json.loads((tmp_path / "requests.manifest.json").read_text())
    assert man["files"]["requests.jsonl"]["bytes"] == req.stat().st_size
    assert man["counts"] == {"usable": 3, "emitted": 3, "rows": 3, "rows_missing_caption_field": 0,
                             "rows_empty_caption": 0}
    lines = req.read_text().splitlines()
    req.write_text("\n".join(lines[:2]) + "\n")  # a request file cut short
    capsys.readouterr()
    rc = main(["llm", "run", "--requests", str(req), "--out", str(tmp_path / "resp.jsonl"), "--url",
               "http://127.0.0.1:9", "--model", "m", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "does not match its manifest" in err[0] and str(req) in err[0]
    assert not (tmp_path / "resp.jsonl").exists() and not (tmp_path / "resp.jsonl.lock").exists()


def test_llm_run_model_mismatch_is_found_before_anything_is_sent(tmp_path, capsys):
    src = tmp_path / "caps.jsonl"
    src.write_text(json.dumps({"caption": "a dog"}) + "\n")
    req = tmp_path / "requests.jsonl"
    assert main(["claims", "build", "--input", str(src), "--surface", "s", "--out", str(req)]) == 0
    capsys.readouterr()
    rc = main(["llm", "run", "--requests", str(req), "--out", str(tmp_path / "resp.jsonl"), "--url",
               "http://127.0.0.1:9", "--model", "other", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and f"{req}:1: field 'model_hint'" in err and "--model 'other'" in err
    assert not (tmp_path / "resp.jsonl").exists()


def test_atomic_writers_leave_nothing_on_failure(tmp_path):
    from capaudit.io.atomic import StagedFiles, atomic_path

    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "new" / "deeper" / "x.json") as tmp:
            tmp.write_text("partial")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []  # neither the file nor the folders made for it
    (tmp_path / "keep.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with StagedFiles(tmp_path) as st:
            st.path("keep.txt").write_text("new")
            st.path("other.txt").write_text("new")
            raise RuntimeError("boom")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"] and (tmp_path / "keep.txt").read_text() == "old"
    with StagedFiles(tmp_path) as st:
        st.path("keep.txt").write_text("new")
        st.commit()
    assert (tmp_path / "keep.txt").read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_store_lock_released_on_close_and_lock_is_idempotent(tmp_path):
    from capaudit.llm.store import ResponseStore

    st = ResponseStore(tmp_path / "r.jsonl")
    st.lock().lock()
    other = ResponseStore(tmp_path / "r.jsonl")
    with pytest.raises(LockHeldError):
        other.lock()
    st.close()
    other.lock()
    other.close()
    d = ResponseStore(str(tmp_path / "store") + "/")
    d.lock()
    assert (tmp_path / "store.lock").exists() and not (tmp_path / "store").exists()  # nothing written yet
    d.close()
