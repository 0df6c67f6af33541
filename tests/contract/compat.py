"""Is a message's new JSON Schema compatible with its published one?

A published message version may only grow by optional fields, because during a rolling deploy
old and new writers and readers meet in every combination. Breaking, for this checker:

- a field removed (renaming is removal plus addition);
- a field's type changed — widened or narrowed, including ``X`` → ``X | None``;
- a constraint changed (length, pattern, bounds, format) or a default changed;
- an optional field made required, or a required field added;
- a literal/enum narrowed (old writers' values rejected) or widened (old readers reject it);
- an optional field added to an object that forbids unknown fields (old readers reject it);
- a message type removed from a published version.

Allowed: an optional field added to an object that tolerates unknown fields, a new message
type, documentation (``title``, ``description``). A changed ``version`` default means the
message is a new version: nothing is compared. Pure functions on plain JSON Schema dicts
(pydantic's dialect); nothing here imports signoff, so the checker cannot drift with what it
checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Schema = dict[str, Any]
_CONSTRAINTS = (
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
)
_SCALARS = ("string", "integer", "number", "boolean", "null")


@dataclass(frozen=True)
class Change:
    """One breaking change: where (a dotted field path), what kind, and in words."""

    path: str
    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.path}: {self.detail}"


def breaking_changes(old: Schema, new: Schema, name: str | None = None) -> list[Change]:
    """Every breaking change from ``old`` to ``new`` (two message schemas)."""
    if _version(old) != _version(new):
        return []
    root = name or str(old.get("title", "$"))
    return _Comparison(old, new).compare(old, new, root)


def compare_sets(old: dict[str, Schema], new: dict[str, Schema]) -> dict[str, list[Change]]:
    """Breaking changes per message type between two versions' sets of schemas."""
    found: dict[str, list[Change]] = {}
    for name, schema in old.items():
        if name not in new:
            found[name] = [Change(name, "message_removed", "message type removed")]
        elif changes := breaking_changes(schema, new[name], name):
            found[name] = changes
    return found


def report(name: str, changes: list[Change], snapshot: str, export: str) -> str:
    """A failure message that says what broke and the ways to ship the change anyway."""
    lines = [f"{name}: breaking change(s) against the published schema {snapshot}:"]
    lines += [f"  - {change}" for change in changes]
    lines += [
        "A published message version only grows by optional fields. To ship this change:",
        "  * make it compatible (e.g. add the field as optional, with a default), or",
        "  * put the new shape in a new version package (v2 beside v1, `version = 2`) and",
        "    leave the published one as it is, or",
        f"  * if it was never published and the change is intended, re-export: {export}",
    ]
    return "\n".join(lines)


def _version(schema: Schema) -> Any:
    return schema.get("properties", {}).get("version", {}).get("default")


class _Comparison:
    """Walks two schemas side by side, each resolving ``$ref`` against its own ``$defs``."""

    def __init__(self, old_root: Schema, new_root: Schema) -> None:
        self.roots = (old_root, new_root)
        self.open: set[tuple[str, str]] = set()

    def compare(self, old: Schema, new: Schema, path: str) -> list[Change]:
        refs = (old.get("$ref", ""), new.get("$ref", ""))
        if not (refs[0] and refs[1]):
            return self.compare_resolved(self.resolve(old, 0), self.resolve(new, 1), path)
        if refs in self.open:
            return []  # a recursive type: this pair is already being compared further up
        self.open.add(refs)
        try:
            return self.compare_resolved(self.resolve(old, 0), self.resolve(new, 1), path)
        finally:
            self.open.discard(refs)

    def compare_resolved(self, old: Schema, new: Schema, path: str) -> list[Change]:
        kinds = (_kind(old), _kind(new))
        if kinds[0] != kinds[1]:
            return [_type_changed(path, self.describe(old, 0), self.describe(new, 1))]
        changes = _constraints(old, new, path)
        if kinds[0] == "union":
            return changes + self.unions(old, new, path)
        if kinds[0] == "enum":
            return changes + _enums(old, new, path)
        if kinds[0] == "array":
            return changes + self.compare(old.get("items", {}), new.get("items", {}), path + "[]")
        if kinds[0] == "object":
            return changes + self.objects(old, new, path)
        return changes

    def objects(self, old: Schema, new: Schema, path: str) -> list[Change]:
        changes = []
        old_props, new_props = old.get("properties", {}), new.get("properties", {})
        old_req, new_req = set(old.get("required", ())), set(new.get("required", ()))
        for field in sorted(old_props):
            where = f"{path}.{field}"
            if field not in new_props:
                changes.append(Change(where, "removed", "field removed (old readers need it)"))
                continue
            changes += self.compare(old_props[field], new_props[field], where)
            changes += _default(old_props[field], new_props[field], where)
            if field in new_req and field not in old_req:
                changes.append(
                    Change(
                        where, "made_required", "optional field made required (old writers omit it)"
                    )
                )
        closed = old.get("additionalProperties") is False
        for field in sorted(set(new_props) - set(old_props)):
            where = f"{path}.{field}"
            if field in new_req:
                changes.append(
                    Change(
                        where, "added_required", "required field added (old writers do not send it)"
                    )
                )
            elif closed:
                changes.append(
                    Change(
                        where,
                        "closed_object_grew",
                        "field added to an object "
                        "that forbids unknown fields (old readers reject it)",
                    )
                )
        return changes + self.extra(old, new, path)

    def extra(self, old: Schema, new: Schema, path: str) -> list[Change]:
        before, after = old.get("additionalProperties", True), new.get("additionalProperties", True)
        if isinstance(before, dict) and isinstance(after, dict):
            return self.compare(before, after, path + ".*")
        if before == after or (before is False and after is True):
            return []  # opening a closed object rejects nothing anyone sent
        return [
            Change(
                path + ".*",
                "type_changed",
                f"unknown/extra keys: {_extra(before)} → {_extra(after)}",
            )
        ]

    def unions(self, old: Schema, new: Schema, path: str) -> list[Change]:
        olds, news = self.alternatives(old, 0), self.alternatives(new, 1)
        changes = []
        for key in sorted(set(olds) - set(news)):
            changes.append(Change(path, "type_changed", f"no longer accepts {key}"))
        for key in sorted(set(news) - set(olds)):
            changes.append(
                Change(path, "type_changed", f"now also accepts {key} (old readers reject it)")
            )
        tagged = sum(key.startswith("object ") for key in olds) > 1
        for key in sorted(set(olds) & set(news)):
            member = f"{path}<{key.removeprefix('object ')}>" if tagged else path
            changes += self.compare(olds[key], news[key], member)
        return changes

    def alternatives(self, union: Schema, side: int) -> dict[str, Schema]:
        """A union's members, nested unions flattened, keyed by shape (``object Reason``)."""
        found: dict[str, Schema] = {}
        members = union.get("anyOf", []) + union.get("oneOf", [])
        if isinstance(union.get("type"), list):  # {"type": ["string", "null"]}
            members += [{**union, "type": kind} for kind in union["type"]]
        for member in members:
            resolved = self.resolve(member, side)
            if _kind(resolved) == "union":
                found.update(self.alternatives(resolved, side))
            else:
                key = self.shape(resolved)
                found[key if key not in found else f"{key}#{len(found)}"] = member
        return found

    def shape(self, node: Schema) -> str:
        kind = _kind(node)
        if kind == "object":
            return f"object {node['title']}" if "properties" in node else "object"
        return kind.removeprefix("scalar:").replace("enum", "literal")

    def describe(self, node: Schema, side: int) -> str:
        node = self.resolve(node, side)
        if _kind(node) == "union":
            return " | ".join(self.alternatives(node, side))
        if _kind(node) == "enum":
            return f"one of {_values(node)}"
        if _kind(node) == "array":
            return f"array of {self.describe(node.get('items', {}), side)}"
        return self.shape(node)

    def resolve(self, node: Schema, side: int) -> Schema:
        """Follow ``$ref`` (and single-member ``allOf``); sibling keywords override the target."""
        if "allOf" in node and len(node["allOf"]) == 1:
            rest = {k: v for k, v in node.items() if k != "allOf"}
            return self.resolve({**node["allOf"][0], **rest}, side)
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node
        target: Any = self.roots[side]
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        rest = {k: v for k, v in node.items() if k != "$ref"}
        return self.resolve({**target, **rest}, side)


def _kind(node: Schema) -> str:
    if "anyOf" in node or "oneOf" in node:
        return "union"
    if "enum" in node or "const" in node:
        return "enum"
    kind = node.get("type")
    if isinstance(kind, list):
        return "union"
    if kind == "array":
        return "array"
    if kind == "object" or "properties" in node:
        return "object"
    if kind in _SCALARS:
        return f"scalar:{kind}"
    return "any"


def _values(node: Schema) -> list[Any]:
    return list(node["enum"]) if "enum" in node else [node["const"]]


def _enums(old: Schema, new: Schema, path: str) -> list[Change]:
    before, after = _values(old), _values(new)
    changes = []
    if lost := [v for v in before if v not in after]:
        changes.append(
            Change(
                path,
                "enum_narrowed",
                f"literal narrowed: no longer accepts {lost} (old writers send them)",
            )
        )
    if gained := [v for v in after if v not in before]:
        changes.append(
            Change(
                path,
                "enum_widened",
                f"literal widened: now also {gained} (old readers reject them)",
            )
        )
    return changes


def _constraints(old: Schema, new: Schema, path: str) -> list[Change]:
    return [
        Change(path, "constraint_changed", f"{key} changed: {old.get(key)!r} → {new.get(key)!r}")
        for key in _CONSTRAINTS
        if old.get(key) != new.get(key)
    ]


def _default(old: Schema, new: Schema, path: str) -> list[Change]:
    if "default" in old and "default" in new and old["default"] != new["default"]:
        return [
            Change(
                path,
                "default_changed",
                f"default changed: {old['default']!r} → {new['default']!r} "
                "(old writers' omissions now mean something else)",
            )
        ]
    return []


def _type_changed(path: str, before: str, after: str) -> Change:
    return Change(path, "type_changed", f"type changed: {before} → {after}")


def _extra(value: Any) -> str:
    if isinstance(value, dict):
        return "typed"
    return "allowed" if value else "forbidden"
