"""Kernels of the served annotation notebook do not pile up (headless Chromium against voila): ten
page loads, each closed, leave no kernel of theirs behind (the page-close shutdown passes voila's XSRF
check), a kernel whose page vanished without closing is culled once idle, and the kernel of a page
still open is kept. The voila command printed by ``human serve --dry-run`` runs as printed in bash."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from capaudit.human.serve import prepare_notebook, voila_command
from capaudit.human.simulate import fixture_study

from _browser import CHROMIUM, FLAGS, kernel_processes, playwright_or_skip, voila_server

CULL_IDLE_S, CULL_INTERVAL_S = 6, 2


def _kernels(pid: int) -> int:
    return len(kernel_processes(pid))


def _wait_kernels(pid: int, want: int, timeout: float) -> int:
    end = time.time() + timeout
    n = _kernels(pid)
    while n != want and time.time() < end:
        time.sleep(0.5)
        n = _kernels(pid)
    return n


@pytest.mark.slow
def test_closed_pages_leave_no_kernels_and_idle_ones_are_culled(tmp_path: Path) -> None:
    sync_api = playwright_or_skip()
    st, _, _ = fixture_study(tmp_path, n_images=8, humans=1, labels_per_item=1, claims_per_stratum=1)
    ipynb = prepare_notebook(st.path, tmp_path / "serve")
    log_path = tmp_path / "voila.log"
    try:
        # voila runs from the serving folder, as a user pasting the printed command there would; the
        # server's readiness probe renders the page too: its kernel has no page and is culled
        with voila_server(ipynb, ipynb.parent, log_path, cull_idle_s=CULL_IDLE_S,
                          cull_interval_s=CULL_INTERVAL_S) as (proc, url):
            with sync_api.sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                ctx = browser.new_context(viewport={"width": 1280, "height": 800})
                for _ in range(10):
                    page = ctx.new_page()
                    page.goto(url, timeout=90_000)
                    page.wait_for_selector(".capaudit-code input", timeout=90_000)
                    page.close(run_before_unload=True)
                # only the probe's kernel may remain, until it is culled
                assert _wait_kernels(proc.pid, 1, 10) <= 1
                assert "_xsrf' argument missing" not in log_path.read_text()
                page = ctx.new_page()  # kept open past the idle timeout: its kernel stays
                page.goto(url, timeout=90_000)
                page.wait_for_selector(".capaudit-code input", timeout=90_000)
                assert _wait_kernels(proc.pid, 1, CULL_IDLE_S + 4 * CULL_INTERVAL_S + 10) == 1
                time.sleep(CULL_IDLE_S + 2 * CULL_INTERVAL_S)
                assert _kernels(proc.pid) == 1 and page.locator(".capaudit-code input").is_visible()
                browser.close()  # no beforeunload: the page just vanishes; the idle culler stops its kernel
            assert _wait_kernels(proc.pid, 0, CULL_IDLE_S + 4 * CULL_INTERVAL_S + 15) == 0
            text = log_path.read_text()
            assert text.count("Kernel shutdown") >= 10 and "Culling kernel" in text
    finally:
        st.close()


def test_printed_voila_command_runs_in_bash_as_printed(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from capaudit.cli import main

    st, _, _ = fixture_study(tmp_path, n_images=4, humans=1, labels_per_item=1, claims_per_stratum=1)
    st.close()
    assert main(["human", "serve", "--db", str(st.path), "--dry-run", "--port", "8899", "--allow-unsealed"]) == 0
    line = capsys.readouterr().out.strip()
    assert "'--VoilaConfiguration.file_allowlist=(?!)'" in line
    # bash parses the printed line into exactly the argument list voila gets
    argv = subprocess.run(["bash", "-c", f"set -- {line}; printf '%s\\n' \"$@\""], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    ipynb = tmp_path / "study_human_verification_serve" / "human_verification.ipynb"
    assert argv == voila_command(ipynb, port=8899)
    assert (ipynb.parent / "voila_config" / "voila.py").read_text().count("issue_xsrf_cookie") == 2
    assert not (ipynb.parent / "voila.py").exists()  # it would shadow voila for `python -m voila` run there
    # and the dashboard is served the same way, from its own folder
    assert main(["human", "serve", "--db", str(st.path), "--dashboard", "--dry-run"]) == 0
    dash = capsys.readouterr().out
    assert "human_dashboard.ipynb" in dash and "--Voila.ip=127.0.0.1" in dash
