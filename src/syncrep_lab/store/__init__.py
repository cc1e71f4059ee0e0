"""The run store: one SQLite database per run folder (``db.py``), its schema and
upgrades (``schema.py``), the run, its cells and their repeats as read back
(``records.py``), a named row type per table a repeat writes (``rows.py``), the key a
cluster is stored under (``keys.py``) and the read queries the analysis and the report
ask it (``queries.py``). docs/store.md documents the schema for users.
"""

from syncrep_lab.store.db import (
    DB_NAME,
    FOLDER_ERRNOS,
    RunFolderUnwritable,
    Store,
    folder_error,
    mark_run,
    now,
)
from syncrep_lab.store.keys import (
    CLUSTER_PARAMS,
    PARAM_DEFAULTS,
    PLACEMENT_PARAMS,
    cluster_key_text,
    with_defaults,
)
from syncrep_lab.store.records import StoredCell, StoredRepeat, StoredRun
from syncrep_lab.store.rows import (
    PROBE_TABLES,
    AnatomyRow,
    CostRow,
    DurabilityRow,
    FaultEventRow,
    FlameGraphRow,
    GprofFunctionRow,
    GprofRoleRow,
    HostRepeatRow,
    InstanceResultRow,
    LinkRow,
    NumaPagesRow,
    NumastatRow,
    ObservedRow,
    PlacementRow,
    ProbeRow,
    ProbeRows,
    ProcCostRow,
    ReplicationSample,
    SampleRow,
    SchedRoleRow,
    StackFrameRow,
    WaitRow,
    WaitTimelineRow,
    WakeupRow,
)
from syncrep_lab.store.schema import SCHEMA, SCHEMA_VERSION

__all__ = [
    "CLUSTER_PARAMS", "DB_NAME", "FOLDER_ERRNOS", "PARAM_DEFAULTS", "PLACEMENT_PARAMS",
    "PROBE_TABLES", "SCHEMA",
    "SCHEMA_VERSION", "AnatomyRow", "CostRow", "DurabilityRow", "FaultEventRow",
    "FlameGraphRow",
    "GprofFunctionRow", "GprofRoleRow", "HostRepeatRow",
    "InstanceResultRow", "LinkRow", "NumaPagesRow", "NumastatRow", "ObservedRow",
    "PlacementRow", "ProbeRow", "ProbeRows", "ProcCostRow", "ReplicationSample",
    "RunFolderUnwritable", "SampleRow", "SchedRoleRow", "StackFrameRow", "Store",
    "StoredCell", "StoredRepeat", "StoredRun",
    "WaitRow", "WaitTimelineRow", "WakeupRow", "cluster_key_text", "folder_error",
    "mark_run", "now", "with_defaults",
]
