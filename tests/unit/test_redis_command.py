"""commands/redis_command.py: what the Redis-only commands share; Scrapy lists only them."""

from __future__ import annotations

import argparse

from scrapy.cmdline import _get_commands_from_module
from scrapy.commands import ScrapyCommand

from spiders_project.commands import crawlmove, crawlstatus, deadletters, dupefilter
from spiders_project.commands.redis_command import RedisCommand, redis_error

REDIS_ONLY = {
    "crawlmove": crawlmove.Command,
    "crawlstatus": crawlstatus.Command,
    "deadletters": deadletters.Command,
    "dupefilter": dupefilter.Command,
}


def test_scrapy_lists_the_commands_and_not_their_mixin():
    # What ``scrapy -h`` lists (Scrapy's own finder, private: this fails loudly if it goes).
    commands = _get_commands_from_module("spiders_project.commands", True)
    assert "redis_command" not in commands
    for name, cls in REDIS_ONLY.items():
        assert type(commands[name]) is cls


def test_each_needs_the_project_and_redis_only_and_logs_nothing():
    for name, cls in REDIS_ONLY.items():
        assert issubclass(cls, RedisCommand) and issubclass(cls, ScrapyCommand)
        command = cls()
        assert command.command_name == name
        assert command.requires_project and not command.requires_crawler_process
        assert command.default_settings == {"LOG_ENABLED": False}


def test_the_spider_option_defaults_to_the_bundled_spider():
    command = dupefilter.Command()
    parser = argparse.ArgumentParser()
    command.add_spider_option(parser, "spider whose keys to use")
    assert parser.parse_args([]).spider == "distributed"
    assert parser.parse_args(["--spider", "other"]).spider == "other"
    assert "spider whose keys to use (default distributed)" in parser.format_help()


def test_a_failure_is_one_error_line_and_status_1(capsys):
    command = deadletters.Command()
    command.fail("Redis error: ResponseError: WRONGTYPE")
    assert capsys.readouterr().err == "ERROR: Redis error: ResponseError: WRONGTYPE\n"
    assert command.exitcode == 1
    assert redis_error(ValueError("bad")) == "Redis error: ValueError: bad"
