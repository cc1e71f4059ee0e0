"""``syncrep-lab observe``: watch a running cluster without loading it or changing it, and
say whether synchronous replication is what limits it and how much headroom is left.

- :mod:`.session`: the read-only session, and what is checked before sampling starts;
- :mod:`.cpu`: CPU per process role of a node, from /proc here or over SSH;
- :mod:`.watch`: the sampling loop, which cuts the window into slices;
- :mod:`.record`: the window stored as a run of kind ``observe``;
- :mod:`.anatomy`: with ``--anatomy``, the commit anatomy probe on the primary for the
  window, cut at its slices.

The answer itself is read back from the store (analysis/observe.py), so ``diagnose``,
``report``, ``results`` and ``compare`` give it for a stored observation as well.
"""
