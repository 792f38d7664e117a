"""What counts as a ban: HTTP codes and body patterns from the settings (politeness/bans.py)."""

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, TextResponse

from spiders_project.config import ConfigError, load_settings
from spiders_project.politeness.bans import BanRules


def test_ban_rules():
    rules = BanRules.from_settings(
        load_settings({"BAN_HTTP_CODES": "403,429", "BAN_BODY_PATTERNS": '["captcha", "a,b"]'})
    )
    request = Request("http://h/")

    def response(status=200, body=b"<html>fine</html>", cls=HtmlResponse):
        return cls("http://h/", status=status, body=body, request=request)

    assert rules.reason(response()) is None
    assert rules.reason(response(403)) == "HTTP 403"
    assert rules.reason(response(body=b"solve the captcha")) == "body matches 'captcha'"
    assert rules.reason(response(body=b"x a,b y")) == "body matches 'a,b'"
    assert rules.reason(response(body=b"captcha", cls=TextResponse)) is not None
    with pytest.raises(ConfigError):
        BanRules.from_settings(load_settings({"BAN_BODY_PATTERNS": '["("]'}))
    with pytest.raises(ConfigError):
        BanRules.from_settings(load_settings({"BAN_HTTP_CODES": "forbidden"}))
