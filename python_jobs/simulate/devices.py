"""The devices reference: a small catalog delivered as daily full loads.

Each load is the whole catalog on that day. Between loads devices are added, renamed
(``full_name`` changes), removed, and removed devices come back, so a snapshot of the
loads sees every kind of change. ``tv`` is in the catalog but not a supported visit
device type.
"""

from __future__ import annotations

import random
from typing import Any

DeviceKey = tuple[str, str]  # (type, version)

SUPPORTED_TYPES = ("desktop", "mobile", "tablet")

# The catalog the reference starts from, and the devices that appear later.
INITIAL_DEVICES: tuple[tuple[str, str, str], ...] = (
    ("desktop", "windows-10", "Windows 10 PC"),
    ("desktop", "windows-11", "Windows 11 PC"),
    ("desktop", "macos-14", "Apple Mac, macOS 14 Sonoma"),
    ("desktop", "ubuntu-24.04", "Ubuntu 24.04 LTS Desktop"),
    ("mobile", "ios-17", "Apple iPhone, iOS 17"),
    ("mobile", "android-14", "Android 14 phone"),
    ("tablet", "ipados-17", "Apple iPad, iPadOS 17"),
    ("tablet", "android-14", "Android 14 tablet"),
    ("tv", "tizen-8", "Samsung Smart TV, Tizen 8"),
)
LATER_DEVICES: tuple[tuple[str, str, str], ...] = (
    ("mobile", "ios-18", "Apple iPhone, iOS 18"),
    ("desktop", "macos-15", "Apple Mac, macOS 15 Sequoia"),
    ("mobile", "android-15", "Android 15 phone"),
    ("tablet", "ipados-18", "Apple iPad, iPadOS 18"),
    ("tv", "webos-24", "LG Smart TV, webOS 24"),
)


class DeviceCatalog:
    """The devices reference as the source system keeps it."""

    def __init__(self) -> None:
        self.current: dict[DeviceKey, str] = {}
        self.removed: list[DeviceKey] = []  # in order of removal
        self.removed_names: dict[DeviceKey, str] = {}
        self.next_new = 0  # index into LATER_DEVICES, then synthetic ones
        self.loads = 0

    def next_load(self, rng: random.Random) -> list[dict[str, str]]:
        """Advance the catalog by one load; return the load's rows, sorted."""
        if self.loads == 0 and not self.current:
            for device_type, version, name in INITIAL_DEVICES:
                self.current[(device_type, version)] = name
        else:
            self._evolve(rng)
        self.loads += 1
        return self.rows()

    def _evolve(self, rng: random.Random) -> None:
        returned: DeviceKey | None = None
        if self.removed:  # the device removed longest ago comes back
            returned = self.removed.pop(0)
            self.current[returned] = self.removed_names.pop(returned)
        # Remove one device, keeping at least one version of each supported type.
        candidates = [
            key
            for key in sorted(self.current)
            if key != returned and (key[0] not in SUPPORTED_TYPES or self._versions_of(key[0]) > 1)
        ]
        if candidates:
            gone = candidates[rng.randrange(len(candidates))]
            self.removed.append(gone)
            self.removed_names[gone] = self.current.pop(gone)
        # Rename one device.
        renamable = [key for key in sorted(self.current) if key != returned]
        if renamable:
            key = renamable[rng.randrange(len(renamable))]
            self.current[key] = _renamed(self.current[key])
        # Sometimes a new device appears.
        if rng.random() < 0.6:
            device_type, version, name = self._new_device()
            self.current[(device_type, version)] = name

    def _versions_of(self, device_type: str) -> int:
        return sum(1 for key in self.current if key[0] == device_type)

    def _new_device(self) -> tuple[str, str, str]:
        index = self.next_new
        self.next_new += 1
        if index < len(LATER_DEVICES):
            return LATER_DEVICES[index]
        n = index - len(LATER_DEVICES)
        device_type = SUPPORTED_TYPES[n % 3]
        release = 19 + n // 3
        labels = {"desktop": "Windows", "mobile": "Android", "tablet": "Android tablet"}
        prefix = {"desktop": "windows", "mobile": "android", "tablet": "android-tab"}
        return device_type, f"{prefix[device_type]}-{release}", f"{labels[device_type]} {release}"

    def rows(self) -> list[dict[str, str]]:
        return [
            {"type": key[0], "full_name": name, "version": key[1]}
            for key, name in sorted(self.current.items())
        ]

    def versions_by_type(self) -> dict[str, list[str]]:
        """Supported device types -> versions in the current load (sorted)."""
        result: dict[str, list[str]] = {t: [] for t in SUPPORTED_TYPES}
        for device_type, version in sorted(self.current):
            if device_type in result:
                result[device_type].append(version)
        return result

    def to_state(self) -> dict[str, Any]:
        return {
            "current": [[t, v, n] for (t, v), n in sorted(self.current.items())],
            "removed": [[t, v, self.removed_names[(t, v)]] for t, v in self.removed],
            "next_new": self.next_new,
            "loads": self.loads,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> DeviceCatalog:
        catalog = cls()
        catalog.current = {(t, v): n for t, v, n in state["current"]}
        catalog.removed = [(t, v) for t, v, _ in state["removed"]]
        catalog.removed_names = {(t, v): n for t, v, n in state["removed"]}
        catalog.next_new = state["next_new"]
        catalog.loads = state["loads"]
        return catalog


def _renamed(name: str) -> str:
    """A new ``full_name``: a revision suffix, bumped on every rename."""
    base, sep, rev = name.rpartition(" (rev ")
    if sep and rev.endswith(")") and rev[:-1].isdigit():
        return f"{base} (rev {int(rev[:-1]) + 1})"
    return f"{name} (rev 2)"
