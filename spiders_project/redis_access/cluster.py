"""Redis Cluster for the worker: a client pinned to the master of one hash slot.

Why not redis-py's asyncio ``RedisCluster`` in the worker: its transactional
pipeline runs every queued command on a thread of its own, with a new event
loop, and joins it (redis-py 8.1, ``asyncio/cluster.py``,
``TransactionStrategy.execute_command``). That blocks Scrapy's reactor for
every command of the transaction, many times what a plain client's
MULTI/EXEC costs (docs/BENCHMARKS.md, "Figures moved out of code comments"),
and the worker sends one MULTI/EXEC per tick.

Every call a worker makes touches the keys of one hash tag (``keys/``), so of
one slot, so of one master. A plain client to that master does the same work
with Redis' own MULTI/EXEC, and its connections find the master again after a
failover or a resharding the way redis-py's Sentinel connections find theirs
(``redis.asyncio.sentinel.SentinelManagedConnection``): a new connection asks
the cluster (CLUSTER SLOTS) who owns the slot, and a connection told MOVED or
ASK drops itself and raises ``ConnectionError``, which the call path retries
with its backoff (``calls.py``). The blocking processes (db_writer, monitor,
commands) use redis-py's ``RedisCluster``, whose blocking pipeline has no such
cost (``connection.sync_client``).

Over TLS (a ``rediss://`` URL) the pinned connection is an SSL connection
with the URL's ``ssl_*`` options, and so is the CLUSTER SLOTS question: the
certificate of every node is verified against the host name CLUSTER SLOTS
gives for it (an address, unless the nodes announce host names).
"""

from __future__ import annotations

import logging
from typing import Any

import redis
import redis.asyncio
from redis.crc import key_slot
from redis.exceptions import AskError, MovedError

logger = logging.getLogger(__name__)


class SlotOwner:
    """Which master owns one hash slot, asked of the cluster and kept until
    a connection finds it wrong.

    ``nodes`` starts as the node of ``REDIS_URL`` and grows with every node a
    CLUSTER SLOTS reply names, so the slot is found again when that node is
    the one that died.
    """

    def __init__(
        self,
        nodes: list[tuple[str, int]],
        slot: int,
        kwargs: dict[str, Any],
        connection_class: type[redis.asyncio.Connection] = redis.asyncio.Connection,
    ) -> None:
        self.nodes = list(dict.fromkeys(nodes))
        self.slot = slot
        self.address: tuple[str, int] | None = None
        # Connection options for the CLUSTER SLOTS question (timeouts,
        # password, and TLS: the class and every ssl_* option of the URL).
        self._kwargs = {k: v for k, v in kwargs.items() if k in _ASK_KWARGS or k.startswith("ssl_")}
        self._connection_class = connection_class

    def forget(self) -> None:
        self.address = None

    async def find(self) -> tuple[str, int]:
        """The owner's address, asking the known nodes in turn when not known."""
        if self.address is not None:
            return self.address
        errors = []
        for host, port in list(self.nodes):
            pool = redis.asyncio.ConnectionPool(
                connection_class=self._connection_class, host=host, port=port, **self._kwargs
            )
            client = redis.asyncio.Redis(connection_pool=pool)
            try:
                reply = await client.execute_command("CLUSTER", "SLOTS")
            except (redis.RedisError, OSError) as exc:
                errors.append(f"{host}:{port}: {type(exc).__name__}: {exc}")
                continue
            finally:
                await client.aclose(close_connection_pool=True)
            owner = self._learn(reply, host)
            if owner is not None:
                self.address = owner
                return owner
            errors.append(f"{host}:{port}: slot {self.slot} has no master")
        raise redis.ConnectionError(
            f"no cluster node says who owns slot {self.slot} ({'; '.join(errors)})"
        )

    def _learn(self, reply: Any, asked: str) -> tuple[str, int] | None:
        """The slot's master in a CLUSTER SLOTS reply; remembers every node named."""
        owner = None
        for start, end, master, *replicas in reply:
            for node in (master, *replicas):
                address = (_host(node[0], asked), int(node[1]))
                if address not in self.nodes:
                    self.nodes.append(address)
            if int(start) <= self.slot <= int(end):
                owner = (_host(master[0], asked), int(master[1]))
        return owner


def _host(name: Any, asked: str) -> str:
    """A CLUSTER SLOTS host: "" or "?" means the node that answered."""
    text = name.decode() if isinstance(name, bytes) else str(name)
    return text if text not in ("", "?") else asked


# What the CLUSTER SLOTS question needs of the pool's options.
_ASK_KWARGS = {"socket_timeout", "socket_connect_timeout", "username", "password"}


class PinnedConnection(redis.asyncio.Connection):
    """A connection to whichever master owns the pool's slot now (plain TCP)."""

    def __init__(self, **kwargs: Any) -> None:
        self.slot_owner: SlotOwner = kwargs.pop("slot_owner")
        super().__init__(**kwargs)

    async def connect(self) -> None:
        if self.is_connected:
            return
        self.host, self.port = await self.slot_owner.find()
        try:
            await self.connect_check_health(check_health=True, retry_socket_connect=False)
        except BaseException:
            # The master we knew is away: the next try asks the cluster again.
            self.slot_owner.forget()
            raise

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().read_response(*args, **kwargs)
        except (MovedError, AskError) as exc:
            # The slot moved (failover, resharding): drop this connection and
            # let the call path's retry connect to the new owner.
            self.slot_owner.forget()
            await self.disconnect()
            raise redis.ConnectionError(f"slot {self.slot_owner.slot} moved ({exc})") from exc


class PinnedSSLConnection(PinnedConnection, redis.asyncio.SSLConnection):
    """The same pinning over TLS (``rediss://``): ``PinnedConnection`` finds
    the master, ``SSLConnection`` verifies it with the ``ssl_*`` options."""


def pinned_async_client(url: str, slot_key: str, kwargs: dict[str, Any]) -> redis.asyncio.Redis:
    """A client whose every call goes to the master owning ``slot_key``'s slot.

    Only keys of that slot may be used with it (others answer MOVED, which it
    takes for a moved slot and retries: a bug would show as a connection
    that never settles, so ``keys/`` builds every key of a spider with its tag).
    """
    parsed = redis.asyncio.connection.parse_url(url)
    seed = (str(parsed.get("host", "127.0.0.1")), int(parsed.get("port", 6379)))
    # rediss:// names redis-py's SSLConnection: ours pins it as well.
    tls = issubclass(parsed.get("connection_class", object), redis.asyncio.SSLConnection)
    drop = ("host", "port", "db", "connection_class")
    options: dict[str, Any] = {k: v for k, v in parsed.items() if k not in drop}
    options.update(kwargs)
    ask_class = redis.asyncio.SSLConnection if tls else redis.asyncio.Connection
    owner = SlotOwner([seed], key_slot(slot_key.encode()), options, ask_class)
    pool = redis.asyncio.ConnectionPool(
        connection_class=PinnedSSLConnection if tls else PinnedConnection,
        slot_owner=owner,
        **options,
    )
    return redis.asyncio.Redis(connection_pool=pool)
