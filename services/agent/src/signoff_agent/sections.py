"""The sections' assistants, loaded by entry point (``signoff.assistants``) and checked at start.

The agent knows no section by name: whatever the domain registers is what conversations can
open on. A propose tool must name a loaded operation of the assistant's own section, so an
assistant can never be handed another section's write.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from signoff_contracts.assistants import Assistant, AssistantDefinitionError, check_assistant
from signoff_runtime.registry import Operations, UnknownOperation


class UnknownSection(LookupError):
    pass


class Sections:
    def __init__(self, assistants: list[Assistant], operations: Operations) -> None:
        self._by_section: dict[str, Assistant] = {}
        for assistant in assistants:
            check_assistant(type(assistant))
            if assistant.section in self._by_section:
                raise AssistantDefinitionError(f"section {assistant.section!r} registered twice")
            for tool in assistant.propose_tools:
                _check_propose_tool(assistant, tool.kind, operations)
            self._by_section[assistant.section] = assistant

    def get(self, section: str) -> Assistant:
        try:
            return self._by_section[section]
        except KeyError:
            raise UnknownSection(section) from None

    def names(self) -> list[str]:
        return sorted(self._by_section)


def _check_propose_tool(assistant: Assistant, kind: str, operations: Operations) -> None:
    try:
        op = operations.latest(kind)
    except UnknownOperation:
        raise AssistantDefinitionError(
            f"assistant {assistant.section!r} proposes unknown operation {kind!r}"
        ) from None
    if op.section != assistant.section:
        raise AssistantDefinitionError(
            f"assistant {assistant.section!r} may not propose {kind!r} of section {op.section!r}"
        )


def load_assistants(operations: Operations, group: str = "signoff.assistants") -> Sections:
    return Sections([ep.load()() for ep in entry_points(group=group)], operations)
