"""Which scripts exist, and which one answers a request.

Scripts come from the built-ins and from the entry-point group ``signoff.model_scripts``
(``name = "module:object"``; the object is a script, or a class whose no-argument instance
is one), so a domain ships its own without touching this server. A script that fails to
load is remembered with its error and answered as a 500 when asked for, so a typo in one
domain's script does not take the others down.

Selection, first match wins: the admin override; the request's ``model`` when it reads
``scripted:<name>``; the server's default script.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points

import structlog

from signoff_scripted_model.builtin_scripts import BUILTINS, say
from signoff_scripted_model.script import Script, ScriptError

ENTRY_POINT_GROUP = "signoff.model_scripts"
MODEL_PREFIX = "scripted:"

log = structlog.get_logger(__name__)


class UnknownScript(LookupError):
    """No script has this name."""

    def __init__(self, name: str) -> None:
        super().__init__(f"no script named {name!r}")
        self.name = name


class ScriptRegistry:
    """Scripts by name, plus the ones that failed to load and why."""

    def __init__(self, scripts: Mapping[str, Script], broken: Mapping[str, str] | None = None):
        self._scripts = dict(scripts)
        self._broken = dict(broken or {})

    @classmethod
    def discover(cls) -> ScriptRegistry:
        """Built-ins and every installed entry point of ``signoff.model_scripts``."""
        return cls.from_entry_points(entry_points(group=ENTRY_POINT_GROUP))

    @classmethod
    def from_entry_points(cls, found: Iterable[EntryPoint]) -> ScriptRegistry:
        """Built-ins plus ``found``; a built-in's name cannot be taken."""
        scripts: dict[str, Script] = dict(BUILTINS)
        broken: dict[str, str] = {}
        for entry_point in found:
            if entry_point.name in BUILTINS or entry_point.name.startswith("say:"):
                log.warning("script_shadows_builtin", script=entry_point.name)
                continue
            try:
                scripts[entry_point.name] = _load(entry_point)
            except Exception as exc:  # any import or construction error: keep serving others
                broken[entry_point.name] = f"{type(exc).__name__}: {exc}"
                log.error(
                    "script_load_failed", script=entry_point.name, error=broken[entry_point.name]
                )
        return cls(scripts, broken)

    def names(self) -> list[str]:
        """Every loadable script name, sorted (``say:<text>`` not included)."""
        return sorted(self._scripts)

    def broken(self) -> dict[str, str]:
        """Scripts that failed to load, with the error."""
        return dict(self._broken)

    def get(self, name: str) -> Script:
        """The script ``name``; ``UnknownScript`` or, for a broken one, ``ScriptError``."""
        if name in self._scripts:
            return self._scripts[name]
        if name in self._broken:
            raise ScriptError(f"script {name!r} failed to load: {self._broken[name]}")
        if name.startswith("say:"):
            return say(name.removeprefix("say:"))
        raise UnknownScript(name)

    def knows(self, name: str) -> bool:
        """Whether ``get(name)`` can find it (loaded, broken, or a ``say:``)."""
        return name in self._scripts or name in self._broken or name.startswith("say:")


def selected_name(model: str, override: str | None, default: str) -> str:
    """The script that answers a request for ``model``."""
    if override is not None:
        return override
    if model.startswith(MODEL_PREFIX):
        return model.removeprefix(MODEL_PREFIX)
    return default


def _load(entry_point: EntryPoint) -> Script:
    loaded = entry_point.load()
    candidate = loaded() if isinstance(loaded, type) else loaded
    if not isinstance(candidate, Script):
        raise TypeError(f"{entry_point.value} has no 'name' and 'step(request)'")
    return candidate
