"""Driving real hosts over SSH.

A standby on another machine is only a fair measurement of synchronous
replication when the network between the nodes is a real one. This package
reaches such machines over SSH: :mod:`syncrep_lab.hosts.ssh` holds one verified
connection per host behind a synchronous interface (run a command, copy a file,
start a process that outlives the session). The steps taken there, one module a
concern: :mod:`.postmaster` starts, stops and signals a server; :mod:`.snapshots`
reads its processes' CPU and disk counters; :mod:`.placement` and :mod:`.numa`
read what the host's kernel gave them; :mod:`.machine` says what the host is and
reads its clock, CPUs, disks and network; :mod:`.perf` runs perf there; and
:mod:`.dirs` removes what was made below its data_root. Every failure a user can
cause becomes a ``UserError`` with a fix, and every network operation is bounded
by a timeout.

What a host needs: a POSIX ``sh`` with ``cat``, ``kill``, ``rm`` and ``readlink``
(any Linux has them), ``setsid`` (util-linux; without it a server still starts, just
without a session of its own), Linux ``/proc`` for the counters, and ``python3``
only to make the process snapshots faster (and to read the server binary's symbols
there for the commit anatomy, probes/host_anatomy.py, which otherwise copies the
binary).
"""
