"""Reusable probabilistic layers shared by the model families."""
