"""`python -m console_ha serve` in a process of its own, for tests that meet the Console as a household's machine
runs it: started on a free loopback port, ended (SIGTERM, then SIGKILL) however the test ends."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from console_ha.store.datadir import DataDir


@contextmanager
def serve_in_process(data_dir: DataDir, env: Mapping[str, str]) -> Iterator[str]:
    """The served Console's URL as it prints it (ending in "/"), with the environment `env`."""
    process = subprocess.Popen(
        [sys.executable, "-m", "console_ha", "serve", "--host", "127.0.0.1", "--port", "0",
         "--data-dir", str(data_dir.root)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(env),
    )
    assert process.stdout is not None  # stdout=PIPE: Popen has made the pipe
    try:
        line = process.stdout.readline()
        assert line.startswith("Console listening on http://127.0.0.1:"), line
        yield line.split()[-1]
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()
