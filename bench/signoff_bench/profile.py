"""A py-spy profile of the hottest service during one more batch, summarised for the report.

py-spy samples the process from outside (``--nonblocking``: the service is never paused), so
the batch it watches is not one of the measured ones. The summary groups samples by where the
innermost frame lives — a library (asyncpg, SQLAlchemy, pydantic, FastStream, …), signoff's
own packages, or the interpreter's — and names the hottest functions.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

#: the process's entry frames, on every stack: not informative as "inclusive" areas
_ROOTS = {"<string>", "typer", "signoff_cli", "click"}
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")
#: the event loop's frame that runs a task's step or a callback: the frame above it names the work
_STEP = "Handle._run ("
#: samples with no such frame: the main thread's loop itself (selecting, scheduling), another
#: thread, or a stack py-spy could not walk to its root (it stops at a C extension's frames:
#: asyncpg's protocol writing to its transport is most of these)
LOOP = "(the event loop itself)"
THREAD = "(another thread)"
CUT = "(a stack cut short at a C extension)"


def available() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return found if Path(found).exists() else None


class Recording:
    def __init__(self, pid: int, out: Path) -> None:
        self.pid = pid
        self.out = out
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        exe = available()
        if exe is None:
            raise RuntimeError("py-spy is not installed")
        self._proc = await asyncio.create_subprocess_exec(
            exe, "record", "--pid", str(self.pid), "--rate", "200", "--nonblocking",
            "--format", "raw", "--full-filenames", "--output", str(self.out),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        await asyncio.sleep(1.0)  # attached before the load starts
        if self._proc.returncode is not None:
            raise RuntimeError("py-spy could not attach (ptrace not permitted?)")

    async def stop(self) -> None:
        if self._proc is None or self._proc.returncode is not None:
            return
        self._proc.send_signal(signal.SIGINT)  # py-spy writes its output on Ctrl-C
        await asyncio.wait_for(self._proc.wait(), 60)


def _area(file: str) -> str:
    """The package a frame's file belongs to (py-spy gives ``pkg/mod.py``, or full paths)."""
    if "site-packages/" in file:
        return file.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    match = re.search(r"/(signoff_[a-z_]+)/", file)
    if match:
        return match.group(1)
    if "/lib/python3" in file:
        return "python: " + file.split("/lib/python3", 1)[1].split("/")[1].removesuffix(".py")
    head = file.split("/", 1)[0]
    return head.removesuffix(".py")


def summarize(path: Path, top: int = 12) -> dict[str, Any]:
    """Self time by area and by function (innermost frame of each sample), in percent."""
    areas: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    functions: Counter[str] = Counter()
    tasks: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        leaf = frames[-1]
        match = _FRAME.match(leaf)
        n = int(count)
        total += n
        for area in {_area(m["file"]) for f in frames if (m := _FRAME.match(f))} - _ROOTS:
            inclusive[area] += n
        tasks[task_of(frames)] += n
        areas[leaf if match is None else _area(match["file"])] += n
        functions[_label(leaf)] += n
    if not total:
        return {"samples": 0}
    return {
        "samples": total,
        "areas": [(a, round(100.0 * n / total, 1)) for a, n in areas.most_common(top)],
        "inclusive": [(a, round(100.0 * n / total, 1)) for a, n in inclusive.most_common(top + 4)],
        "functions": [(f, round(100.0 * n / total, 1)) for f, n in functions.most_common(top)],
        "tasks": [(t, round(100.0 * n / total, 1)) for t, n in tasks.most_common(top)],
    }


def task_of(frames: list[str]) -> str:
    """What the event loop was running in a sample: the coroutine or callback right above its
    innermost step (an HTTP request, a consumer, the outbox relay, aiormq's reader or writer),
    so a service's CPU splits by the work it does, not only by the library it was in."""
    for i in range(len(frames) - 2, -1, -1):  # innermost first; a step with work above it
        if frames[i].startswith(_STEP):
            return _label(frames[i + 1])
    if frames[0].startswith("<module> ("):
        return LOOP
    return THREAD if frames[0].startswith("Thread._bootstrap (") else CUT


def _label(frame: str) -> str:
    """A frame as the summary names it: ``func (area)``, or as py-spy wrote it if unparsed."""
    match = _FRAME.match(frame)
    return frame if match is None else f"{match['func']} ({_area(match['file'])})"


def markdown(service: str, found: dict[str, Any]) -> str:
    if not found.get("samples"):
        return f"No samples were taken of {service}."
    areas = ", ".join(f"{a} {p} %" for a, p in found["areas"])
    within = ", ".join(f"{a} {p} %" for a, p in found["inclusive"])
    rows = "\n".join(f"| {f} | {p} |" for f, p in found["functions"])
    tasks = ", ".join(f"{t} {p} %" for t, p in found["tasks"])
    return (
        f"{service}, {found['samples']} samples (py-spy, 200 Hz, innermost frame).\n\n"
        f"Self time by area: {areas}.\n\n"
        f"Samples with a frame of the area anywhere on the stack: {within}.\n\n"
        f"Samples by what the event loop was running: {tasks}.\n\n"
        f"| hottest functions (self) | % |\n|---|---|\n{rows}"
    )
