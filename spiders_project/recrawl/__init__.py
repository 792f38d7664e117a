"""Per-URL crawl state and revisits: the page-state entries a worker writes for
each fetch, its conditional requests, and the revisit intervals (issue 28)."""
