"""Several hosts on one machine: Linux network namespaces joined by a bridge.

``NetnsBed(["redis", "pg", "site", "w1", "w2"])`` gives each name a network
namespace of its own with one address in a private /24, its loopback up and a
veth link to a bridge in the root namespace. The bridge holds the subnet's
first address, so the test process itself (the observer: it seeds Redis,
reads PostgreSQL and scrapes the monitor) reaches every host, and no host is
the test process. Servers bind their host's address; processes run inside a
host with ``bed.prefix(host)`` (``ip netns exec <ns>``) in front of their
command; ``bed.inside(host)`` moves the calling thread into a host for a
moment, so a server started there in a thread (the test site, whose request
log is the test's witness) listens in that host.

A partition is a pair of iptables DROP rules in the INPUT chains of the two
hosts' own namespaces (``cut``/``heal``): packets leave the sender and vanish,
no reset comes, as on a real network, and the root namespace's tables are
never touched. Deleting a namespace deletes its rules and its veth pair, so
``close()`` (the fixture's teardown, also after a failed test) kills what
still runs in the hosts, deletes the namespaces and the bridge, and leaves
nothing behind. Latency is not here: this kernel has no netem, so a TCP relay
(``relay.py``) started in a host delays what passes through it.

Names carry the pid of the test process (``nb<pid>-<n>``), so pytest-xdist
workers never collide; each bed takes the first 10.26.N.0/24 no interface of
the machine uses, under a file lock. Beds left by a test process that died
(SIGKILL) are removed when the next one starts. Root is needed (CI runs as
root); without root or iptables the fixture fails, it never skips.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

NETNS_DIR = Path("/run/netns")
LOCK = Path("/run/lock/crawler-netns-bed.lock")
# 10.26.N.0/24, N in 1..254: private, and unlike the 10.0-10.10 and
# 172.17-172.31 ranges that container runtimes and VPNs take.
SUBNETS = ipaddress.ip_network("10.26.0.0/16")
PREFIX = "nb"  # namespaces nb<pid>-<n>-<host>, bridge nb<pid>-<n>b, veths nb<pid>-<n>v<i>
CLONE_NEWNET = 0x40000000
_counter = 0


def sh(*argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run one command (ip, iptables), its output captured; raise with its stderr."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {done.returncode}: {done.stderr.strip()}")
    return done


def missing_requirements() -> str | None:
    """Why a bed cannot be built here (not root, no ip or iptables), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} not found (make setup installs iproute2 and iptables)"
    return None


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


@contextlib.contextmanager
def netns_of_thread(ns: str) -> Iterator[None]:
    """The calling thread in network namespace ``ns`` until the block ends.

    Only this thread moves (setns(2) acts on the caller), and a thread it
    starts meanwhile stays there: a socket belongs to the namespace it was
    created in, so a server thread started inside keeps serving there.
    """
    with open("/proc/thread-self/ns/net") as home, open(NETNS_DIR / ns) as there:
        _setns(there.fileno())
        try:
            yield
        finally:
            _setns(home.fileno())


@dataclass(frozen=True)
class Host:
    """One host of a bed: its name in the test, its namespace, its address."""

    name: str
    ns: str
    address: str

    @property
    def prefix(self) -> list[str]:
        """What runs a command inside this host."""
        return ["ip", "netns", "exec", self.ns]


class NetnsBed:
    """Hosts in network namespaces on one bridge, with partitions between them.

    ``bed[name]`` is a :class:`Host`; ``bed.address(name)`` its address.
    ``cut(a, b)`` drops every packet between two hosts (``both=False``: only
    those from ``b`` to ``a``), ``heal(a, b)`` undoes it, ``cut_from_all(a)``
    cuts ``a`` from every other host (never from the test process) and
    ``heal_all()`` ends every partition.
    """

    def __init__(self, names: Sequence[str]) -> None:
        global _counter
        if len(set(names)) != len(names) or not names:
            raise ValueError("give each host a distinct name")
        why = missing_requirements()
        if why is not None:
            raise RuntimeError(f"no network namespace test bed: {why}")
        _counter += 1
        self.tag = f"{PREFIX}{os.getpid()}-{_counter}"
        self.bridge = f"{self.tag}b"
        self.names = list(names)
        self.hosts: dict[str, Host] = {}
        self._cuts: set[tuple[str, str]] = set()  # (at, from): at drops what comes from
        self._veths: list[str] = []
        self._made_bridge = False
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    # -- building and removing ----------------------------------------------------

    def _build(self) -> None:
        sweep_stale()
        LOCK.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two beds never pick the same subnet
            subnet = free_subnet()
            addresses = list(subnet.hosts())
            # Its own bridge, outside the root namespace's iptables (br_netfilter
            # would otherwise run bridged packets through its FORWARD chain).
            sh("ip", "link", "add", "name", self.bridge, "type", "bridge", "nf_call_iptables", "0")
            self._made_bridge = True
            sh("ip", "addr", "add", f"{addresses[0]}/{subnet.prefixlen}", "dev", self.bridge)
            sh("ip", "link", "set", self.bridge, "up")
        self.gateway = str(addresses[0])
        self.subnet = subnet
        for i, name in enumerate(self.names, start=1):
            host = Host(name, f"{self.tag}-{name}", str(addresses[i]))
            sh("ip", "netns", "add", host.ns)
            self.hosts[name] = host
            veth = f"{self.tag}v{i}"
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", host.ns)
            self._veths.append(veth)
            sh("ip", "link", "set", veth, "master", self.bridge, "up")
            inside = host.prefix
            sh(*inside, "ip", "addr", "add", f"{host.address}/{subnet.prefixlen}", "dev", "eth0")
            sh(*inside, "ip", "link", "set", "eth0", "up")
            sh(*inside, "ip", "link", "set", "lo", "up")  # down in a new namespace

    def close(self) -> None:
        """Kill what still runs in the hosts, delete the namespaces and the bridge."""
        for host in self.hosts.values():
            remove_namespace(host.ns)
        for veth in self._veths:  # gone with their namespace; a half-built bed may keep one
            sh("ip", "link", "del", veth, check=False)
        if self._made_bridge:
            sh("ip", "link", "del", self.bridge, check=False)
        self.hosts.clear()
        self._cuts.clear()

    def __enter__(self) -> NetnsBed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- hosts ------------------------------------------------------------------------

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def address(self, name: str) -> str:
        return self.hosts[name].address

    def prefix(self, name: str) -> list[str]:
        """``ip netns exec <ns>``: put it before a command to run it in host ``name``."""
        return self.hosts[name].prefix

    def run(self, name: str, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a short command in host ``name``, its output captured (not checked)."""
        return sh(*self.prefix(name), *argv, check=False, timeout=timeout)

    def inside(self, name: str) -> contextlib.AbstractContextManager[None]:
        """The calling thread in host ``name`` for the block (see ``netns_of_thread``)."""
        return netns_of_thread(self.hosts[name].ns)

    def pids(self, name: str) -> list[int]:
        """Processes running in host ``name``."""
        out = sh("ip", "netns", "pids", self.hosts[name].ns, check=False).stdout
        return [int(p) for p in out.split()]

    # -- partitions -------------------------------------------------------------------

    def _rule(self, op: str, at: str, source: str) -> None:
        rule = ["INPUT", "-s", self.address(source), "-j", "DROP"]
        sh(*self.prefix(at), "iptables", "-w", op, *rule)

    def cut(self, a: str, b: str, *, both: bool = True) -> None:
        """Drop the packets ``b`` sends to ``a`` (and ``a`` to ``b``, unless ``both=False``)."""
        for at, source in [(a, b), (b, a)] if both else [(a, b)]:
            if (at, source) not in self._cuts:
                self._rule("-A", at, source)
                self._cuts.add((at, source))

    def heal(self, a: str, b: str) -> None:
        """End the partition between ``a`` and ``b``, in both directions."""
        for at, source in [(a, b), (b, a)]:
            if (at, source) in self._cuts:
                self._rule("-D", at, source)
                self._cuts.discard((at, source))

    def cut_from_all(self, a: str) -> None:
        """Cut ``a`` from every other host of the bed (the test process still reaches it)."""
        for other in self.names:
            if other != a:
                self.cut(a, other)

    def heal_all(self) -> None:
        for at, source in list(self._cuts):
            self.heal(at, source)

    def rules(self, name: str) -> str:
        """``iptables -S`` in host ``name``."""
        return sh(*self.prefix(name), "iptables", "-w", "-S").stdout


def free_subnet() -> ipaddress.IPv4Network:
    """The first 10.26.N.0/24 that no interface of the root namespace has an address in."""
    used = set()
    out = sh("ip", "-o", "-4", "addr", "show").stdout
    for address in re.findall(r"inet (\S+)", out):
        network = ipaddress.ip_interface(address).network
        if network.overlaps(SUBNETS):
            used.add(network)
    for subnet in SUBNETS.subnets(new_prefix=24):
        if subnet.network_address.packed[2] in (0, 255):
            continue
        if not any(subnet.overlaps(u) for u in used):
            return subnet
    raise RuntimeError(f"every /24 of {SUBNETS} is in use")


def remove_namespace(ns: str) -> None:
    """SIGKILL every process in ``ns``, then delete it (its rules and veths go with it)."""
    if not (NETNS_DIR / ns).exists():
        return
    for _ in range(50):
        pids = sh("ip", "netns", "pids", ns, check=False).stdout.split()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.05)
    sh("ip", "netns", "del", ns, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale(names: Iterable[str] | None = None) -> list[str]:
    """Remove the namespaces and bridges of beds whose test process is gone; their names."""
    pattern = re.compile(rf"^{PREFIX}(\d+)-\d+")
    if names is None:
        names = os.listdir(NETNS_DIR) if NETNS_DIR.exists() else []
    links = re.findall(r"^\d+: ([^:@]+)", sh("ip", "-o", "link", "show").stdout, re.M)
    removed = []
    for name in [*names, *links]:
        match = pattern.match(name)
        if match is None or _alive(int(match.group(1))):
            continue
        if name in links:
            sh("ip", "link", "del", name, check=False)
        else:
            remove_namespace(name)
        removed.append(name)
    return removed
