"""The HTML report: one self-contained file (plotly.js inlined once, flame graphs
embedded as images), written to ``RUN/report.html`` at the end of a run and by
``syncrep-lab report RUN`` at any time after.

Nothing on the page is fetched from the network, so it opens the same on a
laptop in a train as on the machine that ran the experiment.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import plotly
from markupsafe import escape

from syncrep_lab import __version__, paths
from syncrep_lab import format as fmt
from syncrep_lab.analysis.compare import Comparison
from syncrep_lab.errors import UserError
from syncrep_lab.json_form import JSON
from syncrep_lab.report.charts import LEVEL_COLOURS, all_charts, bound_levels, compare_charts
from syncrep_lab.report.data import ReportData, report_data

REPORT_NAME = "report.html"


def plotly_js() -> str:
    """plotly.js as shipped inside the plotly package (no CDN, no download)."""
    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"plotly.js is missing from the plotly package ({path}): {exc}",
                        "reinstall with ./run setup") from None


def _json_for_script(value: object) -> str:
    """JSON safe inside a <script> element: no '</' can close it early."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def topology_svg(section: dict[str, JSON]) -> str:
    """A small drawing of one cluster: the primary, each standby, and the state in
    which the primary's sync rule holds it (sync, potential, quorum, async)."""
    cluster: dict[str, Any] = section  # report_data's topology entry, read by key
    standbys = [n for n in cluster["nodes"] if n.get("role") == "standby"]
    height = max(90, 50 * len(standbys) + 20)
    box = 'rx="6" fill="#f4f6fa" stroke="#4c78a8"'
    mid = height / 2
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="420" height="{height}" '
             f'role="img" aria-label="topology">',
             f'<rect x="10" y="{mid - 22}" width="120" height="44" {box}/>',
             f'<text x="70" y="{mid - 3}" text-anchor="middle" font-size="13">primary</text>',
             f'<text x="70" y="{mid + 14}" text-anchor="middle" font-size="11" fill="#555">'
             f'PostgreSQL {escape(str(cluster["version"] or "?"))}</text>']
    # where a node ran, when not here: an SSH host or a guest (a cluster's nodes_json)
    primary: dict[str, Any] = next(
        (n for n in cluster["nodes"] if n.get("role") == "primary"), {})
    if primary.get("host"):
        parts.append(f'<text x="70" y="{mid + 36}" text-anchor="middle" font-size="11" '
                     f'fill="#555">on {escape(str(primary["host"]))}</text>')
    colours = {"sync": "#d62728", "quorum": "#ff7f0e", "potential": "#1f77b4",
               "async": "#7f7f7f"}
    for i, node in enumerate(standbys):
        y = 10 + 50 * i + (height - 20 - 50 * len(standbys)) / 2 + 22
        state = cluster["states"].get(node["name"], "?")
        colour = colours.get(state, "#555")
        name = escape(node["name"])
        parts += [
            f'<line x1="130" y1="{mid}" x2="290" y2="{y}" stroke="{colour}" stroke-width="2"/>',
            f'<text x="210" y="{(mid + y) / 2 - 4}" text-anchor="middle" font-size="11" '
            f'fill="{colour}">{escape(state)}</text>',
            f'<rect x="290" y="{y - 18}" width="120" height="36" {box}/>',
            f'<text x="350" y="{y + 5}" text-anchor="middle" font-size="13">standby {name}</text>',
        ]
        if node.get("host"):
            parts[-1] = parts[-1].replace('font-size="13">standby', 'font-size="10">standby'
                                          ).replace(f">standby {name}<", f">standby {name} on "
                                                    f"{escape(str(node['host']))}<")
    parts.append("</svg>")
    return "".join(parts)


class _CompiledTemplates(jinja2.FileSystemBytecodeCache):
    """The templates' compiled code kept in the tool's cache, checked against each
    template's source (and Python's version) before it is used: a fresh process (every
    `run` writes its report) compiles the report's template (a third of a second here)
    once per source, not once per run. A cache that cannot be written is not used."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _compiled() -> jinja2.BytecodeCache | None:
    folder = paths.cache_dir() / "page-code"  # (templates/ holds initdb's)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return _CompiledTemplates(str(folder))


# One environment per process: it keeps the templates it compiled, so a process that
# renders several pages loads each once.
@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        bytecode_cache=_compiled(),
        loader=jinja2.FunctionLoader(
            lambda name: resources.files("syncrep_lab.report").joinpath(
                "templates", name).read_text(encoding="utf-8")),
        autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
        lstrip_blocks=True)
    env.filters["num"] = fmt.page_number
    env.filters["pct"] = fmt.page_pct
    return env


def render(data: ReportData) -> str:
    """The page for the report data (see ``data.report_data``)."""
    charts = all_charts(data)
    template = _environment().get_template("report.html.j2")
    return template.render(
        d=data, charts=charts, charts_json=_json_for_script(
            {k: c["figure"] for k, c in charts.items()}),
        plotly_js=plotly_js(), level_colours=LEVEL_COLOURS, version=__version__,
        topologies=[topology_svg(c) for c in data["topology"]],
        bound_levels=list(bound_levels(data["bounds"], data["cells"])))


def render_compare(comparison: Comparison) -> str:
    """The page for a comparison (see ``analysis.compare.compare_runs``): the template
    and the charts read its JSON form, as ``compare --json`` prints it."""
    data = comparison.to_json()
    charts = compare_charts(data)
    return _environment().get_template("compare.html.j2").render(
        d=data, charts=charts, charts_json=_json_for_script(
            {k: c["figure"] for k, c in charts.items()}),
        plotly_js=plotly_js(), version=__version__)


def write_page(page: str, target: Path) -> Path:
    """Write a page atomically: a reader (or a browser refreshing) never sees half of it,
    and a failed write leaves no temporary file behind."""
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".page-", suffix=".html", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise UserError(f"cannot write the report to {target}: {exc}",
                        "give a writable --out, or free some disk space") from None
    return target


def write_report(folder: Path, out: Path | None = None, cell: int | None = None) -> Path:
    """Build the report of the run in ``folder``, by default into ``folder/report.html``."""
    return write_page(render(report_data(folder, cell)), out or folder / REPORT_NAME)
