"""Running a plan: the machine checked before anything is made (``preflight``), the
clusters held up (``clusters``), the cells in interleaved rounds (``runner``,
``rounds``), each repeat from the same state (``reset``) with its recorders around its
client (``repeat``, ``clients``, ``fault_run``, ``host_watch``, ``placement_watch``),
and every figure stored as it ends (``repeat_record``). An attached cluster's visit is
``attached``.
"""
