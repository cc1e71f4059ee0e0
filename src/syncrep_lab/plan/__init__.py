"""What to run: a spec (TOML or a preset) read and checked on its own (``spec``,
``checks``, ``spec_hints``), expanded into the matrix of cells (``matrix``) and the
placements its cells ask for (``placement``). Nothing here starts a process or reads the
machine; running it is ``run/``.
"""
