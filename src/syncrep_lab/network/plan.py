"""The network plan: which namespaces, veth links and addresses to make, checked and laid
out deterministically. Pure: nothing here runs a command or touches the machine
(:mod:`.netns` makes what a plan describes).

Each endpoint (the primary, a standby, the client) gets its own network namespace
``{prefix}-{endpoint}`` with only a loopback device and one veth interface per link, named
``to-{peer}`` (``l{index}-...`` when that would pass the kernel's 15 character limit).

Addresses: link number ``i`` (its place in the plan) gets the ``/30`` at ``10.213.0.0 + 4 i``
(``10.213.0.0/16`` holds 16384 links); its first endpoint is ``.1``, its second ``.2``. A
/30 rather than a /31 because every tool understands it. The same plan gives the same
addresses on every run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from syncrep_lab.errors import UserError
from syncrep_lab.network.links import LinkProfile, check_profile

MAX_LINKS = 16384  # /30s in 10.213.0.0/16
MAX_NS_NAME = 64
IFNAMSIZ = 15
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Link:
    """One veth pair, point to point, between endpoints ``a`` and ``b``."""

    a: str
    b: str
    profile: LinkProfile = field(default_factory=LinkProfile)


@dataclass(frozen=True)
class End:
    """One end of a link as it is made: in ``namespace``, interface ``interface``."""

    index: int  # the link's place in the plan; also its NFQUEUE queue number
    endpoint: str
    peer: str
    namespace: str
    interface: str
    address: str  # with its prefix length, e.g. 10.213.0.1/30
    peer_address: str
    profile: LinkProfile


@dataclass
class NetworkPlan:
    """Which namespaces and links to make; deterministic, and serialisable with
    :meth:`to_json` so that a later process (``clean``, a report) knows what was made.
    :func:`.shaping.set_profile` keeps ``links`` up to date with what is applied;
    ``backend`` is set by :func:`.netns.create`."""

    prefix: str
    links: list[Link]
    backend: str = ""

    def endpoints(self) -> list[str]:
        """Endpoint names in order of first appearance."""
        seen: dict[str, None] = {}
        for link in self.links:
            seen.setdefault(link.a)
            seen.setdefault(link.b)
        return list(seen)

    def namespace(self, endpoint: str) -> str:
        if endpoint not in self.endpoints():
            raise UserError(f"no endpoint {endpoint!r} in the network plan "
                            f"(it has {', '.join(self.endpoints()) or 'none'})",
                            "name one of the plan's endpoints")
        return f"{self.prefix}-{endpoint}"

    def namespaces(self) -> list[str]:
        return [f"{self.prefix}-{e}" for e in self.endpoints()]

    def link_index(self, a: str, b: str) -> int:
        """The place of the link joining ``a`` and ``b`` (either order)."""
        for i, link in enumerate(self.links):
            if {link.a, link.b} == {a, b} and a != b:
                return i
        raise UserError(f"no link joins {a!r} and {b!r} in the network plan",
                        f"add a link between {a} and {b}, or address a directly linked peer")

    def interface(self, endpoint: str, peer: str) -> str:
        """The interface in ``endpoint``'s namespace that leads to ``peer``."""
        index = self.link_index(endpoint, peer)
        name = f"to-{peer}"
        return name if len(name) <= IFNAMSIZ else f"l{index}-{peer}"[:IFNAMSIZ]

    def address(self, of: str, seen_from: str) -> str:
        """The IPv4 address of ``of`` on the link joining it to ``seen_from``."""
        index = self.link_index(of, seen_from)
        return _host(index, 1 if self.links[index].a == of else 2)

    def subnets(self) -> list[str]:
        """One ``/30`` per link, e.g. for pg_hba.conf."""
        return [_host(i, 0) + "/30" for i in range(len(self.links))]

    def ends(self) -> list[End]:
        out = []
        for i, link in enumerate(self.links):
            for me, peer in ((link.a, link.b), (link.b, link.a)):
                out.append(End(i, me, peer, f"{self.prefix}-{me}", self.interface(me, peer),
                               self.address(me, peer) + "/30", self.address(peer, me),
                               link.profile))
        return out

    def to_json(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "backend": self.backend,
                "links": [{"a": k.a, "b": k.b, "profile": k.profile.to_json()}
                          for k in self.links]}

    @classmethod
    def from_json(cls, d: Any) -> NetworkPlan:
        fix = "the saved network plan is damaged: remove the namespaces with `syncrep-lab clean`"
        if not isinstance(d, dict) or not isinstance(d.get("prefix"), str) \
                or not isinstance(d.get("links"), list):
            raise UserError("a network plan needs a prefix and a list of links", fix)
        links = []
        for item in d["links"]:
            if not isinstance(item, dict) or not isinstance(item.get("a"), str) \
                    or not isinstance(item.get("b"), str):
                raise UserError(f"a link of the network plan is malformed: {item!r}", fix)
            links.append(Link(item["a"], item["b"],
                              LinkProfile.from_json(item.get("profile", {}))))
        plan = plan_network(d["prefix"], links)
        backend = d.get("backend", "")
        plan.backend = backend if backend in ("netem", "delayer") else ""
        return plan


def _host(index: int, host: int) -> str:
    base = 4 * index + host
    return f"10.213.{base >> 8}.{base & 255}"


def plan_network(prefix: str, links: list[Link]) -> NetworkPlan:
    """Check names and profiles and lay out the addresses (see the module's docstring)."""
    fix_name = "use letters, digits, '.', '_' and '-' (starting with a letter or digit)"
    if not NAME.match(prefix or ""):
        raise UserError(f"network prefix {prefix!r} is not a usable name", fix_name)
    if len(links) > MAX_LINKS:
        raise UserError(f"{len(links)} links are more than the {MAX_LINKS} that fit in "
                        "10.213.0.0/16", "use fewer links")
    pairs: set[frozenset[str]] = set()
    for link in links:
        for name in (link.a, link.b):
            if not isinstance(name, str) or not NAME.match(name):
                raise UserError(f"link endpoint {name!r} is not a usable name", fix_name)
            if len(f"{prefix}-{name}") > MAX_NS_NAME:
                raise UserError(f"namespace name {prefix}-{name} is longer than "
                                f"{MAX_NS_NAME} characters", "use shorter endpoint names")
        if link.a == link.b:
            raise UserError(f"a link joins {link.a!r} to itself",
                            "a link joins two different endpoints")
        pair = frozenset((link.a, link.b))
        if pair in pairs:
            raise UserError(f"two links join {link.a!r} and {link.b!r}",
                            "give each pair of endpoints at most one link")
        pairs.add(pair)
        problems = check_profile(link.profile)
        if problems:
            raise UserError(f"link {link.a}-{link.b}: " + "; ".join(problems),
                            "give delay and jitter in milliseconds (0 or more), loss as "
                            "0..100 %, and a rate such as 100mbit (or none for unlimited)")
    return NetworkPlan(prefix, list(links))
