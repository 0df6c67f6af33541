"""The executor: runs approved, signed execution contracts exactly once.

It trusts nothing about a delivery but the contract's signature, checks the deadline on the
database clock, revalidates the facts the person approved under row locks, and records the effect,
its dedup row and the outcome message in one transaction. External effects follow the attempt
protocol (record, call once, record the answer); an answer that never came becomes
``NeedsReconciliation`` and the reconciler's job, never a second call.
"""
