"""The db_writer's typed config (db_writer/writer.py): the defaults read, bad values named.

tests/integration/test_config_errors.py checks that the entry point turns
these errors into one line and exit status 2.
"""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.db_writer.writer import WriterConfig


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"DB_WRITER_BATCH_SIZE": "abc"}, "DB_WRITER_BATCH_SIZE"),
        ({"DB_WRITER_RETRY_BACKOFF_MAX": "0.01"}, "DB_WRITER_RETRY_BACKOFF_MAX"),
    ],
)
def test_a_bad_value_is_refused_with_the_setting_named(overrides, named):
    with pytest.raises(ConfigError, match=f"^{named}="):
        WriterConfig.from_settings(load_settings(overrides))
