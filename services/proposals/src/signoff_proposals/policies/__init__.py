"""Approval policies: how many distinct people must approve what, frozen into each proposal."""
