"""``scrapy redis-acl``: Scrapy names a command after its module (see commands/redis_acl.py)."""

from scrapy.commands import ScrapyCommand

from spiders_project.commands.redis_acl import RedisAcl


class Command(RedisAcl, ScrapyCommand):
    pass
