"""A site behind a login form with a CSRF token, and the plain Scrapy spider that logs in to it."""
