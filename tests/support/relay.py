"""A TCP relay that puts a fixed delay on each way: distance, where netem is missing.

This kernel has no ``tc netem``, so a worker is put "5 ms from Redis" by
pointing it at a relay that forwards every byte to Redis 5 ms late, and every
byte of the answer 5 ms late too (10 ms of round trip). Each direction is a
delay line, not a pause: the bytes read are stamped with their arrival time
and written once that time plus ``delay`` has come, while more are read
behind them, so the relay adds latency without limiting throughput, as a
long link does. A new connection is held ``delay`` before the relay connects
onwards (a long link's handshake). A half-close (EOF) travels the same way.

Run it in a host of the network namespace test bed (tests/support/netns.py)
with ``Relay(...)``, or by hand::

    python -m tests.support.relay --listen 10.26.1.5:7000 --to 10.26.1.2:6379 --delay 0.005

It prints one line, ``relaying <listen> -> <to> with <delay>s each way``, once
it accepts connections, and stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Sequence
from pathlib import Path

from tests.support.processes import PYTHON, Proc, wait_until
from tests.support.services import free_port

_CHUNK = 64 * 1024


async def _delay_line(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float
) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay`` seconds after it arrived."""
    loop = asyncio.get_running_loop()
    # Bounded, so a slow reader at the far end holds back the sender (16 MB at most).
    line: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=256)

    async def read() -> None:
        while True:
            try:
                data = await reader.read(_CHUNK)
            except ConnectionError:
                data = b""
            await line.put((loop.time() + delay, data))
            if not data:
                return

    async def write() -> None:
        while True:
            due, data = await line.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if writer.can_write_eof():
                    with contextlib.suppress(OSError):
                        writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    reading = asyncio.ensure_future(read())
    try:
        await write()
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading


async def _relay_one(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    target: tuple[str, int],
    delay: float,
) -> None:
    server_writer = None
    try:
        await asyncio.sleep(delay)
        server_reader, server_writer = await asyncio.open_connection(*target)
        await asyncio.gather(
            _delay_line(client_reader, server_writer, delay),
            _delay_line(server_reader, client_writer, delay),
        )
    except (ConnectionError, OSError):
        pass  # one side went away: close both, as a link would
    finally:
        for writer in (client_writer, server_writer):
            if writer is not None:
                writer.close()


async def serve(listen: tuple[str, int], target: tuple[str, int], delay: float) -> None:
    """Relay connections to ``listen`` to ``target`` until cancelled or signalled."""
    tasks: set[asyncio.Task[None]] = set()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await _relay_one(reader, writer, target, delay)
        finally:
            tasks.discard(task)

    server = await asyncio.start_server(accepted, *listen, reuse_address=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(
        f"relaying {listen[0]}:{listen[1]} -> {target[0]}:{target[1]} with {delay}s each way",
        flush=True,
    )
    async with server:
        await stop.wait()
    for task in list(tasks):
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--listen", required=True, type=_address, help="host:port to accept on")
    parser.add_argument("--to", required=True, type=_address, help="host:port to relay to")
    parser.add_argument("--delay", required=True, type=float, help="seconds, each way")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.listen, args.to, args.delay))
    return 0


class Relay:
    """The relay as a process of a test, listening on ``host`` (a free port) and
    relaying to ``target`` with ``delay`` seconds each way; ``prefix`` runs it in
    a host of the bed (``bed.prefix(name)``). ``address`` is where to connect."""

    def __init__(
        self,
        target: tuple[str, int],
        delay: float,
        log_dir: Path,
        *,
        host: str = "127.0.0.1",
        prefix: Sequence[str] = (),
        name: str = "relay",
    ) -> None:
        self.port = free_port()
        self.address = (host, self.port)
        argv = [*prefix, PYTHON, "-m", "tests.support.relay", "--listen", f"{host}:{self.port}"]
        argv += ["--to", f"{target[0]}:{target[1]}", "--delay", str(delay)]
        self.proc = Proc(name, argv, {}, log_dir / f"{name}.log")
        wait_until(self._ready, 30, what="the relay to listen")

    def _ready(self) -> bool:
        assert self.proc.alive(), self.proc.log()
        return "relaying" in self.proc.log()

    def close(self) -> None:
        self.proc.stop(10)
        self.proc.close()


if __name__ == "__main__":
    raise SystemExit(main())
