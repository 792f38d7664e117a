"""The pages of the tests' JS site (``tests/support/site.py``: ``JsSite``), and its assets.

Every page here is a shell whose content only a browser that runs its
scripts can see; see ``JsSite`` for the routes.
"""

from __future__ import annotations

import struct
import zlib

TRACKER_HOST = "tracker.localhost"

SHELL = """<!doctype html>
<html><head><meta charset="utf-8"><title>Loading</title>
<style>@font-face {{ font-family: Site; src: url(/font/site.woff2); }}
body {{ font-family: Site, sans-serif; }}</style>
<script async src="http://{tracker}:{port}/t.js"></script>
</head><body><div id="app">Loading...</div>{images}
<script>
setTimeout(function () {{
  fetch("{api}").then(function (r) {{ return r.json(); }}).then(function (d) {{
    document.title = d.title;
    var app = document.getElementById("app");
    app.textContent = "";
    var h = document.createElement("h1");
    h.id = "content";
    h.textContent = d.title;
    app.appendChild(h);
    d.links.forEach(function (href) {{
      var a = document.createElement("a");
      a.href = href;
      a.textContent = href;
      app.appendChild(a);
    }});
  }});
}}, {delay});
</script></body></html>
"""

PLAIN = """<!doctype html>
<html><head><meta charset="utf-8"><title>Plain {n}</title></head><body>
<h1 id="content">Plain {n}</h1>{links}
<script>fetch("/api/plain/{n}");</script>
</body></html>
"""

BUSY = """<!doctype html>
<html><head><title>Busy</title></head><body><p>spinning</p>
<script>window.addEventListener("load", function () {
  setTimeout(function () { for (;;) {} }, 50);
});</script></body></html>
"""

HANG = """<!doctype html>
<html><head><title>Never loads</title></head><body><p>waiting</p>
<script src="/never.js"></script></body></html>
"""


def png(size: int = 64) -> bytes:
    """A valid ``size`` x ``size`` RGB PNG with some noise, so decoding costs something."""
    rows = b"".join(
        b"\x00" + bytes((x * 7 + y * 13) % 256 for x in range(size * 3)) for y in range(size)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


# Holds {mb} MB of touched memory in its renderer for as long as it is open, then
# (after {delay} ms) shows its content and a link to the next leaking page.
LEAK = """<!doctype html>
<html><head><meta charset="utf-8"><title>Loading</title></head><body><div id="app"></div>
<script>
window.hog = [];
for (var i = 0; i < {mb}; i++) {{
  var block = new Uint8Array(1024 * 1024);
  for (var j = 0; j < block.length; j += 4096) block[j] = 1;
  window.hog.push(block);
}}
setTimeout(function () {{
  document.title = "Leak page {n}";
  var h = document.createElement("h1");
  h.id = "content";
  h.textContent = "Leak page {n}";
  document.getElementById("app").appendChild(h);
  {link}
}}, {delay});
</script></body></html>
"""

# A plain page of the mixed section: its content and links are in the HTML.
MIXED = """<!doctype html>
<html><head><meta charset="utf-8"><title>Mixed {n}</title></head><body>
<h1 id="content">Mixed {n}</h1>
<p>This page is served as plain HTML: its title, this paragraph and its links are
in the document itself, so an HTTP fetch sees everything a browser would.</p>
{links}
</body></html>
"""
