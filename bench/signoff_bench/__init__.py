"""The benchmark of issue 11: signoff beside the raw limit and beside LangGraph.

``make bench`` (``python -m signoff_bench``) starts the real services as processes on the local
PostgreSQL and RabbitMQ, under a database and a queue prefix of its own, measures them, the raw
program and the LangGraph peer in one run, and writes ``docs/benchmarks.md``.
"""
