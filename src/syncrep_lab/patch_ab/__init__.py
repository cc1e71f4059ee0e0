"""``syncrep-lab ab``: a patch to the commit path judged against its stock build in one
command. ``sources.py`` reads the bases and patches and builds both sides (through
``pg build``'s cached builds), ``spec.py`` writes the experiment (the default matrix or
the user's spec with the two builds as its ``pg`` axis), ``flamediff.py`` the
differential flame graphs, ``answer.py`` reads the run into the answer and
``command.py`` runs the whole of it; ``terminal/ab.py`` lays the answer out as text.
"""
