"""The db_writer stores into PostgreSQL over TLS with ``sslmode=verify-full``.

A private PostgreSQL cluster with ``ssl=on`` and the test PKI's server
certificate (it names localhost and 127.0.0.1); the real db_writer is given
only a DB_URL whose libpq parameters ask for a verified certificate and host
name. A root certificate that did not sign the server's is refused with one
line, the password masked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from tests.integration.test_db_writer import KEYS, numbered_items, push_many, run_writer
from tests.support.services import PostgresServer, find_pg_ctl
from tests.support.tls import Pki, make_pki

PASSWORD = "pg-s3cret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_postgres(pki: Pki) -> Iterator[PostgresServer]:
    if find_pg_ctl() is None:
        pytest.fail("pg_ctl not found (make setup installs PostgreSQL)")
    server = PostgresServer("tls_items", tls=pki)
    yield server
    server.stop()


def db_url(server: PostgresServer, root: Path) -> str:
    # The cluster trusts 127.0.0.1, so the password is not checked: it is
    # there to be masked in the lines the writer prints.
    return (
        f"postgresql://postgres:{PASSWORD}@localhost:{server.port}/{server.dbname}"
        f"?sslmode=verify-full&sslrootcert={root}"
    )


def test_items_land_over_verified_tls(
    tls_postgres: PostgresServer, pki: Pki, redis_url: str, tmp_path: Path
) -> None:
    url = db_url(tls_postgres, pki.ca)
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
        assert row == (True,), "the server did not speak TLS"
    client = redis.Redis.from_url(redis_url)
    push_many(client, KEYS.items, numbered_items(40, 40, lambda i: 1))
    done = run_writer(tmp_path, redis_url, url)
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stderr + done.stdout
    with psycopg.connect(url) as conn:
        stored = conn.execute("SELECT count(*) FROM items").fetchone()
    assert stored == (40,)
    assert client.llen(KEYS.items) == 0
    client.close()


def test_a_root_certificate_that_signed_nothing_is_refused_in_one_line(
    tls_postgres: PostgresServer, pki: Pki, redis_url: str, tmp_path: Path
) -> None:
    done = run_writer(tmp_path, redis_url, db_url(tls_postgres, pki.other_ca))
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    refused = [line for line in lines if "cannot open the database" in line]
    assert len(refused) == 1 and "certificate verify failed" in refused[0], done.stderr
    assert "Traceback" not in done.stderr and PASSWORD not in done.stderr
    assert "postgres:***@localhost" in refused[0]
