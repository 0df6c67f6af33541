"""Test-only controls: move the clock, script faults, start over.

Mounted only when ``allow_admin`` is true (the default: this is a simulator). A real
provider has none of this, so nothing in the domain may depend on it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from signoff_card_provider.faults import FaultConfig
from signoff_card_provider.routes import get_simulator
from signoff_card_provider.simulator import Simulator

router = APIRouter(prefix="/_admin")
Sim = Annotated[Simulator, Depends(get_simulator)]


class AdvanceClock(BaseModel):
    """Move the simulator's clock forward, e.g. past the retention window."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    advance_seconds: float = Field(ge=0, description="Seconds to add to the simulated now.")


@router.post("/clock")
async def advance_clock(command: AdvanceClock, simulator: Sim) -> dict[str, str]:
    """Advance the clock; answers the new simulated now."""
    return {"now": simulator.clock.advance(command.advance_seconds).isoformat()}


@router.post("/faults")
async def set_faults(config: FaultConfig, simulator: Sim) -> dict[str, Any]:
    """Replace the fault plan; ``{}`` clears it."""
    simulator.set_faults(config)
    return {"faults": config.model_dump(mode="json")}


@router.get("/faults")
async def read_faults(simulator: Sim) -> dict[str, Any]:
    """The fault plan and every fault injected since it was set, in order."""
    return {
        "faults": simulator.faults.config.model_dump(mode="json"),
        "history": list(simulator.fault_history),
    }


@router.post("/reset")
async def reset(simulator: Sim) -> dict[str, str]:
    """Back to a fresh start (start-up faults included)."""
    simulator.reset()
    return {"status": "reset"}
