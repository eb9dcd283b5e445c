"""Atomic, private file writes: a temporary file in the same directory, fsync, then os.replace."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

# Threads of this process queue on a threading lock; other processes on an flock of a sibling file.
# Readers need neither: os.replace shows them the old file or the new one.
_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


@contextlib.contextmanager
def path_lock(path: Path) -> Iterator[None]:
    """Serialise read-modify-write cycles on `path` across threads and processes."""
    key = Path(path).absolute()
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        key.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(key.parent / f".{key.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def ensure_dir(path: Path, mode: int) -> None:
    """Create `path` (and parents) if missing, and set its mode."""
    path.mkdir(parents=True, exist_ok=True, mode=mode)
    os.chmod(path, mode)


# atomic_write's temporary files: `.<name>.<8 random characters>.tmp` beside `<name>` (mkstemp's random
# part is 8 characters of a-z, 0-9 and _). Matched exactly so that a sweep removes nothing else.
_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp")


def atomic_write(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Write `data` to `path` so a reader sees the old or the new file, never a part of one."""
    path = Path(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sweep_temp_files(root: Path) -> list[Path]:
    """Remove the temporary files that writes killed mid-way left under `root`; returns their paths.

    A killed writer leaves its `.tmp` behind, a full copy of what it was writing (the access token,
    a password hash). Every atomic_write runs under path_lock(target), so a temporary file seen while
    holding that lock belongs to no live writer, in this process or another: it is removed under it.
    """
    removed: list[Path] = []
    for directory, _subdirs, names in os.walk(root):  # symlinked directories are not followed
        for name in names:
            match = _TEMP_NAME.fullmatch(name)
            if match is None:
                continue
            path = Path(directory) / name
            try:
                with path_lock(Path(directory) / match["target"]):
                    os.unlink(path)
            except FileNotFoundError:
                continue  # its writer finished (renamed it) before the lock was ours
            except OSError as err:
                # A read-only data dir must not stop the Console from starting; it can still serve reads.
                log.warning("could not remove the leftover temporary file %s (%s)", path, err.strerror)
                continue
            removed.append(path)
    if removed:
        log.warning("removed %d temporary file(s) left by interrupted writes: %s", len(removed),
                    ", ".join(str(p.relative_to(root)) for p in removed))
    return removed
