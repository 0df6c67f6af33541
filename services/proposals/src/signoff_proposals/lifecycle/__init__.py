"""The proposal lifecycle: its rules, its one conditional transition, the audit trail and outbox."""
