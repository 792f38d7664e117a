"""DB_URL, spelled as SQLAlchemy spells it, parsed without SQLAlchemy.

Accepted forms::

    sqlite:///data/items.db             relative to the working directory
    sqlite:////var/lib/crawl/items.db   absolute (four slashes)
    postgresql://user:pass@host:5432/db (also postgres:// and postgresql+psycopg://)
    postgresql://user@host/db?sslmode=verify-full&sslrootcert=/etc/crawler/pg-ca.crt

libpq's query parameters (sslmode, sslrootcert, sslcert, sslkey, ...) pass
through to psycopg unchanged, so TLS with verification is libpq's own.

Anything else is a :class:`DbUrlError` whose message fits on one line, so the
db_writer can print it and exit instead of failing later with a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SQLITE = "sqlite"
POSTGRESQL = "postgresql"

_POSTGRES_SCHEMES = frozenset(
    {"postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"}
)
_SQLITE_SCHEMES = frozenset({"sqlite", "sqlite+pysqlite"})
# libpq query parameters that hold a secret: the password, and the passphrase
# of the client key (sslpassword). sslmode, sslrootcert, sslcert and sslkey
# are paths and modes, shown as they are.
SECRET_PARAMS = frozenset({"password", "sslpassword"})


class DbUrlError(ValueError):
    """DB_URL names no database this project can write to."""


@dataclass(frozen=True)
class DbUrl:
    """A parsed DB_URL: which backend, and where.

    ``path`` is set for SQLite (relative paths stay relative to the working
    directory), ``conninfo`` for PostgreSQL (a libpq URI, without the driver
    suffix SQLAlchemy allows). ``url`` is the text as configured.
    """

    backend: str
    url: str
    path: Path | None = None
    conninfo: str | None = None

    def redacted(self) -> str:
        """The URL with its password replaced by ``***``, safe for a log line."""
        return redact(self.url)


def redact(url: str) -> str:
    """``url`` without a password, whether in the user part or in the query
    (``password``, ``sslpassword``)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        userinfo, _, hostinfo = netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        netloc = f"{user}:***@{hostinfo}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(key in SECRET_PARAMS for key, _ in pairs):
            query = urlencode(
                [(k, "***" if k in SECRET_PARAMS else v) for k, v in pairs], safe="*/"
            )
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def parse_db_url(url: str) -> DbUrl:
    """Parse DB_URL; raise :class:`DbUrlError` with a one-line reason if it is unusable."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise DbUrlError(
            f"DB_URL {redact(url)!r} is not a URL (expected sqlite:///... or postgresql://...)"
        )
    if scheme in _SQLITE_SCHEMES:
        return _parse_sqlite(url, rest)
    if scheme in _POSTGRES_SCHEMES:
        return _parse_postgres(url, rest)
    raise DbUrlError(
        f"DB_URL {redact(url)!r} has unsupported scheme {scheme!r} "
        "(use sqlite:///path.db or postgresql://user:pass@host:port/db)"
    )


def _parse_sqlite(url: str, rest: str) -> DbUrl:
    # SQLAlchemy: sqlite:// + host (always empty) + / + path, so a third slash
    # starts a relative path and a fourth an absolute one.
    host, slash, path = rest.partition("/")
    if host:
        raise DbUrlError(f"DB_URL {url!r}: a sqlite URL has no host (use sqlite:///relative.db)")
    if "?" in path:
        raise DbUrlError(f"DB_URL {url!r}: query parameters are not supported for sqlite")
    if not slash or not path or path == ":memory:":
        raise DbUrlError(
            f"DB_URL {url!r} names no file; the db_writer needs one (sqlite:///data/items.db)"
        )
    return DbUrl(backend=SQLITE, url=url, path=Path(path))


def _parse_postgres(url: str, rest: str) -> DbUrl:
    conninfo = f"postgresql://{rest}"
    try:
        parts = urlsplit(conninfo)
        if "," not in parts.netloc:  # libpq allows host1:port1,host2:port2
            parts.port  # noqa: B018 - raises ValueError on a non-numeric port
    except ValueError as exc:
        raise DbUrlError(f"DB_URL {redact(url)!r} is not a valid URL: {exc}") from None
    if not parts.path.strip("/"):
        raise DbUrlError(f"DB_URL {redact(url)!r} names no database (postgresql://host/dbname)")
    return DbUrl(backend=POSTGRESQL, url=url, conninfo=conninfo)
