"""JavaScript pages: rendered by Chromium through scrapy-playwright, inside the same workers.

- :mod:`.rules` decides which requests render (``RenderMiddleware``);
- :mod:`.handler` renders them (``RenderingDownloadHandler``) and fetches all
  other requests over plain HTTP;
- :mod:`.config` holds the ``RENDER_*`` settings; :mod:`.blocking` and
  :mod:`.recycle` keep pages lean and memory bounded;

See docs/RENDERING.md.
"""
