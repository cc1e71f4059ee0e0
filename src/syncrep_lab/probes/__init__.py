"""Probes: what is recorded beside pgbench (process roles, perf counts, wait events)."""
