"""Pause points: what the model asks a person mid-turn, its rules and form, and the answer."""
