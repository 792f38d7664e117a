"""The crawl's nouns every part shares: request meta keys, a URL's host, a body's digest."""
