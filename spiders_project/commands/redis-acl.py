"""``scrapy redis-acl``: Scrapy names a command after its module (see commands/redis_acl.py)."""

from spiders_project.commands.redis_acl import Command

__all__ = ["Command"]
