"""dead_letters/config.py: the switch and the retry settings of dead letters, read and checked."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.dead_letters.config import DeadLettersConfig


def test_the_project_defaults():
    config = DeadLettersConfig.from_settings(load_settings())
    assert config.enabled
    assert {500, 503, 429} <= config.retry_http_codes
    assert config.retry_priority_adjust == -1
    exceptions = config.retry_exceptions()
    assert issubclass(ConnectionRefusedError, exceptions)
    assert any(cls.__name__ == "RenderError" for cls in exceptions)


def test_values_arrive_typed_from_text_as_the_environment_gives_them():
    config = DeadLettersConfig.from_settings(
        load_settings(
            {
                "DEAD_LETTERS_ENABLED": "false",
                "RETRY_HTTP_CODES": "503, 599",
                "RETRY_PRIORITY_ADJUST": "2",
                "RETRY_EXCEPTIONS": "builtins.ConnectionRefusedError",
            }
        )
    )
    assert not config.enabled
    assert config.retry_http_codes == {503, 599}
    assert config.retry_priority_adjust == 2
    assert config.retry_exceptions() == (ConnectionRefusedError,)


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"DEAD_LETTERS_ENABLED": "perhaps"}, "DEAD_LETTERS_ENABLED"),
        ({"RETRY_HTTP_CODES": "503,teapot"}, "RETRY_HTTP_CODES"),
        ({"RETRY_PRIORITY_ADJUST": "lower"}, "RETRY_PRIORITY_ADJUST"),
    ],
)
def test_a_bad_value_is_refused_with_the_setting_named(overrides, named):
    with pytest.raises(ConfigError, match=f"^{named}="):
        DeadLettersConfig.from_settings(load_settings(overrides))
