"""syncrep-lab: reproduce, measure and explain the write ceiling of synchronous replication."""

__version__ = "0.1.0"
