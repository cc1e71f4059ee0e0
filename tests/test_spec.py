"""Spec validation: every refusal names the key and its line, before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncrep_lab.plan.load import load_preset, load_spec
from syncrep_lab.plan.matrix import expand, uses_namespaces
from syncrep_lab.plan.spec import PRESETS_DIR, SpecError, parse_spec
from syncrep_lab.run.preflight import declared_patches

from .helpers import cli_here

GOOD = """\
name = "t"

[topology]
standbys = 2

[workload]
clients = 4
duration = 1

[matrix]
synchronous_commit = ["local", "on"]
clients = [1, 4]
exclude = [{ synchronous_commit = "local", clients = 1 }]
"""


def test_good_spec_expands() -> None:
    spec = load_spec(GOOD)
    plan = expand(spec)
    assert [c.label for c in plan.cells] == ["sc=local c=4", "sc=on c=1", "sc=on c=4"]
    assert all(c.sync == "1(b,c)" for c in plan.cells)
    assert [c.threads for c in plan.cells] == [2, 1, 2]


def test_presets_are_valid() -> None:
    quick, _ = load_preset("quick")
    seed, _ = load_preset("seed")
    assert len(expand(quick).cells) == 12
    cells = expand(seed).cells
    assert len(cells) == 8
    # group 4 alone has network namespaces: the other groups stay plain processes on
    # unix sockets, their clusters held up together
    assert [(c.synchronous_commit, c.link) for c in cells if uses_namespaces(seed, c)] == [
        ("on", "seed-lan")]
    assert [(c.standbys, c.link) for c in cells if c.link != "socket"] == [(2, "seed-lan")]
    assert {c.sync for c in cells if c.standbys == 0} == {""}
    assert seed.reference["figures"]
    regime, _ = load_preset("regime")
    slowed = [c for c in expand(regime).cells if c.settings_set != "default"]
    # each slowed level at 64 clients, on and its local control, on the build it declares
    assert sorted((c.settings_set, c.synchronous_commit, c.clients) for c in slowed) == sorted(
        (s, level, 64) for s in ("d300", "d1000", "d3000") for level in ("local", "on"))
    assert {c.pg for c in expand(regime).cells} == {"pg18-release-delay"}
    assert {s["synchronous_release_delay_us"] for s in regime.settings_sets.values()} == {
        300, 1000, 3000}
    # its patch is beside it, and applies to the tree the build takes (test_release_delay)
    patches = declared_patches(regime, PRESETS_DIR)["pg18-release-delay"]
    assert [p.name for p in patches] == ["syncrep-release-delay-18.patch"]
    # the seed's group 3 against group 5: two instances in one guest, then a guest each
    guests, _ = load_preset("seed-guests")
    assert [(c.isolation, c.instances, c.sync) for c in expand(guests).cells] == [
        ("processes", 2, "1(b,c)"), ("guests", 2, "1(b,c)")]
    assert guests.topology.guests is not None and guests.topology.guests.count == 2
    assert [f["isolation"] for f in guests.reference["figures"]] == ["processes", "guests"]


def test_parse_spec_leaves_the_combinations_to_load_spec() -> None:
    """parse_spec takes each key as valid on its own; load_spec checks the spec as a whole
    (plan/checks.py) and names the line of what it refuses."""
    text = GOOD.replace("[matrix]", "[run]\nrepeats_min = 9\nrepeats_max = 3\n\n[matrix]")
    assert parse_spec(text).run.repeats_min == 9
    with pytest.raises(SpecError, match=r"s.toml:11: run.repeats_min: repeats_min 9 > "
                                        r"repeats_max 3"):
        load_spec(text, "s.toml")


def _error(text: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(text, "s.toml")
    return info.value


@pytest.mark.parametrize(
    ("patch", "line", "needle"),
    [
        (("duration = 1", "duration = 1\nbogus = 3"), 9, "workload.bogus: unknown key"),
        (("clients = 4\n", 'clients = "many"\n'), 7, "workload.clients"),
        (("clients = [1, 4]", "clients = [1, 0]"), 12, "matrix.clients[1]"),
        (('synchronous_commit = ["local", "on"]', 'synchronous_commit = ["sometimes"]'), 11,
         "matrix.synchronous_commit[0]"),
        (("clients = [1, 4]", "clients = [1, 400]"), 12, "need max_connections >= 405"),
        (("exclude = [{ synchronous_commit", "exclude = [{ color"), 13, "'color' is not an axis"),
        (("exclude = [", 'only = [{ clients = 99 }]\nexclude = ['), 10,
         "the matrix is empty"),
        (("clients = [1, 4]", "clients = []"), 12, "at least one value"),
    ],
)
def test_refusals_name_key_and_line(patch: tuple[str, str], line: int, needle: str) -> None:
    text = GOOD.replace(*patch)
    assert text != GOOD
    err = _error(text)
    rendered = str(err)
    assert needle in rendered, rendered
    assert f"s.toml:{line}:" in rendered, rendered


def test_more_refusals() -> None:
    no_standby = GOOD.replace('["local", "on"]', '["remote_apply"]').replace(
        "standbys = 2", "standbys = 0")
    assert "would silently mean 'local'" in str(_error(no_standby))
    assert "batch" in str(_error(GOOD.replace("duration = 1", "duration = 1\nbatch = 0")))
    assert "no settings set 'fast'" in str(_error(GOOD + 'settings = ["fast"]\n'))
    assert "repeats_min 5 > repeats_max 2" in str(
        _error(GOOD + "\n[run]\nrepeats_min = 5\nrepeats_max = 2\n"))
    assert "names no standby" in str(_error(GOOD.replace("standbys = 2", 'sync = "1(x)"')))
    assert "not TOML" in str(_error("name = \n"))
    assert "s.toml:1:" in str(_error("name = \n"))


def test_cli_refuses_bad_spec_before_starting(workdir: Path) -> None:
    spec = workdir / "bad spec é.toml"
    spec.write_text(GOOD.replace("clients = [1, 4]", "clients = [1, -4]"))
    out = workdir / "out"
    res = cli_here("run", str(spec), "--out", str(out))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert f"{spec}:12: matrix.clients[1]" in res.stderr
    assert not out.exists()
    res = cli_here("run", str(workdir / "missing.toml"))
    assert res.returncode == 2 and "no spec file" in res.stderr
    res = cli_here("run", "--preset", "nope", "--out", str(out))
    assert res.returncode == 2 and "no preset 'nope'" in res.stderr


@pytest.mark.parametrize("example", sorted((Path(__file__).parent.parent / "examples")
                                           .glob("*.toml")), ids=lambda p: p.name)
def test_the_examples_are_valid_specs(example: Path) -> None:
    spec = load_spec(example.read_text())  # every key known, every check of the spec alone
    assert spec.name and expand(spec).cells


def test_what_would_act_from_here_on_an_ssh_host_is_refused_at_its_key(tmp_path: Path
                                                                         ) -> None:
    """A node's cpus, numa and role pins on a host are applied there; exclusive cpusets,
    group keys taking in a node there and matrix.cores would act from this machine."""
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "x"\n[topology]\nstandbys = 2\nclone = "basebackup"\n'
                    'hosts = { c = "far", primary = "far", client = "far" }\n'
                    '[hosts.far]\naddress = "10.1.1.1"\nbin_dir = "/usr/bin"\n'
                    '[placements.p]\ncpus = { client = "0", b = "1", c = "1", standbys = "0" }\n'
                    'exclusive = true\nnuma = { c = "interleave=all" }\n'
                    'pin = { "c/startup" = "1", walwriter = "0" }\n'
                    '[matrix]\nplacement = ["p"]\ncores = [1]\n')
    res = cli_here("run", str(spec), "--check")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    err = " ".join(res.stderr.split())
    assert "placements.p.cpus.standbys: 'standbys' takes in nodes on SSH hosts" in err
    assert "placements.p.exclusive: exclusive cpusets are made on this machine only" in err
    assert "matrix.cores: cores limits this machine's CPUs" in err
    for allowed in ("cpus.client", "cpus.b", "cpus.c", "numa.c", "pin.c/startup",
                    "pin.walwriter"):
        assert f"placements.p.{allowed}" not in err  # here, or applied on far


def test_check_says_what_a_declared_build_needs_and_builds_nothing(tmp_path: Path) -> None:
    """`run --check` of a spec with [builds.NAME]: the build is named as still to be made,
    its patch checked (relative to the spec's folder), and nothing is built."""
    from syncrep_lab.pg.builds import find_build

    name = f"pg18-check{tmp_path.name[-6:].replace('_', '')}"
    (tmp_path / "slow.patch").write_bytes(
        (PRESETS_DIR / "syncrep-release-delay-18.patch").read_bytes())
    spec = tmp_path / "spec.toml"
    spec.write_text(f'name = "c"\n\n[builds.{name}]\nversion = "18"\n'
                    f'patches = ["slow.patch"]\n\n[matrix]\npg = ["{name}"]\n')
    res = cli_here("run", str(spec), "--check")
    assert res.returncode == 0, res.stdout + res.stderr
    said = " ".join(res.stdout.split())
    assert f"build {name}: to be built before the first cluster (PostgreSQL 18" in said
    assert "nothing was created" in said and find_build(name) is None
    (tmp_path / "slow.patch").unlink()
    res = cli_here("run", str(spec), "--check")
    assert res.returncode == 2 and f"builds.{name}.patches[0]:" in res.stderr
    assert "slow.patch: no such file" in res.stderr and "Traceback" not in res.stderr


GUEST_KERNELS = """\
name = "k"

[topology]
standbys = 1
sync = "b"
clone = "basebackup"
guests = { count = 1 }
hosts = { primary = "guest1" }

[matrix]
kernel = ["host", "linux-image-6.1.0-47-cloud-amd64", "debian-6.1"]
pg = ["9.6", "18"]
"""


def test_the_kernel_axis_boots_a_set_of_guests_a_kernel() -> None:
    """matrix.kernel: "host" runs the guest's nodes here; each other kernel gets guests of
    its own, the topology's kernel the plain names; every cell knows its guest."""
    from syncrep_lab.plan.matrix import cell_hosts
    from syncrep_lab.run.clusters import instance_host

    spec = load_spec(GUEST_KERNELS)
    assert spec.guest_kernels() == ["debian-6.1", "linux-image-6.1.0-47-cloud-amd64"]
    assert spec.guest_names() == ["guest1", "guest1-k2"]
    assert spec.guest_names("linux-image-6.1.0-47-cloud-amd64") == ["guest1-k2"]
    assert spec.is_guest("guest1-k2") and not spec.is_guest("guest2")
    cells = expand(spec).cells
    # a cluster a kernel and version: six
    assert len({c.cluster_key for c in cells}) == 6
    where = {(c.kernel, c.pg): (cell_hosts(spec, c).get("primary"),
                                instance_host(spec, c, "guest1", 1)) for c in cells}
    assert where[("host", "9.6")] == (None, "guest1")  # not placed: it runs here
    assert where[("debian-6.1", "18")] == ("guest1", "guest1")
    assert where[("linux-image-6.1.0-47-cloud-amd64", "9.6")] == ("guest1", "guest1-k2")
    labels = [c.label for c in cells]
    assert "pg=9.6 kernel=host" in labels, labels
    # stored with the cell, and in its cluster's key; a cell without the axis keeps the
    # params and key it always had
    assert all(c.params()["kernel"] == c.kernel for c in cells)
    single = load_spec(GUEST_KERNELS.replace(
        'kernel = ["host", "linux-image-6.1.0-47-cloud-amd64", "debian-6.1"]\n', ""))
    assert single.guest_names() == ["guest1"]
    assert all("kernel" not in c.params() and c.kernel is None for c in expand(single).cells)
    # isolation guests has no guest in a host cell: those are left out, and said
    both = load_spec(GUEST_KERNELS.replace('["9.6", "18"]', '["18"]').replace(
        "guests = { count = 1 }", "guests = { count = 2 }\ninstances = 2").replace(
        'pg = ["18"]', 'pg = ["18"]\nisolation = ["processes", "guests"]'))
    plan = expand(both)
    assert [(c.kernel, c.isolation) for c in plan.cells if c.kernel == "host"] == [
        ("host", "processes")]
    assert any("kernel host runs no guest" in d for d in plan.dropped), plan.dropped
    assert both.guest_names() == ["guest1", "guest2", "guest1-k2", "guest2-k2"]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (('hosts = { primary = "guest1" }', ""), "the kernel axis is the kernel of the nodes"),
        (('"debian-6.1"]', '"debian-6.1", "host"]'), "matrix.kernel[3]: 'host' is on the "
                                                      "axis twice"),
        (('"debian-6.1"]', '"windows"]'), "matrix.kernel[2]: kernel 'windows' is neither"),
        (("guests = { count = 1 }", "guests = { count = 5 }\ninstances = 5\n"
          'isolation = "guests"'), "would boot 10 guests, more than 8"),
        (("guests = { count = 1 }", "guests = { count = 1, memory_mb = 256, numa_nodes = 4 }"),
         "4 NUMA nodes of 64 MB each: a node needs 128 MB"),
        (('"linux-image-6.1.0-47-cloud-amd64", "debian-6.1"]', "]"),
         "a kernel axis of 'host' alone boots no guest"),
        (("guests = { count = 1 }", 'guests = { count = 1, vcpu_cpus = "x" }'),
         "topology.guests.vcpu_cpus"),
    ],
)
def test_the_kernel_axis_refusals(edit: tuple[str, str], needle: str) -> None:
    text = GUEST_KERNELS.replace(*edit)
    assert text != GUEST_KERNELS
    rendered = " ".join(str(_error(text)).split())
    assert needle in rendered and "s.toml:" in rendered, rendered
