"""Cookie jars shared by the cluster: Scrapy's cookie semantics, every worker one jar.

A spider's default jar and each ``meta["cookiejar"]`` jar live in Redis
(``keys/cookies.py``); every worker keeps a copy as a Scrapy cookie jar, read
again when a request leased after the copy was made goes out
(``store.py``), and sends what a response changes as one script
(``lua/update.lua``) that travels ahead of that page's links and ack
(``frontier/write_behind``'s prior writes). ``middleware.py`` is Scrapy's
CookiesMiddleware on those jars, ``codec.py`` a cookie as a hash field,
``steps.py`` keeps cookie values out of what the frontier stores,
``browser.py`` is a jar's cookies in a browser context (which
``rendering/context_cookies.py`` gives a rendered page and reads back).

With ``PROXIES``, each jar that holds a session is kept on one proxy until it
is banned, for every spider (``pins.py``). A spider that says how to log in
again (``session_expired``, ``login``) has each jar logged in again once for
the cluster when the site ends its session (``logins.py``; the rules in
``sessions.py``, run in Redis by ``lua/session.lua`` through
``session_store.py``; ``chain.py`` marks a login's steps).
"""
