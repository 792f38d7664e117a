"""JavaScript pages: rendered by Chromium through scrapy-playwright, inside the same workers.

- which requests render: :mod:`.rules` (``RenderMiddleware``), :mod:`.auto`
  (``RENDER_MODE=auto``), and the render queue they go to, :mod:`.queue_choice`
  with its frontier step in :mod:`.steps`;
- rendering them: :mod:`.handler` (``RenderingDownloadHandler``, which also
  fetches every other request over plain HTTP), with one rendered request's
  slots, deadline and crash retries in :mod:`.attempts`, page reuse in
  :mod:`.page_reuse` and :mod:`.page_pool`, browser restarts in :mod:`.restarts`,
  :mod:`.health` and :mod:`.recycle`, Playwright's driver in :mod:`.driver`,
  closing in the background in :mod:`.background`, the cookie jars' contexts
  in :mod:`.context_cookies`;
- what a page loads: :mod:`.blocking` and :mod:`.page_interception`; the ``RENDER_*``
  settings: :mod:`.config`.

See docs/RENDERING.md.
"""
