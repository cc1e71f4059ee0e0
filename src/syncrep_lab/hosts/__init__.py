"""Driving real hosts over SSH.

A standby on another machine is only a fair measurement of synchronous
replication when the network between the nodes is a real one. This package
reaches such machines over SSH: :mod:`syncrep_lab.hosts.ssh` holds one verified
connection per host behind a synchronous interface (run a command, copy a file,
start a process that outlives the session), and :mod:`syncrep_lab.hosts.remote`
holds the PostgreSQL-specific steps the cluster builder takes on such a host
(start and stop a server, read its processes' CPU counters, remove its data
directory). Every failure a user can cause becomes a ``UserError`` with a fix,
and every network operation is bounded by a timeout.
"""
