"""The operators' console: ``python -m monitor`` serves it at ``/`` beside ``/metrics``
when ``CONSOLE_HTPASSWD`` names an htpasswd file (docs/OPERATIONS.md, "Console").

- :mod:`monitor.console.app`: the aiohttp application, its routes and headers;
- :mod:`monitor.console.auth`: the users (htpasswd, bcrypt), sessions, the login
  throttle and the CSRF check;
- :mod:`monitor.console.reads` and :mod:`monitor.console.host_reads`: what each
  page reads, bounded (no SCAN, no whole queue), through the monitor's own
  read-only Redis connection and the read model;
- :mod:`monitor.console.host_sweep`: the hosts ranked and named by a sweep in
  the background, at a bounded pace, which the hosts page reads from memory;
- :mod:`monitor.console.pages`: the pages, server-rendered (jinja2, autoescaped)
  and refreshed by ``static/console.js``;
- :mod:`monitor.console.actions`: what an operator does, through the feature code
  the commands call, on the operator's own Redis connection; the one console
  module that imports feature packages (tests/unit/test_layers.py);
- :mod:`monitor.console.archive`: the latest captures of a URL (WARC_ENABLED).
"""
