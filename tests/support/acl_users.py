"""The Redis users of ``scrapy redis-acl`` for tests: the file it prints, test
passwords, and servers that load it.

Each server gets the generated file plus one user of the test's own,
``acl-admin``, to set things up and read Redis' ``ACL LOG`` (every command
or key refused to anyone since the server started): a test asserts it is empty.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

import redis

from spiders_project.redis_access.acl import ROLES, SERVER_ROLES, role_named
from tests.support.processes import PYTHON, ROOT
from tests.support.services import RedisServer

PASSWORDS = {role.name: f"pw-{role.name}-1" for role in (*ROLES, *SERVER_ROLES)}
ENV = {role.password_setting: PASSWORDS[role.name] for role in ROLES}
# With the replica's and the sentinels' users too.
SERVERS_ENV = {role.password_setting: PASSWORDS[role.name] for role in SERVER_ROLES}
ADMIN = ("acl-admin", "admin-pw")
ADMIN_LINE = f"user {ADMIN[0]} on >{ADMIN[1]} +@all ~* &*"
# As docs/SECURITY.md has the servers run: RESTORE (the operator's, for
# crawlmove) checks the payloads it is given.
SERVER_OPTIONS = ("--sanitize-dump-payload", "yes")


@functools.cache
def acl_text(*spiders: str, cluster: bool = False, servers: bool = False) -> str:
    """What ``scrapy redis-acl --spider ...`` prints with the test passwords."""
    argv = [PYTHON, "-m", "scrapy", "redis-acl"]
    for spider in spiders:
        argv += ["--spider", spider]
    env = {**os.environ, **ENV, **(SERVERS_ENV if servers else {})}
    env["REDIS_CLUSTER"] = "true" if cluster else "false"
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def write_acl_file(folder: Path, text: str) -> Path:
    """``text`` and the test's admin user, as an ACL file in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "users.acl"
    path.write_text(text + ADMIN_LINE + "\n")
    return path


def role_url(role: str, port: int, host: str = "127.0.0.1") -> str:
    """REDIS_URL of a process of ``role``: its user and password."""
    return f"redis://{role_named(role).user}:{PASSWORDS[role]}@{host}:{port}/0"


def denials(clients: Iterable[redis.Redis]) -> list[dict]:
    """Every refusal in the ACL LOG of each server (admin clients)."""
    return [entry for client in clients for entry in client.acl_log()]


class AclRedis:
    """A redis-server with the generated users (and the test admin as its client)."""

    def __init__(self, folder: Path, text: str) -> None:
        self.file = write_acl_file(folder, text)
        # DEBUG enabled, so that refusing it is the ACL's doing, not the server's default.
        options = ("--enable-debug-command", "yes", *SERVER_OPTIONS)
        self.server = RedisServer("--aclfile", str(self.file), *options, datadir=folder)
        self.port = self.server.port
        self.admin = redis.Redis(port=self.port, username=ADMIN[0], password=ADMIN[1])

    def url(self, role: str) -> str:
        return role_url(role, self.port)

    def client(self, role: str) -> redis.Redis:
        return redis.Redis.from_url(self.url(role))

    def denials(self) -> list[dict]:
        return denials([self.admin])

    def close(self) -> None:
        self.admin.close()
        self.server.stop()
