"""The raw limit: the same externally visible work as signoff with nothing but asyncpg and
aio-pika — a bare HTTP approve, the same PostgreSQL commits and the same persistent, confirmed
messages per proposal, in one process per signoff service that handles the proposal."""
