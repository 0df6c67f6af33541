"""Helpers for the executor's integration tests: the kit's toy domain with fault knobs
(``toy``), signed contracts, the bus, the in-process executor and a COMMIT-dropping proxy.

The real domain (``examples/club``) is written elsewhere; the toy (``signoff_conformance.toy``)
exercises every path of the executor against its own schema (``conformance_toy``).
"""
