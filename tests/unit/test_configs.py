"""Every component's typed config, in-process: the project's defaults read, bad values named.

``tests/integration/test_config_errors.py`` checks that each entry point turns
these errors into one line and exit status 2; here each config object is
checked on its own, from the same settings ``scrapy crawl -s`` would give it.
A module's config is checked in its module's file (test_writer.py,
test_redis_connection.py, test_heartbeat.py, ...); the case here reads
several at once, from the text the environment gives.
"""

from __future__ import annotations

from monitor.config import MonitorConfig
from spiders_project.config import load_settings
from spiders_project.db_writer.writer import WriterConfig
from spiders_project.item_buffer.backpressure import BackpressureConfig
from spiders_project.worker.heartbeat import StatsPublishConfig


def test_values_arrive_typed_from_text_as_the_environment_gives_them():
    settings = load_settings(
        {
            "DB_WRITER_BATCH_SIZE": "250",
            "DB_WRITER_RETRY_BACKOFF": "0.5",
            "MONITOR_SPIDERS": " a, b ,a,",
            "MONITOR_PORT": "9500",
            "STATS_PUBLISH_INTERVAL": "2",
            "ITEM_BUFFER_MAX": "0",
        }
    )
    writer = WriterConfig.from_settings(settings)
    assert (writer.batch_size, writer.retry_backoff) == (250, 0.5)
    monitor = MonitorConfig.from_settings(settings)
    assert monitor.spiders == ("a", "b") and monitor.port == 9500
    assert StatsPublishConfig.from_settings(settings).interval == 2.0
    assert BackpressureConfig.from_settings(settings).limit == 0  # 0: no bound
