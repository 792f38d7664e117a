"""Every request-meta key the project defines is spelled once, in spiders_project/crawl/meta.py.

Read from the code: a string literal used as a meta key anywhere in the
product (``meta["x"]``, ``meta.get("x")``, ``.pop``, ``.setdefault``, ``"x" in
meta``) must be a key of Scrapy or scrapy-playwright; the project's own keys
are used through meta.py's names, so a reader finds who writes and who reads
each one there.
"""

from __future__ import annotations

import ast
from pathlib import Path

from spiders_project.crawl import meta

ROOT = Path(__file__).resolve().parents[2]

# Keys that Scrapy and its bundled components define (request.meta docs) and
# scrapy-playwright's, which every "playwright_..." key is.
THEIRS = {
    "depth",
    "retry_times",
    "max_retry_times",
    "dont_retry",
    "dont_redirect",
    "dont_filter",
    "redirect_urls",
    "redirect_reasons",
    "proxy",
    "_auth_proxy",
    "download_timeout",
    "download_slot",
    "download_latency",
    "priority_adjust",
    "handle_httpstatus_list",
    "handle_httpstatus_all",
    "cookiejar",
    "dont_merge_cookies",
    "playwright",
}


def _is_meta(node: ast.AST) -> bool:
    """``meta``, ``x.meta`` or ``d["meta"]``."""
    if isinstance(node, ast.Name):
        return node.id == "meta"
    if isinstance(node, ast.Attribute):
        return node.attr == "meta"
    return False


def literal_keys(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        key: ast.AST | None = None
        if isinstance(node, ast.Subscript) and _is_meta(node.value):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop", "setdefault")
            and _is_meta(node.func.value)
            and node.args
        ):
            key = node.args[0]
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and _is_meta(node.comparators[0])
        ):
            key = node.left
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            found.append((node.lineno, key.value))
    return found


def test_the_product_names_its_own_meta_keys_only_through_meta_py():
    strays = []
    for path in sorted((ROOT / "spiders_project").rglob("*.py")) + sorted(
        (ROOT / "monitor").rglob("*.py")
    ):
        if path.name == "meta.py":
            continue
        for line, key in literal_keys(ast.parse(path.read_text())):
            if key not in THEIRS and not key.startswith("playwright_"):
                strays.append(f"{path.relative_to(ROOT)}:{line}: {key!r}")
    assert strays == []


def test_each_key_of_meta_py_is_distinct_and_says_who_writes_and_reads_it():
    source = (ROOT / "spiders_project" / "crawl" / "meta.py").read_text().splitlines()
    names = [n for n in vars(meta) if n.isupper()]
    values = [getattr(meta, n) for n in names]
    assert len(set(values)) == len(values)
    for name in names:
        line = next(i for i, text in enumerate(source) if text.startswith(f"{name} = "))
        block = []
        for text in reversed(source[:line]):
            if not text.startswith("# ") or text.startswith("# ---"):
                break
            block.append(text)
        comment = " ".join(text[2:] for text in reversed(block)).lower()
        assert "written by" in comment and "read" in comment, name
        assert "stored" in comment, name  # whether the frontier keeps it


def test_the_walk_finds_each_way_a_key_is_used():
    tree = ast.parse(
        'a = request.meta["x"]\nb = meta.get("y")\nrequest.meta.pop("z", None)\n'
        'c = "w" in response.meta\nrequest.meta.setdefault("v", 1)\nd = meta[KEY]\n'
    )
    assert [key for _, key in literal_keys(tree)] == ["x", "y", "z", "w", "v"]
