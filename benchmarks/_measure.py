"""Small helpers the benchmarks share: timing, a process's memory, child processes, the Console on a thread,
the household's logged-in session on it."""

from __future__ import annotations

import gc
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import requests

    from tests.real_ha.harness import RealHomeAssistant

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


def timed(work: Callable[[], T]) -> tuple[float, float, T]:
    """(wall seconds, CPU seconds of this process, result) of one call.

    A collection runs first, so garbage from before is not charged to the call.
    """
    gc.collect()
    cpu = time.process_time()
    began = time.perf_counter()
    result = work()
    return time.perf_counter() - began, time.process_time() - cpu, result


def median(values: Sequence[float]) -> float:
    """The median of the figures (what every reported time is)."""
    return statistics.median(values)


def proc_status_kib(field: str) -> int | None:
    """VmRSS, VmHWM (peak RSS) and the like for this process from /proc, in KiB; None off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def reset_peak_rss() -> bool:
    """Make VmHWM start again from the current RSS (Linux 4.0+), so a later peak is that work's own."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def run_child(script: Path, arguments: Sequence[str], *, timeout: float = 600) -> dict[str, Any]:
    """Run `script` with `arguments` in a fresh interpreter; its last stdout line, parsed as JSON."""
    done = subprocess.run(
        [sys.executable, str(script), *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=ROOT,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script.name} {' '.join(arguments[:2])} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextmanager
def serve_wsgi(app: Any, *, threads: int = 4) -> Iterator[str]:
    """Serve a WSGI app with waitress on 127.0.0.1 (a free port) in a thread; yield its base URL."""
    # The name console_ha/cli.py imports; types-waitress declares it only in waitress.server (servers lacking
    # the effective_port this reads).
    from waitress import create_server  # type: ignore[attr-defined]

    server = create_server(app, host="127.0.0.1", port=0, threads=threads, ident="console-ha-bench")
    thread = threading.Thread(target=server.run, name="waitress", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        server.close()
        server.task_dispatcher.shutdown()


def household_session(url: str, *, trust_env: bool = True) -> requests.Session:
    """A requests.Session logged in as the household on the Console served at `url` (no trailing slash).

    The settings API, its picker proxy and answering a card are the household's browser session's alone
    (console_ha/web/access.py): an API token gets 403 there. This logs in through the real /login form
    with its CSRF token (tests/web/live.py's Browser), with tests/web/conftest.py's PASSWORD, which the
    caller sets first: `ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)`.
    GETs on the session need nothing more; a mutating request would also need the page's CSRF token.
    `trust_env` is the session's (requests' own default, True, reads proxies and .netrc on every request):
    pass what the benchmark's other sessions use, so the measured requests differ only in their credential.
    Needs the repository root on sys.path (for tests.web).
    """
    from tests.web.conftest import PASSWORD
    from tests.web.live import Browser

    browser = Browser(url)
    browser.http.trust_env = trust_env
    answer = browser.log_in(PASSWORD)
    if answer.status_code != 302:
        raise RuntimeError(f"logging in to the Console answered {answer.status_code}: {answer.text[:300]}")
    return browser.http


@dataclass(frozen=True)
class Figure:
    """One printed line: what was measured, its value, and the target it answers to (if any)."""

    label: str
    value: str
    target: str = ""
    met: bool | None = None

    def line(self, width: int = 58) -> str:
        verdict = "" if self.met is None else ("met" if self.met else "MISSED")
        return f"  {self.label:<{width}} {self.value:>18}   {self.target:<26} {verdict}".rstrip()


def mib(size: float) -> str:
    """Bytes as MiB for a person."""
    return f"{size / MIB:.2f} MiB"


def ms(seconds: float) -> str:
    """Seconds as milliseconds for a person."""
    return f"{seconds * 1000:.1f} ms"


@contextmanager
def harness_core(notes: list[str], name: str) -> Iterator[RealHomeAssistant]:
    """A provisioned Home Assistant 2025.4.4 of the test harness in a temporary directory (`name` in its path),
    stopped and removed after; how long it took to start goes to `notes`."""
    import shutil
    import tempfile

    from tests.real_ha.harness import RealHomeAssistant, default_venv, install_home_assistant

    workdir = Path(tempfile.mkdtemp(prefix=f"console-ha-bench-{name}-ha-"))
    real_ha = RealHomeAssistant(install_home_assistant(default_venv()), workdir / "ha")
    try:
        began = time.monotonic()
        real_ha.provision()
        notes.append(f"Home Assistant provisioned in {time.monotonic() - began:.0f} s")
        yield real_ha
    finally:
        real_ha.stop()
        shutil.rmtree(workdir, ignore_errors=True)
