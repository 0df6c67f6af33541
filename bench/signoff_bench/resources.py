"""CPU time and peak memory of processes, read from ``/proc`` (psutil is not a dependency).

CPU is ``utime + stime`` of ``/proc/<pid>/stat`` (fields 14 and 15, in clock ticks); the peak
resident set is ``VmHWM`` of ``/proc/<pid>/status``. A whole-machine figure from ``/proc/stat``
sits beside them, so a window in which the two cores were saturated — by the benchmark or by
someone else's tests on the same machine — is visible as such.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_TICK = float(os.sysconf("SC_CLK_TCK"))


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of ``pid`` so far, or None once it has gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    # after the ")" that closes the command name, field 14 (utime) is at index 11
    return (int(fields[11]) + int(fields[12])) / _TICK


def peak_rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def machine_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, summed over cores."""
    with open("/proc/stat", encoding="ascii") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # without guest time, which is already counted in user
    return (total - idle) / _TICK, total / _TICK


def pids_named(needle: str) -> list[int]:
    """Processes whose command line contains ``needle`` (the broker's ``beam.smp``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if needle.encode() in cmdline.read():
                    found.append(int(entry))
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found


@dataclass(frozen=True, slots=True)
class CpuSnapshot:
    #: pid -> (group, CPU seconds so far)
    per_pid: dict[int, tuple[str, float]]
    machine_busy: float
    machine_total: float
    own: float


def snapshot(groups: Mapping[str, Iterable[int]]) -> CpuSnapshot:
    """CPU seconds of every pid of each named group (vanished pids are left out)."""
    per_pid = {
        pid: (name, cpu)
        for name, pids in groups.items()
        for pid in pids
        if (cpu := cpu_seconds(pid)) is not None
    }
    busy, total = machine_busy_seconds()
    times = os.times()
    return CpuSnapshot(per_pid, busy, total, times.user + times.system)


@dataclass(frozen=True, slots=True)
class CpuUse:
    """CPU seconds spent during a window, per group, plus the load driver and the machine."""

    per_group: dict[str, float]
    driver: float
    machine_busy: float
    machine_capacity: float

    @property
    def machine_utilisation(self) -> float:
        return self.machine_busy / self.machine_capacity if self.machine_capacity else 0.0


def spent(before: CpuSnapshot, after: CpuSnapshot) -> CpuUse:
    """Per group, the CPU its pids used between the snapshots; a pid born in the window counts
    from zero, one that died in it is lost (pools keep their connections, so this is rare)."""
    per_group: dict[str, float] = {}
    for pid, (name, cpu) in after.per_pid.items():
        earlier = before.per_pid.get(pid, (name, 0.0))[1]
        per_group[name] = per_group.get(name, 0.0) + max(0.0, cpu - earlier)
    return CpuUse(
        per_group=per_group,
        driver=after.own - before.own,
        machine_busy=after.machine_busy - before.machine_busy,
        machine_capacity=after.machine_total - before.machine_total,
    )
