"""End to end in a real headless Chromium: voila serves the annotation notebook for a fresh study,
three items are answered with the keyboard and the mouse (one by double click), the kernel is killed,
the page reloaded, and the UI resumes at the fourth item with exactly those judgments stored."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from capaudit.human.protocol import claim_text
from capaudit.human.serve import prepare_notebook, voila_command
from capaudit.human.simulate import fixture_study

from _browser import CHROMIUM, FLAGS, free_port, stop_group, wait_http

pytestmark = pytest.mark.slow


def _kernels(pid: int):
    import psutil

    return [p for p in psutil.Process(pid).children(recursive=True)
            if any("ipykernel" in part for part in p.cmdline())]


def _login(page, code: str, consent: bool) -> None:
    page.wait_for_selector(".capaudit-code input", timeout=90_000)
    page.fill(".capaudit-code input", code)
    page.click(".capaudit-start")
    if consent:
        page.wait_for_selector(".capaudit-consent", timeout=30_000)
        page.click(".capaudit-consent")


def _at_item(page, k: int) -> None:
    page.wait_for_selector(f"text=Caption phase · item {k} of", timeout=30_000)
    time.sleep(0.6)  # past the double-click guard of a new screen


def test_browser_answers_three_items_then_resumes_at_the_fourth(tmp_path: Path) -> None:
    pytest.importorskip("voila")
    sync_api = pytest.importorskip("playwright.sync_api")
    if not (os.path.exists(CHROMIUM) and shutil.which("chromium")):
        pytest.skip("Debian's chromium is not installed")
    st, people, _ = fixture_study(tmp_path, n_images=16, humans=1, labels_per_item=1, claims_per_stratum=2)
    code = people[0].code
    session = st.login(code)
    tasks = [t for t in session.tasks() if t.phase == "caption"]
    ipynb = prepare_notebook(st.path, tmp_path / "serve")
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    log = open(tmp_path / "voila.log", "w")
    proc = subprocess.Popen(voila_command(ipynb, port=port), stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                            start_new_session=True)
    shots = tmp_path / "outputs" / "human_e2e" / "figures"
    shots.mkdir(parents=True)
    try:
        wait_http(url, proc)
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            page.goto(url, timeout=90_000)
            _login(page, code, consent=True)
            # item 1: keyboard only
            _at_item(page, 1)
            for key in ("1", "1", "1"):
                page.keyboard.press(key)
            # item 2: mouse; the last answer by double click
            _at_item(page, 2)
            page.locator(".capaudit-opt-caption_licensed").nth(1).click()  # no
            page.locator(".capaudit-opt-atomic_visual_claim").nth(0).click()  # yes
            page.locator(".capaudit-opt-category_check").nth(2).dblclick()  # uncertain, twice
            # item 3: keyboard, after a mouse click moved the focus to a button
            _at_item(page, 3)
            page.locator(".capaudit-opt-caption_licensed").nth(2).click()  # uncertain
            page.keyboard.press("4")  # atomic: uncertain
            page.keyboard.press("1")  # category: correct
            _at_item(page, 4)
            page.wait_for_selector("text=3 / ", timeout=10_000)
            rows = st.store.read("SELECT item_id, caption_licensed, atomic_visual_claim, category_check, revision "
                                 "FROM annotations ORDER BY annotation_id")
            assert [(r["item_id"], r["caption_licensed"], r["atomic_visual_claim"], r["category_check"], r["revision"])
                    for r in rows] == [
                (tasks[0].item_id, "yes", "yes", "correct", 1),
                (tasks[1].item_id, "no", "yes", "uncertain", 1),
                (tasks[2].item_id, "uncertain", "uncertain", "correct", 1),
            ]
            # kill the kernel, reload: a new kernel rebuilds the UI from the store
            kernels = _kernels(proc.pid)
            assert kernels
            for k in kernels:
                os.kill(k.pid, signal.SIGKILL)
            page.reload(timeout=90_000)
            _login(page, code, consent=False)
            _at_item(page, 4)
            fourth = st.item(tasks[3].item_id)
            claim = claim_text(fourth["unit"], fourth["target"], fourth["category"])
            assert page.locator(".capaudit-claimbox b").inner_text() == claim
            assert page.locator(".capaudit-progress").inner_text().startswith("Caption phase · item 4 of")
            page.screenshot(path=str(shots / "human_annotation_resume.png"), full_page=True)
            browser.close()
        assert st.store.one("SELECT COUNT(*) AS k FROM annotations")["k"] == 3
        assert (shots / "human_annotation_resume.png").stat().st_size > 10_000
    finally:
        stop_group(proc)
        log.close()
        st.close()
