"""``python -m monitor``: the crawler's Prometheus exporter.

It reads the crawl's state from Redis when Prometheus scrapes it (no polling
loop of its own) and exposes it as ``crawler_*`` metrics. The same reading,
:func:`spiders_project.read_model.cluster_view.read_cluster`, feeds ``scrapy crawlstatus``,
the demo and the workers' idle check.
"""
