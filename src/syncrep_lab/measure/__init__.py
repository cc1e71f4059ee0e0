"""Measurement primitives: latency histograms, pgbench output, statistics."""
