"""The shared crawl frontier: scheduler, queue, dupefilter and their Redis scripts."""
