"""End to end in a real headless Chromium at 1280×800: voila serves the annotation notebook for a
small study whose claims come from the heuristic extractor; an annotator logs in, consents and answers
every item of every batch by keyboard only. On every screen every control is inside the viewport and
the claim shown is a readable rendering of the caption span; the kernel is killed and the page
reloaded mid-way, and the UI resumes at the first unanswered item with exactly the judgments stored.
Screenshots of each phase and the median seconds per judgment go to outputs/demo/human/."""

from __future__ import annotations

import json
import os
import signal
import statistics
import time
from pathlib import Path

import pytest

from capaudit.human.claim_display import is_faithful
from capaudit.human.serve import prepare_notebook
from capaudit.human.simulate import fixture_study

from _browser import CHROMIUM, FLAGS, kernel_processes, playwright_or_skip, voila_server

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "outputs" / "demo" / "human"
VIEWPORT = {"width": 1280, "height": 800}
PAUSE = 0.45  # past the double-key guard of a new screen


def _controls_in_view(page) -> list:
    """Every visible control of the annotator outside the viewport (empty: all inside)."""
    return page.evaluate("""() => {
        const out = [];
        for (const el of document.querySelectorAll('.capaudit-annotator button, .capaudit-annotator input,'
                                                    + ' .capaudit-annotator textarea')) {
            if (el.closest('.capaudit-instructions')) continue;
            const r = el.getBoundingClientRect();
            if (r.width === 0 && r.height === 0) continue;
            if (r.left < 0 || r.top < 0 || r.right > window.innerWidth || r.bottom > window.innerHeight)
                out.push((el.innerText || el.placeholder || el.tagName) + ' @ ' + Math.round(r.top) + '-'
                         + Math.round(r.bottom));
        }
        return out;
    }""")


def _where(page) -> str:
    return page.locator(".capaudit-progress").inner_text()


def _wait_change(page, before: str) -> None:
    page.wait_for_function("(b) => { const e = document.querySelector('.capaudit-progress');"
                           " return e && e.innerText !== b; }", arg=before, timeout=30_000)
    time.sleep(PAUSE)


def test_keyboard_only_study_at_1280x800(tmp_path: Path) -> None:
    sync_api = playwright_or_skip()
    st, people, _ = fixture_study(tmp_path, n_images=10, humans=1, labels_per_item=1, claims_per_stratum=1,
                                  missing_images=2, target_items=6, max_items=6, batch_size=3, claims="extractor")
    code = people[0].code
    tasks = st.login(code).tasks()
    assert len(tasks) == 18 and {t.batch for t in tasks} == {0, 1}
    ipynb = prepare_notebook(st.path, tmp_path / "serve")
    shots = OUT / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    taken: set = set()
    claims_seen = []
    try:
        with voila_server(ipynb, tmp_path, tmp_path / "voila.log") as (proc, url):
            with sync_api.sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                page = browser.new_page(viewport=VIEWPORT)
                page.goto(url, timeout=90_000)
                page.wait_for_selector(".capaudit-code input", timeout=90_000)
                assert not _controls_in_view(page)
                page.screenshot(path=str(shots / "login.png"))
                page.locator(".capaudit-code input").type(code)
                page.keyboard.press("Enter")  # Enter in the invite field starts
                page.wait_for_selector(".capaudit-consent", timeout=30_000)
                page.screenshot(path=str(shots / "consent.png"))
                time.sleep(PAUSE)
                page.keyboard.press("Enter")  # consent by keyboard
                page.wait_for_selector(".capaudit-right", timeout=30_000)
                time.sleep(PAUSE)
                page.click(".capaudit-help-toggle")
                page.wait_for_selector(".capaudit-instructions >> text=Claim types", timeout=10_000)
                page.screenshot(path=str(shots / "instructions.png"))
                page.click(".capaudit-help-toggle")
                time.sleep(PAUSE)
                answered = 0
                while answered < len(tasks):
                    if answered == 7:  # mid-batch: kill the kernel, reload, log in again: resume here
                        for k in kernel_processes(proc.pid):
                            try:
                                os.kill(k.pid, signal.SIGKILL)
                            except ProcessLookupError:  # exited between the listing and the kill
                                pass
                        page.reload(timeout=90_000)
                        page.wait_for_selector(".capaudit-code input", timeout=90_000)
                        page.locator(".capaudit-code input").type(code)
                        page.keyboard.press("Enter")
                        page.wait_for_selector(".capaudit-right", timeout=30_000)
                        time.sleep(PAUSE)
                        assert st.store.one("SELECT COUNT(*) AS k FROM annotations")["k"] == 7
                    t = tasks[answered]
                    where = _where(page)
                    assert where.startswith(f"Batch {t.batch + 1} of 2") and f"item {t.in_batch + 1} of 3" in where, where
                    outside = _controls_in_view(page)
                    assert not outside, (t.phase, outside)
                    missing = page.locator(".capaudit-unavailable").count() > 0
                    if t.phase != "pair":
                        claim = page.locator(".capaudit-claimtext").inner_text()
                        item = st.item(t.item_id)
                        assert is_faithful(claim, item["span"]), (claim, item["span"])
                        if t.phase == "caption":
                            assert page.locator("mark.capaudit-claim").inner_text() == item["span"]
                        claims_seen.append(claim)
                    else:
                        assert page.locator(".capaudit-claimtext").count() == 0
                    name = f"{t.phase}{'_missing_image' if missing else ''}"
                    if name not in taken:
                        page.screenshot(path=str(shots / f"{name}.png"))
                        taken.add(name)
                    keys = {"caption": ["1", "1", "1", "4"], "image": ["1", "5"] if not missing else ["1"],
                            "pair": ["3", "4", "2"] if not missing else ["1"]}[t.phase]
                    for k in keys:
                        page.keyboard.press(k)
                        time.sleep(0.15)
                    if not (t.phase == "pair" and missing):  # "the image did not load" saves at once
                        page.keyboard.press("Enter")
                    answered += 1
                    if answered < len(tasks):
                        _wait_change(page, where)
                page.wait_for_selector("text=All done", timeout=30_000)
                page.screenshot(path=str(shots / "done.png"))
                browser.close()
            rows = st.latest_annotations()
            assert len(rows) == 18 and all(r["revision"] == 1 for r in rows)
            by_phase = {ph: [r for r in rows if r["phase"] == ph] for ph in ("caption", "image", "pair")}
            assert all(r["confidence"] == 4 for r in by_phase["caption"])  # the optional field was reachable
            shown = [r for r in by_phase["image"] if r["image_support"] == "yes"]
            assert shown and all(r["confidence"] == 5 for r in shown)
            assert {r["image_support"] for r in by_phase["image"]} == {"yes", "image_unavailable"}
            assert {(r["salient_coverage"], r["control_usefulness"]) for r in by_phase["pair"]
                    if not r["image_unavailable"]} == {(3, 4)}
            assert {"caption", "image", "pair", "image_missing_image"} <= taken
            seconds = [r["elapsed_ms"] / 1000 for r in rows]
            (OUT / "e2e_timing.json").write_text(json.dumps({
                "judgments": len(rows), "median_seconds_per_judgment": statistics.median(seconds),
                "viewport": VIEWPORT, "screenshots": sorted(str(p.relative_to(REPO)) for p in shots.glob("*.png")),
                "claims_shown": claims_seen}, indent=1), encoding="utf-8")
    finally:
        st.close()
