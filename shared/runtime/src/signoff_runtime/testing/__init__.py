"""Test support for signoff and for adopters' operations: real services, fresh names, deadlines."""

from signoff_runtime.testing.waiting import eventually, never, wait_until

__all__ = ["eventually", "never", "wait_until"]
