"""The HTTP surface shared across features: reading proposals, the event stream, reply mapping."""
