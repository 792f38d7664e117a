"""``scrapy redis-acl [--spider NAME]...``: print the Redis ACL file of the cluster's users.

One user per role (``spiders_project/redis_access/acl.py``): ``crawler-worker``,
``crawler-db-writer``, ``crawler-monitor`` and ``crawler-operator``, each
with the SHA-256 of its password (REDIS_ACL_*_PASSWORD), only the commands
its role sends and only the keys of the spiders named, and ``user default
off``; with REDIS_ACL_REPLICA_PASSWORD and REDIS_ACL_SENTINEL_PASSWORD set,
also ``crawler-replica`` (a replica's ``masteruser``) and ``crawler-sentinel``
(the sentinels' ``auth-user``), which touch no key. Load it with
``redis-server --aclfile FILE`` (or ``ACL LOAD``). It needs no Redis: it
reads the settings (REDIS_CLUSTER decides the keys' form) and the project's
spiders (a spider's ``redis_key`` may put its seed list outside its prefix).
A missing password is one line and exit status 2: a user without a password
would let anyone in.

Scrapy names a command of ``COMMANDS_MODULE`` after its module, and a module
named ``redis-acl`` cannot be imported by name (nor named by an entry point):
so :class:`Command` is defined here, where the ``scrapy.commands`` entry
point finds it, and claims ``commands/redis-acl.py`` as its module, which
imports it. Scrapy lists a ``COMMANDS_MODULE`` class only under the module
its ``__module__`` names, so the walk lists it once, as ``redis-acl``.
"""

from __future__ import annotations

import argparse
import sys

from scrapy.commands import ScrapyCommand
from scrapy.spiderloader import get_spider_loader

from spiders_project.commands.redis_command import DEFAULT_SPIDER, RedisCommand
from spiders_project.keys import RedisKeys, seeds_key_of
from spiders_project.redis_access.acl import AclConfig, acl_file


class RedisAcl(RedisCommand):
    """``scrapy redis-acl`` (see the module docstring)."""

    takes_arguments = False

    def syntax(self) -> str:
        return "[--spider NAME]..."

    def short_desc(self) -> str:
        return "Print the Redis ACL file of the crawler's users (redis-server --aclfile)"

    @property
    def command_name(self) -> str:
        return "redis-acl"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--spider",
            action="append",
            metavar="NAME",
            help=f"a spider whose keys the users may use; repeatable (default {DEFAULT_SPIDER})",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        names = list(dict.fromkeys(opts.spider or [DEFAULT_SPIDER]))
        with self.config_errors():
            config = AclConfig.from_settings(self.settings)
        loader = get_spider_loader(self.settings)
        known = set(loader.list())
        keys = []
        for name in names:
            # Its own seed list (redis_key), when the spider is one of this project's.
            seeds = seeds_key_of(loader.load(name)) if name in known else None
            keys.append(RedisKeys(name, seeds or "", cluster=config.cluster))
        sys.stdout.write(acl_file(config, keys))


class Command(RedisAcl, ScrapyCommand):
    """``scrapy redis-acl``, for the entry point and for ``commands/redis-acl.py``."""


Command.__module__ = "spiders_project.commands.redis-acl"
