"""The bundled demo: a local site (``site.SiteServer``) and, later, the demo crawl."""
