"""Per-URL crawl state and revisits, in one place.

- :mod:`.page_state`: what a URL's last fetch left, as a revisit request
  carries it (``meta.PAGE_STATE``), its conditional headers, and the outcome
  of a fetch;
- :mod:`.unchanged`: the one rule for "unchanged since the last fetch" (a 304,
  or a 2xx with the same content digest), which the middleware and the WARC
  archive both call;
- :mod:`.pages_row`: the page entry a worker writes per fetch, the row of the
  ``pages`` table it moves, and the seed a due row goes back as;
- :mod:`.revisit_rules`: how an entry moves its row (changes, failures, the
  fixed or adaptive interval, the due time): the revisit scheduler's rules;
- :mod:`.middleware`: the worker's side (conditional requests, unchanged
  answers ended before the spider, one entry per fetch outcome);
- :mod:`.config`: the ``RECRAWL_*`` and ``PAGES_ENABLED`` settings.

How rows are stored and pushed back (SQL, Redis) is the db_writer's
(``db_writer/page_store.py``, ``db_writer/revisits.py``).
"""
