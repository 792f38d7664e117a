"""Unit tests: one module, one file named after it, as Scrapy names its tests.

- The unit tests of ``<module>.py`` sit in ``tests/unit/test_<module>.py``:
  test_hosts.py tests spiders_project/crawl/hosts.py, test_turns.py
  politeness/turns.py, test_collector.py monitor/collector.py.
- Where two packages of spiders_project/ and monitor/ have a module of the
  same file name (config.py, calls.py, pages.py, errors.py, dupefilter.py,
  ...), the package goes in front: ``test_<package>_<module>.py``, as
  test_rendering_config.py, test_runtime_calls.py, test_demo_pages.py,
  test_frontier_dupefilter.py. spiders_project/config.py itself would be
  test_config.py. A new module that makes a name shared renames the files.
- A module of the test tree (tests/bench/, tests/support/) takes its folder
  in front: test_bench_report.py, test_support_markers.py.
- A case belongs to the module whose promise it checks, even when it reaches
  that module through another: test_callbacks.py decodes entries with the
  queue, since the refusal of a callback is callbacks.py's rule.
- A test of the whole tree rather than of one module is named by what it
  checks: test_layers.py (imports and layers).
- A unit test that needs a redis-server carries ``@pytest.mark.redis``
  (tests/support/markers.py; tests/unit/conftest.py fails one without).

Whole crawls, several processes and real servers other than Redis are
tests/integration/ and tests/e2e/, named by the behaviour they check.
"""
