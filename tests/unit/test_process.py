"""The start-up every process shares (spiders_project.process): command line, settings, signals.

The processes themselves are run whole by tests/integration (test_db_writer,
test_monitor, test_config_errors) and tests/e2e/test_demo.py.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from spiders_project.config import ConfigError
from spiders_project.process import (
    STOP_SIGNALS,
    command_line,
    exit_on_bad_config,
    ignore_stop_signals,
    on_stop_signals,
    start,
)


@pytest.fixture
def handlers() -> Iterator[None]:
    """Give SIGTERM and SIGINT back the handlers they had before the test."""
    before = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    yield
    for signum, handler in before.items():
        signal.signal(signum, handler)


@pytest.fixture
def basic_config(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What start() passes to logging.basicConfig, which the test process keeps unconfigured."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kwargs: calls.append(kwargs))
    return calls


def test_start_applies_the_settings_options_and_logs_at_log_level(
    basic_config: list[dict[str, Any]],
) -> None:
    parser = command_line("python -m thing", "A thing.")
    parser.add_argument("--once", action="store_true")
    args, settings = start("thing", parser, ["-s", "LOG_LEVEL=DEBUG", "--set", "X=a=b", "--once"])
    assert args.once and args.overrides == {"LOG_LEVEL": "DEBUG", "X": "a=b"}
    assert settings.get("X") == "a=b"
    assert settings.getpriority("X") == settings.getpriority("LOG_LEVEL")
    assert [call["level"] for call in basic_config] == ["DEBUG"]
    assert basic_config[0]["format"] == "%(asctime)s [%(name)s] %(levelname)s: %(message)s"


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ("NOVALUE", "-s expects NAME=VALUE, not 'NOVALUE'"),  # argparse's usage error
        (
            "LOG_LEVEL=LOUD",  # one line, before logging exists
            "thing: ERROR: LOG_LEVEL='LOUD': must be one of CRITICAL, ERROR, WARNING, INFO, DEBUG",
        ),
    ],
)
def test_a_bad_option_or_log_level_is_status_2_before_logging(
    capsys: pytest.CaptureFixture[str],
    basic_config: list[dict[str, Any]],
    option: str,
    error: str,
) -> None:
    with pytest.raises(SystemExit) as exited:
        start("thing", command_line("python -m thing", "A thing."), ["-s", option])
    assert exited.value.code == 2
    assert error in capsys.readouterr().err.splitlines()[-1]
    assert basic_config == []


def test_a_command_line_without_settings_option() -> None:
    parser = command_line("python -m demo", "A demo.", settings_option=False)
    with pytest.raises(SystemExit):
        parser.parse_args(["-s", "X=1"])


def test_a_bad_config_is_one_log_line_and_status_2(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("thing")

    class BadUrl(ValueError):
        pass

    for error in (ConfigError("X='y': not an integer"), BadUrl("DB_URL 'z' is not a URL")):
        caplog.clear()
        with pytest.raises(SystemExit) as exited, exit_on_bad_config(logger, BadUrl):
            raise error
        assert exited.value.code == 2
        assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
            ("thing", "ERROR", str(error))
        ]
    with pytest.raises(KeyError), exit_on_bad_config(logger):
        raise KeyError("not a config error")


@pytest.mark.usefixtures("handlers")
def test_a_stop_signal_requests_a_stop_and_the_second_kills() -> None:
    received: list[int] = []
    on_stop_signals(received.append, second_kills=True)
    os.kill(os.getpid(), signal.SIGTERM)
    assert received == [signal.SIGTERM]
    # A second SIGTERM or SIGINT would now end the process at once.
    assert all(signal.getsignal(signum) == signal.SIG_DFL for signum in STOP_SIGNALS)


@pytest.mark.usefixtures("handlers")
def test_without_second_kills_every_signal_requests_a_stop() -> None:
    received: list[int] = []
    on_stop_signals(received.append)
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGTERM)
    assert received == [signal.SIGINT, signal.SIGTERM]
    ignore_stop_signals()
    os.kill(os.getpid(), signal.SIGTERM)
    assert received == [signal.SIGINT, signal.SIGTERM]
