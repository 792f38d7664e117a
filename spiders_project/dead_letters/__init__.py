"""Dead letters: requests that failed for good, kept in ``<spider>:dead``.

The letter format (``letters``), the downloader middleware that writes them
(``middleware``) and the requeue logic that puts them back (``requeue``);
``scrapy deadletters`` reads and purges them through ``letters``, and
requeues them through ``requeue``.
"""
