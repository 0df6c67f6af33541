"""The proposals service: the one place where "exactly once" is decided.

It stores resolved proposals, answers approvals with a single conditional claim, expires what
nobody decided, publishes signed execution contracts through its outbox, re-publishes contracts
of executions that went quiet, and records the outcomes that come back.
"""
