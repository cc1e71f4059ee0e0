"""Analysis: pure functions over a run's store (costs per commit, ...)."""
