"""Experiments: specs, plans, the runner, the store and what is shown of results."""
