"""The annotation widget inside a real JupyterLab (headless Chromium): its keys answer items and do
not reach JupyterLab's notebook shortcuts (``b`` inserting a cell, ``m`` making a markdown cell, number
keys), while the same keys outside the widget still do (the control). Skipped without jupyterlab."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capaudit.human.simulate import fixture_study

from _browser import CHROMIUM, FLAGS, free_port, stop_group, wait_http

pytestmark = pytest.mark.slow


def test_widget_keys_do_not_trigger_jupyterlab_shortcuts(tmp_path: Path) -> None:
    pytest.importorskip("jupyterlab")
    sync_api = pytest.importorskip("playwright.sync_api")
    if not (os.path.exists(CHROMIUM) and shutil.which("chromium")):
        pytest.skip("Debian's chromium is not installed")
    import nbformat

    st, people, _ = fixture_study(tmp_path / "study", n_images=16, humans=1, labels_per_item=1, claims_per_stratum=2)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(f"from capaudit.human.widgets import annotation_app\n"
                                          f"annotation_app(study={str(st.path)!r})"),
                nbformat.v4.new_code_cell("x = 1")]
    root = tmp_path / "lab"
    root.mkdir()
    nbformat.write(nb, root / "nb.ipynb")
    port = free_port()
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws")}
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", "--ServerApp.port_retries=0", "--IdentityProvider.token=",
           "--ServerApp.password=", f"--ServerApp.root_dir={root}", "--LabApp.news_url=",
           "--LabApp.extension_manager=readonly"]
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root, start_new_session=True)

    def count(sql: str) -> int:
        return st.store.one(sql)["k"]

    try:
        wait_http(f"http://127.0.0.1:{port}/api/status", proc, timeout=120, name="jupyter lab")
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"http://127.0.0.1:{port}/lab/tree/nb.ipynb", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell .jp-InputArea-editor", timeout=120_000)
            page.wait_for_function("document.body.innerText.includes('| Idle')", timeout=60_000)
            page.locator(".jp-Cell").nth(0).locator(".jp-InputArea-editor").click()
            page.keyboard.press("Shift+Enter")
            page.wait_for_selector(".capaudit-code input", timeout=60_000)
            page.fill(".capaudit-code input", people[0].code)
            time.sleep(0.5)
            page.click(".capaudit-start")
            page.wait_for_selector(".capaudit-consent", timeout=30_000)
            page.click(".capaudit-consent")
            page.wait_for_selector("text=Caption step · item 1 of", timeout=30_000)
            time.sleep(0.8)
            cells = page.locator(".jp-Notebook .jp-Cell")
            assert page.evaluate("document.querySelector('.jp-Notebook').classList.contains('jp-mod-commandMode')")
            for key in ("1", "1", "1", "Enter"):  # focus is on the widget's key pad
                page.keyboard.press(key)
            page.wait_for_selector("text=Caption step · item 2 of", timeout=20_000)
            time.sleep(0.8)
            assert count("SELECT COUNT(*) AS k FROM annotations") == 1
            assert cells.count() == 2 and page.locator(".jp-MarkdownCell").count() == 0
            # focus on a widget button (after a mouse click): notebook shortcuts stay off
            page.locator(".capaudit-opt-caption_licensed").nth(0).click()
            for key in ("b", "a", "m", "2"):
                page.keyboard.press(key)
            time.sleep(1.0)
            assert cells.count() == 2 and page.locator(".jp-MarkdownCell").count() == 0
            page.keyboard.press("1")  # category: correct (atomic got "2 not visual" above)
            page.keyboard.press("Enter")
            page.wait_for_selector("text=Caption step · item 3 of", timeout=20_000)
            assert count("SELECT COUNT(*) AS k FROM annotations") == 2
            assert count("SELECT COUNT(*) AS k FROM annotations WHERE atomic_visual_claim = 'not_visual'") == 1
            # control: the same keys on a cell in command mode do reach JupyterLab. The widget moves
            # focus to its key pad when a screen is shown (a message from the kernel, after the text):
            # wait for that first, so that it cannot take the focus back from the cell clicked below
            page.wait_for_function("!!(document.activeElement && document.activeElement.closest('.capaudit-keys'))",
                                   timeout=20_000)
            page.locator(".jp-Cell").nth(1).locator(".jp-InputArea-editor").click()
            page.keyboard.press("Escape")
            command_mode_on = ("(n) => { const nb = document.querySelector('.jp-Notebook'); const cells = "
                               "nb.querySelectorAll('.jp-Cell'); const a = document.activeElement; "
                               "return nb.classList.contains('jp-mod-commandMode') && cells.length === n + 1 && "
                               "cells[n].classList.contains('jp-mod-active') && !(a && a.closest('.capaudit-annotator')); }")
            page.wait_for_function(command_mode_on, arg=1, timeout=10_000)
            page.keyboard.press("b")
            page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length === 3", timeout=10_000)
            page.wait_for_function(command_mode_on, arg=2, timeout=10_000)
            page.keyboard.press("m")
            page.wait_for_selector(".jp-MarkdownCell", timeout=10_000)
            assert count("SELECT COUNT(*) AS k FROM annotations") == 2
            browser.close()
    finally:
        stop_group(proc)
        log.close()
        st.close()
