"""One process per output folder.

A run folder (`engine/runner.run`: a new run, `--overwrite`, `--resume`) and a sweep
folder (`tune/sweep.run_sweep`) are written by one process at a time. That process holds
an exclusive `fcntl.flock` on `<folder>/.raycompo.lock` for as long as it writes there;
the file holds its pid and what it does. The kernel drops the lock when the process ends,
however it ends (an exit, an exception, Ctrl-C, kill -9), so a lock file left behind by a
dead process is stale and simply taken over: only a live holder refuses a second process,
with a message naming its pid.

This module owns the lock file's name, its protocol and its messages; callers only use
`hold(folder, what)` as a context manager.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from raycompo.errors import ConfigError

try:
    import fcntl
except ImportError:  # not POSIX: no locking (raycompo runs on Linux and macOS)
    fcntl = None  # type: ignore[assignment]

NAME = ".raycompo.lock"


class FolderLock:
    """The exclusive lock of `folder` (created with its parents when missing; a folder
    this lock created is removed again at release when nothing else was written there)."""

    def __init__(self, folder: str | Path, what: str = "run"):
        self.folder = Path(folder)
        self.path = self.folder / NAME
        self.what = what
        self._fd: int | None = None
        self._created: Path | None = None

    def acquire(self) -> FolderLock:
        try:
            if self.folder.exists() and not self.folder.is_dir():
                raise ConfigError(f"{self.folder} is a file, not a folder; choose another folder")
            self._created = _first_missing(self.folder)
            self.folder.mkdir(parents=True, exist_ok=True)
            while True:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                if fcntl is None:
                    break
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    os.close(fd)
                    if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                        raise ConfigError(self._busy_message()) from None
                    raise
                # The holder before us may have removed the file after we opened it: then
                # our lock is on a file nobody else will open; take the new one instead.
                try:
                    same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    break
                os.close(fd)
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()} {self.what}\n".encode())
            self._fd = fd
        except ConfigError:
            self._remove_created()
            raise
        except OSError as exc:
            self._remove_created()
            raise ConfigError(f"cannot write to {self.folder}: {exc.strerror or exc}") from None
        return self

    def release(self) -> None:
        """Remove the lock file (while still holding it), then let go."""
        if self._fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None
        self._remove_created()

    def _busy_message(self) -> str:
        try:
            pid, _, what = self.path.read_text().strip().partition(" ")
        except OSError:
            pid, what = "", ""
        holder = f"process {pid}" if pid.isdigit() else "another process"
        doing = f" (a {what})" if what else ""
        return (f"{self.folder} is in use by raycompo {holder}{doing}: one process writes a folder at a time. "
                f"Wait for it to end (or stop it), or choose another folder")

    def _remove_created(self) -> None:
        """A folder made only for this lock goes again when it stayed empty (bad input
        found after the lock was taken leaves no trace)."""
        if self._created is None:
            return
        top, self._created = self._created, None
        d = self.folder.absolute()
        while True:
            try:
                d.rmdir()  # only when empty
            except OSError:
                return
            if d == top or d.parent == d:
                return
            d = d.parent

    def __enter__(self) -> FolderLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def hold(folder: str | Path, what: str = "run") -> FolderLock:
    """`with hold(folder, 'run'):` the folder is this process's until the block ends.
    Raises ConfigError when a live process holds it, or the folder cannot be made."""
    return FolderLock(folder, what)


def _first_missing(folder: Path) -> Path | None:
    """The outermost folder of `folder`'s path that does not exist yet (None: it exists)."""
    missing = None
    p = folder.absolute()
    while not p.exists():
        missing = p
        if p.parent == p:
            break
        p = p.parent
    return missing
