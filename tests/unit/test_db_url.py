"""DB_URL parsing: the SQLAlchemy spellings we accept, and one-line errors for the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from spiders_project.db_writer.db_url import POSTGRESQL, SQLITE, DbUrlError, parse_db_url


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///data/items.db", Path("data/items.db")),
        ("sqlite:////var/lib/crawl/items.db", Path("/var/lib/crawl/items.db")),
        ("SQLite:///x.db", Path("x.db")),
    ],
)
def test_sqlite_paths(url: str, path: Path) -> None:
    parsed = parse_db_url(url)
    assert (parsed.backend, parsed.path, parsed.conninfo) == (SQLITE, path, None)


@pytest.mark.parametrize(
    ("url", "conninfo"),
    [
        ("postgresql://u:p@db.host:5433/items", "postgresql://u:p@db.host:5433/items"),
        ("postgres://db.host/items", "postgresql://db.host/items"),
        (
            "postgresql+psycopg://u@db.host/items?sslmode=require",
            "postgresql://u@db.host/items?sslmode=require",
        ),
        ("postgresql://h1:5432,h2:5432/items", "postgresql://h1:5432,h2:5432/items"),
        (
            "postgresql://u@localhost:5432/items?sslmode=verify-full&sslrootcert=/etc/ca.crt"
            "&sslcert=/etc/c.crt&sslkey=/etc/c.key",
            "postgresql://u@localhost:5432/items?sslmode=verify-full&sslrootcert=/etc/ca.crt"
            "&sslcert=/etc/c.crt&sslkey=/etc/c.key",
        ),
    ],
)
def test_postgresql_conninfo(url: str, conninfo: str) -> None:
    parsed = parse_db_url(url)
    assert (parsed.backend, parsed.conninfo, parsed.path) == (POSTGRESQL, conninfo, None)


@pytest.mark.parametrize(
    ("url", "redacted"),
    [
        ("postgresql://u:s3cret@h:5432/db", "postgresql://u:***@h:5432/db"),
        (
            "postgresql://u@h/db?password=s3cret&sslmode=require",
            "postgresql://u@h/db?password=***&sslmode=require",
        ),
        ("sqlite:///data/items.db", "sqlite:///data/items.db"),
        ("postgres://h/db", "postgres://h/db"),
        (
            "postgresql://u:pw@h/db?sslmode=verify-full&sslkey=/k.key&sslpassword=keypass",
            "postgresql://u:***@h/db?sslmode=verify-full&sslkey=/k.key&sslpassword=***",
        ),
    ],
)
def test_redacted_hides_passwords(url: str, redacted: str) -> None:
    assert parse_db_url(url).redacted() == redacted


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u:s3cret@h/db", "unsupported scheme 'mysql'"),
        ("data/items.db", "is not a URL"),
        ("sqlite://", "names no file"),
        ("sqlite:///:memory:", "names no file"),
        ("sqlite://host/items.db", "has no host"),
        ("sqlite:///items.db?mode=ro", "query parameters"),
        ("postgresql://u:s3cret@h", "names no database"),
        ("postgresql://h:port/db", "not a valid URL"),
    ],
)
def test_errors_are_one_line_without_password(url: str, message: str) -> None:
    with pytest.raises(DbUrlError) as caught:
        parse_db_url(url)
    text = str(caught.value)
    assert message in text
    assert "\n" not in text and "s3cret" not in text
