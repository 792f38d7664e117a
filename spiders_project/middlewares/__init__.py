"""Downloader and spider middlewares of the project (dead letters, ...)."""
