"""The db_writer: moves items from the Redis buffer ``<spider>:items`` into DB_URL.

A process of its own (``python -m spiders_project.db_writer``), so crawling
never waits for the database. Items are delivered at least once and written
with an upsert on ``url``, which makes the replays after a crash harmless.
"""
