"""An operator's steering of one host: delay, cap, blocked or not (``scrapy frontier host``).

One record per steered host, strict JSON in ``<spider>:hosts:steering``
(``keys.host_steering``): every worker reads the whole hash once a second
(``politeness/steered.py``), ``scrapy crawlstatus`` and the exporter show it.
The delay and the cap are also written, as ``"<delay ms> <cap>"``, to the
host's shard (``keys.host_limits``), where the lease script reads them: a
lease call must not wait for a worker's next look to obey a lower cap.

Standard library only: the monitor reads these records without Scrapy.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# A host as the frontier names its queues (hosts.host_of): lower-case name or
# IPv4, or a bracketed IPv6 literal, and a port unless the scheme's default.
_HOST = re.compile(r"^(?:[a-z0-9_](?:[a-z0-9_.-]{0,251}[a-z0-9_])?|\[[0-9a-f:.]+\])(?::\d{1,5})?$")
# The longest delay an operator may set (seconds): one a day is a pause, not a delay.
MAX_DELAY = 86_400.0
_FIELDS = {"delay", "cap", "blocked"}


class InvalidSteering(ValueError):
    """A host name, delay or cap the frontier cannot use, or a record that is not ours."""


def check_host(host: str) -> str:
    """``host`` if it names a frontier queue (``hosts.host_of``'s form), else InvalidSteering."""
    if not _HOST.match(host) or ".." in host:
        raise InvalidSteering(
            f"not a host name: {host!r} (give it as the frontier names it: "
            "lower-case host[:port], punycode for IDN, no scheme)"
        )
    return host


def check_delay(delay: float) -> float:
    """A delay in seconds an operator may set: finite, 0 to MAX_DELAY."""
    if not math.isfinite(delay) or not 0 <= delay <= MAX_DELAY:
        raise InvalidSteering(f"--delay must be between 0 and {MAX_DELAY:g} seconds, not {delay}")
    return delay


def check_cap(cap: int) -> int:
    """A cap an operator may set: at least 1 (0 would be a block that never says so)."""
    if cap < 1:
        raise InvalidSteering(f"--cap must be at least 1 (use --block to stop a host), not {cap}")
    return cap


@dataclass(frozen=True)
class HostSteer:
    """What the operator set for one host; None: the configured value applies."""

    delay: float | None = None  # seconds between two fetches, cluster-wide
    cap: int | None = None  # requests in flight at once, cluster-wide
    blocked: bool = False

    @property
    def delay_ms(self) -> int | None:
        return None if self.delay is None else round(self.delay * 1000)

    def limits(self) -> str:
        """The lease script's ``"<delay ms> <cap>"`` (-1 and 0: none), or "" for neither."""
        if self.delay is None and self.cap is None:
            return ""
        delay_ms = self.delay_ms
        return f"{-1 if delay_ms is None else delay_ms} {self.cap or 0}"

    def to_json(self) -> str:
        return json.dumps(
            {"delay": self.delay, "cap": self.cap, "blocked": self.blocked}, sort_keys=True
        )

    @classmethod
    def from_json(cls, raw: bytes | str) -> HostSteer:
        """Strict: an object of our three fields with their types, else InvalidSteering."""
        try:
            data: Any = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidSteering(f"not JSON: {exc}") from None
        if not isinstance(data, dict) or not set(data) <= _FIELDS:
            raise InvalidSteering(f"not a steering record: {str(data)[:80]}")
        delay, cap, blocked = data.get("delay"), data.get("cap"), data.get("blocked", False)
        try:
            if delay is not None:
                if isinstance(delay, bool) or not isinstance(delay, int | float):
                    raise InvalidSteering(f"delay is not a number: {delay!r}")
                check_delay(float(delay))
            if cap is not None:
                if isinstance(cap, bool) or not isinstance(cap, int):
                    raise InvalidSteering(f"cap is not an integer: {cap!r}")
                check_cap(cap)
            if not isinstance(blocked, bool):
                raise InvalidSteering(f"blocked is not true or false: {blocked!r}")
        except InvalidSteering as exc:
            raise InvalidSteering(f"bad steering record: {exc}") from None
        return cls(None if delay is None else float(delay), cap, blocked)


def parse_steering(entries: Mapping[Any, Any]) -> tuple[dict[str, HostSteer], dict[str, str]]:
    """A ``HGETALL`` of ``host_steering`` as (host -> record, host -> why it was not read)."""
    steered: dict[str, HostSteer] = {}
    bad: dict[str, str] = {}
    for field, raw in entries.items():
        host = field.decode("utf-8", "replace") if isinstance(field, bytes) else str(field)
        try:
            steered[check_host(host)] = HostSteer.from_json(raw)
        except InvalidSteering as exc:
            bad[host] = str(exc)
    return steered, bad
