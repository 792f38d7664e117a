"""What a crawl may reach: one form per URL, bounded traps, each seed's own limits.

- ``urls``: links normalised before fingerprinting (tracking parameters,
  default ports, host case and punycode) and the trap bounds on every link
  (``URL_MAX_LENGTH``, ``URL_MAX_REPEATED_SEGMENTS``);
- ``seed_limits``: a JSON seed's ``max_pages``, ``max_depth``, ``allow`` and
  ``deny``, carried by everything crawled from it and counted cluster-wide.
"""
