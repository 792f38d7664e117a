"""WARC archives: every fetch a worker makes, kept as WARC 1.1 (docs/ARCHIVE.md).

- what is captured and when: :mod:`.middleware` (``ArchiveMiddleware``, a
  downloader middleware that sees the body before HttpCompressionMiddleware
  undoes its Content-Encoding); :mod:`.revisits` turns recrawl's one
  unchanged rule (``recrawl/unchanged.py``) into a WARC revisit record;
- the records themselves (request, response, revisit, rendered DOM,
  warcinfo), built with warcio, one gzip member each: :mod:`.records`;
- files: names in :mod:`.naming`, opened, rotated at ``WARC_MAX_SIZE`` and
  renamed when closed in :mod:`.files`, written off the reactor by the thread
  of :mod:`.writer`, a ``.open`` file left by a killed worker made whole in
  :mod:`.recovery`;
- reading them back: :mod:`.index` (``scrapy warc index``);
- the ``WARC_*`` settings: :mod:`.config`.
"""
