"""Helpers of the headless-Chromium tests (test_human_e2e, test_human_jupyterlab, test_human_kernels,
test_human_dashboard): a free port, waiting for a server's first 200, the kernels under a server, and
stopping the server's process group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


def kernel_processes(pid: int) -> list:
    """Live ipykernel processes under the server process ``pid`` (zombies left out)."""
    import psutil

    return [p for p in psutil.Process(pid).children(recursive=True)
            if any("ipykernel" in part for part in p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE]


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
