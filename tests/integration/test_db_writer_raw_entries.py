"""The db_writer draining header-and-item entries (``keys/item_entries.py``) beside the
JSON entries of the previous releases, into SQLite and a real PostgreSQL: a buffer
written before the upgrade drains with the new one, newer wins across the formats,
and a bad entry is one log line and set aside in ``items:rejected``, the rest written."""

from __future__ import annotations

from pathlib import Path

import orjson
import redis

from spiders_project.item_buffer.buffer import encode_entry
from spiders_project.keys.item_entries import encode_raw
from tests.integration import test_db_writer as base
from tests.integration.test_db_writer import KEYS, Database, push_many, run_writer, stat
from tests.support.processes import items_in_hand

client = base.client
database = base.database
pg_database = base.pg_database
pg_server = base.pg_server

AT = "2026-11-24T10:00:00.000000+00:00"
LATER = "2026-11-24T11:00:00.000000+00:00"


def raw(key: str, item: bytes, at: str = AT) -> bytes:
    entry = encode_raw("ProductItem", key, f"https://shop.test/{key}", at, item)
    assert entry is not None
    return entry


def test_a_buffer_of_both_formats_drains_newer_wins_and_bad_entries_set_aside(
    database: Database, client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    item = {"sku": "s1", "name": "caf\u00e9", "price": 1.5, "tags": ["a", "b"]}
    # Written by the previous release (JSON entries, and the release before's bare item)...
    old = [
        encode_entry({**item, "v": "old"}, "ProductItem", "s1", AT),
        encode_entry({"sku": "s2", "v": "json newer"}, "ProductItem", "s2", LATER),
        orjson.dumps({"url": "https://legacy.test/", "fetched_at": AT}),
    ]
    # ... then by the new one, with the same keys, older and newer, and bad entries.
    new = [
        raw("s1", orjson.dumps({**item, "v": "new"}), LATER),
        raw("s2", orjson.dumps({"sku": "s2", "v": "raw older"}), AT),
        raw("s3", orjson.dumps({"sku": "s3"})),
    ]
    bad = [b"\x01ProductItem\x00cut", raw("s4", b'{"sku": "s4"'), b"\x01\xff\x00k\x00\x00\x00{}"]
    entries = [old[0], bad[0], old[1], new[0], old[2], bad[1], new[1], new[2], bad[2]]
    push_many(client, KEYS.items, entries)

    done = run_writer(tmp_path, redis_url, database.url, "-s", "DB_WRITER_BATCH_SIZE=4")

    assert done.returncode == 0, done.stderr
    stored = database.items()
    assert stored == {
        ("distributed", "ProductItem", "s1"): ("https://shop.test/s1", {**item, "v": "new"}, LATER),
        ("distributed", "ProductItem", "s2"): (None, {"sku": "s2", "v": "json newer"}, LATER),
        ("distributed", "ProductItem", "s3"): ("https://shop.test/s3", {"sku": "s3"}, AT),
        ("distributed", "PageItem", "https://legacy.test/"): (
            "https://legacy.test/",
            {"url": "https://legacy.test/", "fetched_at": AT},
            AT,
        ),
    }
    assert client.lrange(KEYS.items_rejected, 0, -1) == bad
    assert client.llen(KEYS.items) == 0 and items_in_hand(client) == 0
    assert (stat(client, "items_written"), stat(client, "rejected")) == (6, 3)
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 3 and "cut short" in warnings[1], done.stderr
    assert "Traceback" not in done.stderr


def test_postgresql_refuses_an_items_bad_json_alone(
    pg_database: Database, client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    # The braces are there, so the writer passes it on unparsed; JSONB refuses it,
    # and the writer's split finds it among the batch's good rows (a COPY's batch).
    bad = raw("bad", b'{"sku": nope}')
    entries = [raw(f"s{i}", orjson.dumps({"sku": f"s{i}"})) for i in range(10)]
    entries.insert(6, bad)
    push_many(client, KEYS.items, entries)

    done = run_writer(tmp_path, redis_url, pg_database.url)

    assert done.returncode == 0, done.stderr
    keys = sorted(key for _, _, key in pg_database.items())
    assert keys == sorted(f"s{i}" for i in range(10))
    assert client.lrange(KEYS.items_rejected, 0, -1) == [bad]
    assert (stat(client, "items_written"), stat(client, "rejected")) == (10, 1)
    refused = [line for line in done.stderr.splitlines() if "refused" in line]
    assert len(refused) == 1 and "InvalidTextRepresentation" in refused[0], done.stderr
    assert "Traceback" not in done.stderr
