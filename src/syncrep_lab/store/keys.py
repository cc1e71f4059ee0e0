"""The key a cluster is stored under (``clusters.cluster_key``), from a cell's parameters:
the run writes it when it builds the cluster, the analysis and the report read the
cluster of a cell back by it, so both take it from here.
"""

from __future__ import annotations

import json
from typing import Any

# placement axes: part of the key only when the cell has them, so a store made before
# they existed keeps the keys it was written with
PLACEMENT_PARAMS = ("placement", "cores", "link", "instances", "isolation", "kernel")
# the parameters that decide which cluster a cell runs on (plan.Cell.cluster_key)
CLUSTER_PARAMS = ("pg", "standbys", "settings", *PLACEMENT_PARAMS)


# the parameters a cell's stored params leave out when at these values (plan.Cell.params),
# so runs made before the axis existed keep the params they were stored with
PARAM_DEFAULTS: dict[str, Any] = {"faults": "none", "placement": "none", "cores": None,
                                  "link": "none", "instances": 1, "driver": "pgbench",
                                  "isolation": "processes", "kernel": None}


def with_defaults(params: dict[str, Any]) -> dict[str, Any]:
    """A cell's params with those left out at their default said: what a comparison rule
    such as ``{driver = "pgbench"}`` is matched against."""
    return {**PARAM_DEFAULTS, **params}


def cluster_key_text(params: dict[str, Any]) -> str:
    """A cluster's key as stored (clusters.cluster_key), from a cell's parameters."""
    key = [params.get("pg"), params.get("standbys"), params.get("settings")]
    key += [params[k] for k in PLACEMENT_PARAMS if k in params]
    return json.dumps(key)
