"""What became of a contract: recorded outcomes, and the checks of uncertain ones."""
