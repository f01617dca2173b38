"""At-least-once, out-of-order delivery of a topic's records into files.

The simulator produces, per delivery window (one file per topic), the *units* committed
in that window in commit order. A unit is what the source sends in one go: one line, or
a delete and its tombstone (for CDC a unit is its text, lines joined by newlines; for
visits an object that also carries the visit's label). :class:`Deliverer` decides which
file each unit lands in:

- out of order: with ``out_of_order_rate`` a unit is held back and delivered in one of
  the next two files of the run, at a random position;
- at least once: with ``duplicate_rate`` a delivered unit is delivered again, exactly
  the same, later in the same file or somewhere in one of the next two files.

The units a file keeps of its own window stay in commit order. Nothing is ever held back
past the run's last file, so every unit is delivered within the run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from operator import itemgetter
from typing import Generic, TypeVar

MAX_DELAY_FILES = 2
U = TypeVar("U")


@dataclass
class DeliveryCounts:
    units: int = 0  # distinct units produced
    copies: int = 0  # extra copies delivered (duplicates)
    delayed: int = 0  # units delivered in a later file than their own window

    def add(self, other: DeliveryCounts) -> None:
        self.units += other.units
        self.copies += other.copies
        self.delayed += other.delayed


class Deliverer(Generic[U]):
    """Schedules one topic's units into the files of one run (windows ``0..n-1``)."""

    def __init__(
        self,
        rng: random.Random,
        windows: int,
        duplicate_rate: float,
        out_of_order_rate: float,
    ) -> None:
        self._rng = rng
        self._last = windows - 1
        self._dup = duplicate_rate
        self._ooo = out_of_order_rate
        self._pending: dict[int, list[U]] = {}
        self.counts = DeliveryCounts()

    def _later_window(self, window: int) -> int:
        return window + self._rng.randint(1, min(MAX_DELAY_FILES, self._last - window))

    def deliver(self, window: int, units: list[U]) -> list[U]:
        """The units of the file of ``window``, in delivery order."""
        rng = self._rng
        can_delay = window < self._last
        n = len(units)
        self.counts.units += n
        entries: list[tuple[float, int, U]] = []
        if can_delay and self._ooo > 0:
            ooo = self._ooo
            for i, unit in enumerate(units):
                if rng.random() < ooo:
                    self._pending.setdefault(self._later_window(window), []).append(unit)
                    self.counts.delayed += 1
                else:
                    entries.append((i, i, unit))
        else:
            entries = [(i, i, unit) for i, unit in enumerate(units)]
        seq = n
        shuffled = False
        for unit in self._pending.pop(window, ()):
            entries.append((rng.random() * n, seq, unit))
            seq += 1
            shuffled = True
        if self._dup > 0:
            dup = self._dup
            extra: list[tuple[float, int, U]] = []
            for pos, _, unit in entries:
                if rng.random() >= dup:
                    continue
                self.counts.copies += 1
                if can_delay and rng.random() < 0.5:
                    self._pending.setdefault(self._later_window(window), []).append(unit)
                else:  # a retry later in the same file: after the original
                    extra.append((pos + rng.random() * max(n - pos, 0), seq, unit))
                    seq += 1
            if extra:
                entries.extend(extra)
                shuffled = True
        if shuffled:
            entries.sort(key=itemgetter(0, 1))
        return [unit for _, _, unit in entries]

    def pending(self) -> int:
        """Units still held back (always 0 after the run's last window)."""
        return sum(len(units) for units in self._pending.values())
