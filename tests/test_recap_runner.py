"""The captioning runner against a fault-injecting vision server: 500s, timeouts, empty captions,
broken images, a real SIGKILL mid-run and ``--resume`` (reference-spec §6; §13.6)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from capaudit.cli import main
from capaudit.errors import InputError, LockHeldError
from capaudit.llm.store import iter_rows
from capaudit.recap.export import collect, export_surface, read_failures
from capaudit.recap.inputs import open_images
from capaudit.recap.policies import load_policy
from capaudit.recap.runner import StoreLayout, _StoreLock, recap
from capaudit.surfaces import load_surface
from test_recap_support import VisionFaultServer, make_images, wait_for

POLICIES = Path(__file__).resolve().parents[1] / "params" / "policies"
FAST = dict(progress=False, backoff_base=0.01, backoff_max=0.05, handle_signals=False)


def _broken_files(folder: Path) -> None:
    """A zero-byte file, a text file named .png and a JPEG cut in half."""
    (folder / "zero.jpg").write_bytes(b"")
    (folder / "fake.png").write_text("this is not an image")
    buf = io.BytesIO()
    Image.new("RGB", (300, 200), (9, 9, 9)).save(buf, "JPEG", quality=90)
    (folder / "trunc.jpg").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])


def test_faults_failures_and_resume(tmp_path: Path):
    imgs = tmp_path / "imgs"
    make_images(imgs, 8)
    _broken_files(imgs)
    plan = {1: "500x2", 2: "hang1", 3: "empty", 4: "textnone", 5: "500", 6: "flaky"}
    pol = load_policy("photorealistic", POLICIES)
    store = tmp_path / "store"
    with VisionFaultServer(plan, hang=2.0) as srv:
        st = recap([open_images(imgs)], pol, store, [srv.url], "vision-test", concurrency=3, timeout=0.5,
                   retries=2, reasks=1, workers=1, **FAST)
        # ok: 0, 7; 500 twice then ok: 1; timeout then ok: 2 -> 4 captions
        assert (st.images, st.answered, st.failed, st.image_failed) == (11, 4, 4, 3)
        assert st.failed_by_kind == {"empty": 2, "http": 2}
        assert st.image_failed_by_stage == {"read": 1, "decode": 2}
        assert srv.calls(1) == 3 and srv.calls(2) == 2
        assert srv.calls(3) == 2 and srv.calls(4) == 2   # one re-ask each, then failed
        assert srv.calls(5) == 3                          # 1 + 2 retries
        # policy runs send no sampling settings (§6)
        assert all("temperature" not in p and p["max_tokens"] == 512 for p in srv.payloads)

        rows, failures = collect(store)
        assert [r["image_id"] for r in rows] == ["img_000", "img_001", "img_002", "img_007"]
        assert rows[0]["caption"] == "Test image 0 shows a flat colour."   # TEXT: none removed
        assert rows[0]["prompt_tokens"] == 100 and rows[0]["completion_tokens"] == 7
        reasons = {f["image_id"]: (f["error_kind"], f["reason"]) for f in failures}
        assert set(reasons) == {"img_003", "img_004", "img_005", "img_006", "zero", "fake", "trunc"}
        assert reasons["img_003"][0] == "empty" and "empty caption" in reasons["img_003"][1]
        assert reasons["img_004"][0] == "empty" and "TEXT" in reasons["img_004"][1]
        assert reasons["img_005"][0] == "http" and reasons["img_005"][1].startswith("HTTP 500")
        assert reasons["zero"] == ("image", f"{(imgs / 'zero.jpg').resolve()}: zero-byte file")
        assert reasons["fake"][1].endswith("fake.png: unsupported or unrecognised image format")
        assert "truncated JPEG" in reasons["trunc"][1] and str(imgs / "trunc.jpg") in reasons["trunc"][1]

        # without --resume a non-empty store is refused; with it, only unanswered images are asked
        with pytest.raises(InputError, match="pass --resume"):
            recap([open_images(imgs)], pol, store, [srv.url], "vision-test", workers=1, **FAST)
        srv.heal = True
        before = len(srv.log)
        st2 = recap([open_images(imgs)], pol, store, [srv.url], "vision-test", concurrency=3, timeout=0.5,
                    retries=0, reasks=0, workers=1, resume=True, **FAST)
        asked = sorted({i for i, _ in srv.log[before:]})
        assert asked == [3, 4, 5, 6]                      # answered images are skipped without a request
        assert (st2.skipped_answered, st2.answered, st2.image_failed) == (4, 1, 3)  # only 'flaky' healed

    res = export_surface(store, tmp_path / "out" / "surface.jsonl")
    assert (res.rows, res.failures) == (5, 6)
    lines = [json.loads(x) for x in (tmp_path / "out" / "surface.jsonl").read_text().splitlines()]
    assert list(lines[0]) == ["image_id", "image_path", "caption", "model", "policy", "policy_version",
                              "prompt_version", "backend", "image_key", "source", "prompt_tokens", "completion_tokens",
                              "usage_unit", "finish_reason", "timestamp", "request_id"]
    assert lines[0]["source"] == str(imgs) and lines[0]["finish_reason"] == "stop"
    assert {x["model"] for x in lines} == {"vision-test"} and {x["backend"] for x in lines} == {"model"}
    assert all(x["timestamp"].endswith("Z") for x in lines)
    assert {f["image_id"] for f in read_failures(res.failures_path)} == {"img_003", "img_004", "img_005",
                                                                         "zero", "fake", "trunc"}
    # a params file can name the export directly
    surf = load_surface({"name": "s", "file": str(tmp_path / "out" / "surface.jsonl"), "format": "jsonl",
                         "caption_field": "caption", "key_field": "image_id", "image_field": "image_path"})
    assert len(surf) == 5 and surf.frame["key"].tolist()[0] == "img_000"
    pq_res = export_surface(store, tmp_path / "out" / "surface.parquet")
    surf = load_surface({"name": "s", "file": str(pq_res.path), "format": "parquet", "caption_field": "caption",
                         "key_field": "image_id"})
    assert len(surf) == 5


def _run_stats(stderr: str) -> dict:
    """The statistics of ``recap run``'s summary line (``capaudit recap run: ...; stats {json}``)."""
    line = next(ln for ln in stderr.splitlines() if ln.startswith("capaudit recap run: "))
    return json.loads(line.split("; stats ", 1)[1])


def test_store_identity_and_lock(tmp_path: Path):
    imgs = tmp_path / "imgs"
    make_images(imgs, 2)
    with VisionFaultServer() as srv:
        recap([open_images(imgs)], load_policy("naive", POLICIES), tmp_path / "s", [srv.url], "m", workers=0, **FAST)
        assert {p["temperature"] for p in srv.payloads} == {1.0}
        assert {(p["top_k"], p["top_p"]) for p in srv.payloads} == {(20, 0.95)}
        with pytest.raises(InputError, match="belongs to another run.*policy: store 'naive', run 'naive-greedy'"):
            recap([open_images(imgs)], load_policy("naive-greedy", POLICIES), tmp_path / "s", [srv.url], "m",
                  workers=0, resume=True, **FAST)
        bad = tmp_path / "m.jsonl"
        bad.write_text(json.dumps({"image_path": str(imgs / "img_000.png")}) + "\n{oops\n")
        with pytest.raises(InputError, match=r"m\.jsonl:2: invalid JSON"):  # bad input stops the run, named
            recap([open_images(bad)], load_policy("naive", POLICIES), tmp_path / "s2", [srv.url], "m", workers=0,
                  **FAST)
        with pytest.raises(ValueError, match="must start with http"):
            recap([open_images(imgs)], load_policy("naive", POLICIES), tmp_path / "s3", ["localhost:1"], "m", **FAST)
        assert not (tmp_path / "s3").exists()
        with _StoreLock(StoreLayout(tmp_path / "s").lock):
            with pytest.raises(LockHeldError, match="another recap run"):
                recap([open_images(imgs)], load_policy("naive", POLICIES), tmp_path / "s", [srv.url], "m",
                      workers=0, resume=True, **FAST)


def test_cli_contract_file_mode_and_duplicates(tmp_path: Path, capsys):
    imgs = tmp_path / "imgs"
    make_images(imgs, 3)
    make_images(imgs / "again", 1, start=0)  # a second img_000 under a subfolder: another id (again/img_000)
    (imgs / "img_001.jpg").write_bytes((imgs / "img_001.png").read_bytes())  # same stem twice: duplicate id
    with VisionFaultServer() as srv:
        rc = main(["recap", "run", "--images", str(imgs), "--policy", "naive-greedy", "--policies-dir", str(POLICIES),
                   "--url", srv.url, "--model", "vision-test", "--out", str(tmp_path / "st"), "--image-mode", "file",
                   "--concurrency", "2", "--timeout", "5", "--retries", "1", "--no-progress", "--workers", "1"])
        assert rc == 0
        err = capsys.readouterr().err
        stats = _run_stats(err)
        assert stats["duplicate_ids"] == 1 and stats["answered"] == 4
        assert {p["temperature"] for p in srv.payloads} == {0.0} and all("top_k" not in p for p in srv.payloads)
        rc = main(["recap", "run", "--images", str(imgs), "--policy", "naive-greedy", "--policies-dir", str(POLICIES),
                   "--url", srv.url, "--model", "vision-test", "--out", str(tmp_path / "st"), "--image-mode", "file",
                   "--resume", "--no-progress", "--workers", "1"])
        assert rc == 0 and len(srv.log) == 4
    rc = main(["recap", "export", "--store", str(tmp_path / "st"), "--out", str(tmp_path / "naive.jsonl")])
    assert rc == 0
    rows = [json.loads(x) for x in (tmp_path / "naive.jsonl").read_text().splitlines()]
    assert [r["image_id"] for r in rows] == ["again/img_000", "img_000", "img_001", "img_002"]
    assert rows[1]["image_path"] == str((imgs / "img_000.png").resolve()) and rows[1]["policy"] == "naive-greedy"
    manifest = json.loads((tmp_path / "naive.jsonl.manifest.json").read_text())
    assert manifest["rows"] == 4 and manifest["surface_spec"]["key_field"] == "image_id"
    assert manifest["run"]["image_mode"] == "file"
    rc = main(["recap", "export", "--store", str(tmp_path / "st"), "--out", str(tmp_path / "naive.csv")])
    assert rc == 1 and "use .jsonl or .parquet" in capsys.readouterr().err


def test_mask_pii_on_export(tmp_path: Path):
    store = tmp_path / "st"
    layout = StoreLayout(store)
    layout.responses.mkdir(parents=True)
    row = {"request_id": "r1", "ok": True, "started_at": "2026-01-01T00:00:00.000Z",
           "finished_at": "2026-01-01T00:00:01.000Z", "model": "m", "usage": {"prompt_tokens": 1},
           "caption": "A poster reading Call 555-123-4567 or write to ann@example.org.",
           "recap": {"image_id": "a", "image_path": "/x/a.jpg", "policy": "naive", "policy_version": 1}}
    (layout.responses / "part.jsonl").write_text(json.dumps(row) + "\n")
    res = export_surface(store, tmp_path / "masked.jsonl", mask=True)
    out = json.loads((tmp_path / "masked.jsonl").read_text())
    assert out["caption"] == "A poster reading Call [phone] or write to [email]." and out["pii_masked"] == 2
    assert res.pii_spans == {"[phone]": 1, "[email]": 1}


def _children(pid: int) -> list:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


@pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and SIGKILL")
def test_sigkill_mid_run_then_resume(tmp_path: Path):
    imgs = tmp_path / "imgs"
    n = 60
    make_images(imgs, n)
    store = tmp_path / "store"
    with VisionFaultServer(latency=0.05) as srv:
        cmd = [sys.executable, "-m", "capaudit.cli", "recap", "run", "--images", str(imgs), "--policy",
               "photorealistic", "--policies-dir", str(POLICIES), "--url", srv.url, "--model", "vision-test",
               "--out", str(store), "--concurrency", "2", "--workers", "2", "--no-progress"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        responses = StoreLayout(store).responses

        def on_disk() -> int:
            return sum(1 for r in iter_rows(str(responses) + os.sep) if r["ok"]) if responses.is_dir() else 0

        assert wait_for(lambda: on_disk() >= 5, timeout=60), proc.stderr.read().decode()[-2000:] if proc.poll() else ""
        workers = _children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL
        kept = {r["recap"]["image_id"] for r in iter_rows(str(responses) + os.sep) if r["ok"]}
        assert 5 <= len(kept) < n
        # the preprocessing workers die with their parent (no orphans)
        assert wait_for(lambda: not any(Path(f"/proc/{w}").exists() and
                                        "zombie" not in Path(f"/proc/{w}/status").read_text().lower()
                                        for w in workers), timeout=10)
        asked_before = len(srv.log)
        done = subprocess.run(cmd + ["--resume"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        stats = _run_stats(done.stderr)
        assert stats["skipped_answered"] == len(kept)
        asked_after = {srv.log[k][0] for k in range(asked_before, len(srv.log))}
        assert not asked_after & {int(k.split("_")[1]) for k in kept}  # nothing answered on disk is asked again
    rows, failures = collect(store)
    assert [r["image_id"] for r in rows] == [f"img_{i:03d}" for i in range(n)] and failures == []
    assert len({r["request_id"] for r in rows}) == n


# --- issue 19: nothing left behind on bad input; failures make the exit status; cut lines refused ---
def _run_argv(imgs: Path, store: Path, url: str, *extra: str) -> list:
    return ["recap", "run", "--images", str(imgs), "--policy", "naive-greedy", "--policies-dir", str(POLICIES),
            "--url", url, "--model", "vision-test", "--out", str(store), "--timeout", "5", "--retries", "0",
            "--backoff", "0.01", "--no-progress", "--workers", "0", *extra]


def test_bad_manifest_leaves_no_store_and_logs_no_run(tmp_path: Path, capsys):
    imgs = tmp_path / "imgs"
    make_images(imgs, 2)
    bad = tmp_path / "m.jsonl"
    bad.write_text(json.dumps({"image_path": str(imgs / "img_000.png")}) + "\n{oops\n")
    store = tmp_path / "out" / "store"
    with VisionFaultServer() as srv:
        assert main(_run_argv(bad, store, srv.url)) == 1
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
        assert len(err) == 1 and f"{bad}:2: invalid JSON" in err[0]
        assert not (tmp_path / "out").exists() and srv.log == []  # checked before the store is touched
        # an existing store refused (another run's identity) is left exactly as it was
        assert main(_run_argv(imgs, store, srv.url)) == 0
        before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
        other_policy = [a if a != "naive-greedy" else "naive" for a in _run_argv(imgs, store, srv.url, "--resume")]
        assert main(other_policy) == 1
        assert "belongs to another run" in capsys.readouterr().err
        assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
        assert len(StoreLayout(store).runs_log.read_text().splitlines()) == 1


def test_input_error_before_any_work_removes_what_the_run_created(tmp_path: Path):
    from capaudit.recap.preprocess import Job

    def broken():
        raise InputError("a.jsonl:1: invalid JSON")
        yield Job(image_id="x", image_path="x")  # pragma: no cover

    store = tmp_path / "a" / "b" / "store"
    with VisionFaultServer() as srv:
        with pytest.raises(InputError, match="invalid JSON"):
            recap([broken()], load_policy("naive", POLICIES), store, [srv.url], "m", workers=0, **FAST)
    assert not (tmp_path / "a").exists()


def test_failures_exit_3_unless_allowed_and_the_line_counts_them(tmp_path: Path, capsys):
    imgs = tmp_path / "imgs"
    make_images(imgs, 3)
    (imgs / "zero.jpg").write_bytes(b"")
    store = tmp_path / "store"
    stats_json = tmp_path / "stats.json"
    with VisionFaultServer({1: "500"}) as srv:
        # --no-probe: the injected 500 hits the first request, which would otherwise stop the run
        assert main(_run_argv(imgs, store, srv.url, "--stats-json", str(stats_json), "--no-probe")) == 3
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert line.startswith("capaudit recap run: 4 images: 2 captioned, 2 failed (http 1, image 1)")
        assert "rerun with --resume" in line and _run_stats(line)["failed_total"] == 2
        assert json.loads(stats_json.read_text())["failed_total"] == 2
        assert main(_run_argv(imgs, store, srv.url, "--resume", "--allow-failures", "--no-probe")) == 0
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert "2 failed (http 1, image 1)" in line and "failures allowed (--allow-failures)" in line
        srv.plan.clear()
        (imgs / "zero.jpg").unlink()
        assert main(_run_argv(imgs, store, srv.url, "--resume")) == 0
        line = capsys.readouterr().err.strip().splitlines()[-1]
        assert "1 captioned, 0 failed, 2 skipped (answered before)" in line


def test_export_refuses_a_cut_line_unless_a_run_is_writing(tmp_path: Path, capsys):
    imgs = tmp_path / "imgs"
    make_images(imgs, 3)
    store = tmp_path / "store"
    with VisionFaultServer() as srv:
        recap([open_images(imgs)], load_policy("naive", POLICIES), store, [srv.url], "m", workers=0, **FAST)
    part = next(StoreLayout(store).responses.glob("*.jsonl"))
    with open(part, "ab") as fh:
        fh.write(b'{"request_id": "r9", "ok": tr')
    out = tmp_path / "s.jsonl"
    assert main(["recap", "export", "--store", str(store), "--out", str(out)]) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and f"{part}:4: last line is cut" in err[0] and "--resume" in err[0]
    assert not out.exists()
    with _StoreLock(StoreLayout(store).lock):  # a run in progress: a snapshot, said out loud
        assert main(["recap", "export", "--store", str(store), "--out", str(out)]) == 0
    assert "IN PROGRESS: a run is still writing" in capsys.readouterr().err
    man = json.loads((tmp_path / "s.jsonl.manifest.json").read_text())
    assert man["rows"] == 3 and man["store_in_progress"] is True
    assert man["cut_last_lines"] == [{"file": str(part), "line": 4}]
