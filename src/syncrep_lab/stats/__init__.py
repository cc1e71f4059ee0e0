"""Statistics of repeated measurements: intervals and tests on small samples, latency
histograms, a cell's paired ratio to its baseline, and where its noise sits."""
