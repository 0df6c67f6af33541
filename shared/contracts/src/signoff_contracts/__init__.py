"""signoff's shared vocabulary: ids, statuses, outcomes, messages and the operation SDK.

Pure data and pure functions on pydantic alone: nothing here opens a socket or a file, so every
service, the domain and the tests can import it without dragging in I/O.
"""
