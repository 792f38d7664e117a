"""Dead letters: requests that failed for good, kept in ``<spider>:dead``.

The letter format and the requeue logic (``letters``) and the downloader
middleware that writes them (``middleware``); ``scrapy deadletters`` reads,
requeues and purges them through ``letters``.
"""
