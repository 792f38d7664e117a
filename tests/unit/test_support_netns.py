"""The network namespace test bed (tests/support/netns.py) and the relay (relay.py).

A cut must behave as a real partition: packets vanish, so a connect times out
instead of being refused and a connection already open hears nothing, not a
reset; a heal brings both back. And whatever a test did, the bed leaves no
namespace, link or iptables rule behind.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from tests.support.netns import NetnsBed, sweep_stale
from tests.support.processes import wait_until
from tests.support.relay import Relay
from tests.support.services import RedisServer


@pytest.fixture
def bed() -> Iterator[NetnsBed]:
    with NetnsBed(["a", "b", "c"]) as made:
        yield made


def connect(bed: NetnsBed, at: str, to: tuple[str, int], timeout: float = 0.5) -> str:
    """Connect from host ``at``: "ok", "refused" or "timeout"."""
    with bed.inside(at):
        sock = socket.socket()
    sock.settimeout(timeout)
    try:
        sock.connect(to)
        return "ok"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timeout"
    finally:
        sock.close()


def listen(bed: NetnsBed, at: str) -> socket.socket:
    """A listening socket in host ``at``, on its address and a free port."""
    with bed.inside(at):
        return socket.create_server((bed.address(at), 0))


def test_hosts_have_their_own_address_and_reach_each_other(bed):
    assert len({bed.address(n) for n in "abc"}) == 3
    out = bed.run("a", "ip", "-o", "-4", "addr", "show").stdout
    assert f"inet {bed.address('a')}/24" in out and "inet 127.0.0.1/8" in out  # lo is up
    assert bed.address("b") not in out
    server = listen(bed, "b")
    port = server.getsockname()[1]
    assert connect(bed, "a", (bed.address("b"), port)) == "ok"
    assert connect(bed, "c", (bed.address("b"), port)) == "ok"
    # The test process reaches every host through the bridge.
    socket.create_connection((bed.address("b"), port), timeout=1).close()
    server.close()


def test_a_cut_drops_packets_without_a_reset_and_a_heal_restores_them(bed):
    server = listen(bed, "b")
    port = server.getsockname()[1]
    b = (bed.address("b"), port)
    closed = (bed.address("b"), port + 1 if port < 65535 else port - 1)
    assert connect(bed, "a", closed) == "refused"  # a closed port answers with a reset ...

    with bed.inside("a"):
        open_conn = socket.create_connection(b, timeout=1)
    peer, _ = server.accept()
    bed.cut("a", "b")
    assert f"-A INPUT -s {bed.address('b')}/32 -j DROP" in bed.rules("a")
    assert connect(bed, "a", b) == "timeout"
    assert connect(bed, "a", closed) == "timeout"  # ... but not across a cut
    assert connect(bed, "c", b) == "ok"  # only a and b are cut
    # An open connection hears nothing and is not reset: its bytes wait.
    open_conn.sendall(b"ping")
    peer.settimeout(0.5)
    with pytest.raises(TimeoutError):
        peer.recv(4)

    bed.heal("a", "b")
    assert "DROP" not in bed.rules("a") and "DROP" not in bed.rules("b")
    assert connect(bed, "a", b) == "ok"
    peer.settimeout(5)  # TCP retransmits the bytes sent during the cut
    assert peer.recv(4) == b"ping"
    for sock in (open_conn, peer, server):
        sock.close()


def test_one_way_cuts_cut_from_all_and_heal_all(bed):
    servers = {n: listen(bed, n) for n in "abc"}
    at = {n: (bed.address(n), s.getsockname()[1]) for n, s in servers.items()}
    bed.cut("a", "b", both=False)  # a drops what b sends: b's SYN never arrives
    assert connect(bed, "b", at["a"]) == "timeout"
    assert connect(bed, "a", at["b"]) == "timeout"  # b's SYN-ACK is dropped as well
    bed.heal("a", "b")
    bed.cut_from_all("c")
    assert connect(bed, "a", at["c"]) == "timeout" and connect(bed, "c", at["b"]) == "timeout"
    assert connect(bed, "a", at["b"]) == "ok"
    socket.create_connection(at["c"], timeout=1).close()  # the test process still reaches c
    bed.heal_all()
    assert connect(bed, "a", at["c"]) == "ok" and connect(bed, "c", at["b"]) == "ok"
    assert all("DROP" not in bed.rules(n) for n in "abc")
    for server in servers.values():
        server.close()


def names(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_teardown_leaves_no_namespace_link_rule_or_process_behind():
    made = NetnsBed(["x", "y"])
    tag, x, y = made.tag, made.address("x"), made.address("y")
    assert names("ip", "netns", "list").count(tag) == 2
    sleeper = subprocess.Popen([*made.prefix("x"), "sleep", "300"])
    # `ip netns exec` enters the namespace, then execs: on a loaded machine the
    # process may not be in it yet when Popen returns.
    wait_until(lambda: made.pids("x") == [sleeper.pid], 10, what="the sleeper in its host")
    made.cut("x", "y")
    assert y in made.rules("x") and x in made.rules("y")
    # The rules live in the hosts' own tables, never in the root namespace's
    # (which other tests, such as the node-health one, may change meanwhile).
    assert x not in names("iptables", "-w", "-S") and y not in names("iptables", "-w", "-S")
    made.close()  # what the fixture does, also after a failed test
    assert sleeper.wait(10) != 0  # killed
    assert tag not in names("ip", "netns", "list")  # and the rules with them
    assert tag not in names("ip", "-o", "link", "show")  # veths and bridge


def test_a_bed_left_by_a_dead_test_process_is_swept():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = f"nb{dead.pid}-1-x"
    subprocess.run(["ip", "netns", "add", stale], check=True)
    subprocess.run(["ip", "link", "add", f"nb{dead.pid}-1b", "type", "bridge"], check=True)
    mine = NetnsBed(["z"])  # a new bed sweeps; its own (live pid) names stay
    try:
        assert stale not in names("ip", "netns", "list")
        assert f"nb{dead.pid}-1b" not in names("ip", "-o", "link", "show")
        assert sweep_stale() == []
        assert mine.tag in names("ip", "netns", "list")
    finally:
        mine.close()


@pytest.mark.redis
def test_a_server_started_in_a_host_binds_its_address(bed):
    server = RedisServer(host=bed.address("b"), prefix=bed.prefix("b"))
    try:
        assert server.pid in bed.pids("b")
        assert server.client.ping()
        port = str(server.port)
        ping = bed.run("a", "redis-cli", "-h", bed.address("b"), "-p", port, "ping")
        assert ping.stdout.strip() == "PONG"
        bed.cut("a", "b")
        cut = bed.run("a", "timeout", "2", "redis-cli", "-h", bed.address("b"), "-p", port, "ping")
        assert cut.returncode == 124, cut  # no answer, not a refusal: the timeout killed it
        assert redis.Redis.from_url(server.url).ping()  # the others still reach it
    finally:
        server.stop()


def echo_server(bed: NetnsBed, at: str) -> tuple[socket.socket, tuple[str, int]]:
    server = listen(bed, at)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(65536):
                    conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    return server, (bed.address(at), server.getsockname()[1])


def test_the_relay_adds_its_delay_each_way_without_limiting_throughput(bed, tmp_path):
    server, echo = echo_server(bed, "b")
    relay = Relay(echo, 0.05, tmp_path, host=bed.address("a"), prefix=bed.prefix("a"))
    try:
        conn = socket.create_connection(relay.address, timeout=5)
        rtts = []
        for _ in range(5):
            started = time.monotonic()
            conn.sendall(b"x")
            assert conn.recv(1) == b"x"
            rtts.append(time.monotonic() - started)
        assert 0.1 <= min(rtts) and max(rtts) < 0.2, rtts
        # 4 MB there and back: a delay line, not a pause per chunk.
        data = b"y" * (4 << 20)
        started = time.monotonic()
        sender = threading.Thread(target=conn.sendall, args=(data,))
        sender.start()
        got = 0
        while got < len(data):
            got += len(conn.recv(1 << 20))
        sender.join()
        assert time.monotonic() - started < 1.5
        conn.close()
    finally:
        relay.close()
        server.close()
