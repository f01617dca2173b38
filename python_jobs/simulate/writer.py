"""Atomic writes into the landing zone and the truth directory.

A landing file is written whole to ``<landing>/.tmp/`` (same filesystem) and then
renamed into ``<landing>/<topic>/``: readers see it complete or not at all, and it never
changes afterwards. Names start with a zero-padded per-topic counter, so name order is
delivery order: ``000001-2024-10-01.json``. A devices full load appears the same way as
a whole directory, ``reference/devices/<YYYY-MM-DD>/devices.json``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

TMP_DIR = ".tmp"
DEVICES_DIR = Path("reference") / "devices"
DEVICES_FILE = "devices.json"


def topic_file_name(counter: int, day: str) -> str:
    return f"{counter:06d}-{day}.json"


def atomic_write(path: Path, data: bytes, tmp_dir: Path) -> None:
    """Write ``data`` to ``tmp_dir`` then rename it to ``path`` (same filesystem)."""
    tmp_dir.mkdir(parents=True, exist_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_dir / f"{path.parent.name}.{path.name}.tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.rename(tmp, path)


def atomic_write_dir(directory: Path, files: dict[str, bytes], tmp_dir: Path) -> None:
    """Write ``files`` into a scratch directory, then rename it to ``directory``."""
    if directory.exists():
        raise FileExistsError(f"{directory} already exists; landing files are never rewritten")
    scratch = tmp_dir / f"{directory.parent.name}.{directory.name}.tmp"
    scratch.mkdir(parents=True)
    for name, data in files.items():
        with open(scratch / name, "wb") as handle:
            handle.write(data)
    directory.parent.mkdir(parents=True, exist_ok=True)
    os.rename(scratch, directory)


def lines_bytes(lines: Iterable[str]) -> bytes:
    """JSON Lines: one line each, newline-terminated, UTF-8.

    Encoded line by line: an ASCII line encodes as a plain copy, and one non-ASCII
    character doesn't widen the text of the whole file.
    """
    data = b"\n".join([line.encode("utf-8") for line in lines])
    return data + b"\n" if data else data


class SinkError(Exception):
    """A sink could not deliver what it was given."""


class Sink(Protocol):
    """Where a run's topic lines and devices loads go (:class:`LandingWriter`, or
    :class:`~python_jobs.simulate.kafka_sink.KafkaWriter` for ``--sink kafka``)."""

    def write_topic_file(self, topic: str, counter: int, day: str, texts: list[str]) -> str: ...

    def write_devices(self, day: str, lines: list[str]) -> str: ...

    def finish(self) -> None: ...


class LandingWriter:
    """Writes the simulator's files under one landing directory.

    The bytes of a file are built by the caller's thread; the disk write and rename run
    on one background thread (file I/O releases the GIL), in submission order, so the
    simulation goes on while the previous file is written. :meth:`finish` waits for all
    writes and re-raises the first error.
    """

    def __init__(self, landing: Path) -> None:
        self.landing = landing
        self.tmp = landing / TMP_DIR
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="landing-writer")
        self._writes: list[Future[None]] = []

    def _submit(self, write: Callable[..., None], *args: object) -> None:
        done = [f for f in self._writes if f.done()]
        for future in done:
            future.result()  # surface a failed write early
            self._writes.remove(future)
        self._writes.append(self._pool.submit(write, *args))

    def write_topic_file(self, topic: str, counter: int, day: str, texts: list[str]) -> str:
        """One delivery file of ``topic`` (``texts``: its units' lines, in order).

        Returns the file's path relative to the landing dir.
        """
        relative = f"{topic}/{topic_file_name(counter, day)}"
        path = self.landing / relative
        if path.exists():
            raise FileExistsError(f"{path} already exists; landing files are never rewritten")
        self._submit(atomic_write, path, lines_bytes(texts), self.tmp)
        return relative

    def write_devices(self, day: str, lines: list[str]) -> str:
        """One full load of the devices reference; returns its file's relative path."""
        directory = self.landing / DEVICES_DIR / day
        files = {DEVICES_FILE: lines_bytes(lines)}
        self._submit(atomic_write_dir, directory, files, self.tmp)
        return f"{DEVICES_DIR.as_posix()}/{day}/{DEVICES_FILE}"

    def finish(self) -> None:
        """Wait for every write; remove the scratch directory if nothing is left in it."""
        try:
            for future in self._writes:
                future.result()
        finally:
            self._writes.clear()
            self._pool.shutdown(wait=True)
        try:
            self.tmp.rmdir()
        except OSError:
            pass


def owned_landing_paths(landing: Path, topics: Iterable[str]) -> list[Path]:
    """The landing paths the simulator writes (and ``--force`` may wipe)."""
    return [landing / topic for topic in topics] + [landing / DEVICES_DIR, landing / TMP_DIR]


def files_under(paths: Iterable[Path]) -> list[Path]:
    """Every regular file under the given paths (sorted, for messages)."""
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found.extend(p for p in path.rglob("*") if p.is_file())
    return sorted(found)


def remove_paths(paths: Iterable[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
