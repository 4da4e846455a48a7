"""Helpers of the headless-Chromium tests (test_human_e2e, test_human_jupyterlab, test_human_kernels,
test_human_dashboard): Playwright or a skip, a free port, waiting for a server's first 200, a served
voila notebook, the kernels under a server, and stopping the server's process group."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Tuple

import pytest

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


def playwright_or_skip() -> Any:
    """``playwright.sync_api``; the test is skipped without voila, Playwright or Debian's chromium."""
    pytest.importorskip("voila")
    sync_api = pytest.importorskip("playwright.sync_api")
    if not (os.path.exists(CHROMIUM) and shutil.which("chromium")):
        pytest.skip("Debian's chromium is not installed")
    return sync_api


@contextmanager
def voila_server(ipynb: Path, cwd: Path, log_path: Path, **options: Any) -> Iterator[Tuple[subprocess.Popen, str]]:
    """``(process, url)`` of voila serving ``ipynb`` (``capaudit.human.serve.voila_command`` with
    ``options``) once it answers; its process group is stopped on exit, its output in ``log_path``."""
    from capaudit.human.serve import voila_command

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(voila_command(ipynb, port=port, **options), stdout=log, stderr=subprocess.STDOUT,
                                cwd=cwd, start_new_session=True)
        try:
            wait_http(url, proc)
            yield proc, url
        finally:
            stop_group(proc)


def kernel_processes(pid: int) -> list:
    """Live ipykernel processes under the server process ``pid``.

    Race-free: a child can exit between the listing and the look at its command line or status
    (psutil then raises NoSuchProcess, or ZombieProcess while it is not yet reaped); such a process
    is not a live kernel and is left out, never an error.
    """
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    live = []
    for child in children:
        try:
            if child.status() != psutil.STATUS_ZOMBIE and any("ipykernel" in part for part in child.cmdline()):
                live.append(child)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return live


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 90.0, name: str = "voila") -> None:
    """Poll ``url`` until it answers 200; an error if ``proc`` exits or ``timeout`` passes."""
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:  # 127.0.0.1 only
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{name} did not answer on {url}")


def stop_group(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session=True``); SIGKILL it
    if it has not exited after ``timeout`` seconds."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
