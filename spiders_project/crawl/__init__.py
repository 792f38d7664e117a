"""The crawl's nouns every part shares: request meta keys, a URL's host and its public
suffix, a body's digest."""
