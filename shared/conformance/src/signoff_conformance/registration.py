"""The operation is found where the services look for it: its entry point.

A kit run imports the operation class directly, so without this check an operation can pass
every promise and still never load in a service. Entry points are read from the installed
package's metadata: in an editable install a new one appears only after reinstalling.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import ClassVar

from signoff_contracts.operations import AnyOperation

GROUP = "signoff.operations"


class RegistrationChecks:
    """Mixed into ``OperationConformance``; ``check_registration = False`` skips it (the kit's
    own toy operations, which must never reach a real service)."""

    operation: ClassVar[type[AnyOperation]]
    check_registration: ClassVar[bool] = True

    def test_operation_is_registered_under_its_entry_point(self) -> None:
        cls = self.operation
        found = [ep for ep in entry_points(group=GROUP) if ep.load() is cls]
        target = f"{cls.__module__}:{cls.__qualname__}"
        assert found, (
            f"{cls.kind} is not registered: no `{GROUP}` entry point loads {target}. Add "
            f'`"{cls.kind}" = "{target}"` under [project.entry-points."{GROUP}"] in your '
            "package's pyproject.toml, then reinstall the package (`make install`): an "
            "editable install reads entry points from its metadata, written at install time"
        )
        names = [ep.name for ep in found]
        assert cls.kind in names, f"entry point {names} should be named after the kind {cls.kind}"
