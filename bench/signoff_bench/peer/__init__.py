"""The peer: LangGraph human-in-the-loop on its PostgreSQL checkpointer, behind the same bare
HTTP server as the raw program, so its approve request costs the driver what signoff's does."""
