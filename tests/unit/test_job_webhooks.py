"""Job webhooks' contract: the config, the signature, the body, the backoff; and the
stall rule that adds the "stalled" event (jobs/webhooks.py, jobs/stalls.py)."""

from __future__ import annotations

import json

import pytest
from scrapy.exceptions import NotConfigured

from spiders_project.config import ConfigError, load_settings
from spiders_project.jobs.stalls import NOTHING, Stall, stall_of
from spiders_project.jobs.webhooks import (
    WebhookConfig,
    event_body,
    retry_delay,
    shown,
    sign,
    url_tag,
)
from spiders_project.read_model.job_progress import JobProgress


def config(**settings: object) -> WebhookConfig:
    return WebhookConfig.from_settings(load_settings(settings))


def test_off_without_urls_and_the_defaults_with_them():
    with pytest.raises(NotConfigured):
        config()
    with pytest.raises(NotConfigured):
        config(JOB_WEBHOOK_URLS=" , ", JOB_WEBHOOK_SECRET="s")
    got = config(
        JOB_WEBHOOK_URLS="https://a.example/hook, http://b.example:8080/x,https://a.example/hook",
        JOB_WEBHOOK_SECRET="s",
    )
    # Comma-separated as the environment gives it; a URL named twice is sent once.
    assert got.urls == ("https://a.example/hook", "http://b.example:8080/x")
    assert (got.timeout, got.retry_delay, got.retry_max_delay, got.max_age) == (5, 10, 300, 3600)
    listed = config(JOB_WEBHOOK_URLS='["https://a.example/?x=1,2"]', JOB_WEBHOOK_SECRET="s")
    assert listed.urls == ("https://a.example/?x=1,2",)


def test_urls_need_a_secret_and_bad_values_are_one_line_naming_the_setting():
    with pytest.raises(ConfigError, match=r"^JOB_WEBHOOK_SECRET='': is empty: JOB_WEBHOOK_URLS"):
        config(JOB_WEBHOOK_URLS="https://a.example/")
    with pytest.raises(ConfigError) as caught:
        config(
            JOB_WEBHOOK_URLS="https://a.example/?token=t0k3n,ftp://u:pw@b.example/f?key=k3y",
            JOB_WEBHOOK_SECRET="s",
        )
    message = str(caught.value)
    assert message == "JOB_WEBHOOK_URLS=...: 'ftp://b.example/f' is not an http(s) URL"
    with pytest.raises(ConfigError, match="JOB_WEBHOOK_URLS.*is not an http"):
        config(JOB_WEBHOOK_URLS="https://a.example:99999/", JOB_WEBHOOK_SECRET="s")
    with pytest.raises(ConfigError, match=r"JOB_WEBHOOK_RETRY_DELAY=5.0: must be more than"):
        config(JOB_WEBHOOK_URLS="https://a/", JOB_WEBHOOK_SECRET="s", JOB_WEBHOOK_RETRY_DELAY=5.0)
    with pytest.raises(ConfigError, match="JOB_WEBHOOK_RETRY_MAX_DELAY"):
        config(JOB_WEBHOOK_URLS="https://a/", JOB_WEBHOOK_SECRET="s", JOB_WEBHOOK_RETRY_MAX_DELAY=1)
    with pytest.raises(ConfigError, match="JOB_WEBHOOK_MAX_AGE='x': not a number"):
        config(JOB_WEBHOOK_URLS="https://a/", JOB_WEBHOOK_SECRET="s", JOB_WEBHOOK_MAX_AGE="x")


def test_the_signature_is_hmac_sha256_of_the_raw_body_in_hex():
    # RFC 4231, test case 2.
    assert sign(b"what do ya want for nothing?", "Jefe") == (
        "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )
    assert sign(b"{}", "a") != sign(b"{}", "b") != sign(b"{ }", "b")


def test_the_backoff_doubles_from_the_first_delay_up_to_the_cap():
    assert [retry_delay(n, 10, 300) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]
    assert retry_delay(0, 10, 300) == 0
    assert retry_delay(10_000, 10, 300) == 300
    # An hour of retries at the defaults: a handful of tries, not thousands.
    waited, tries = 0.0, 0
    while waited < 3600:
        tries += 1
        waited += retry_delay(tries, 10, 300)
    assert tries == 16


def test_the_body_is_the_events_fields_with_its_id_and_numbers_as_numbers():
    fields = {
        b"job": b"shop-x",
        b"state": b"paused",
        b"via": b"pause",
        b"at": b"1790000000000",
        b"pages": b"12",
        b"queued": b"not a number",
        b"by": b"ops@host",
        b"id": b"forged",
    }
    body = event_body("distributed", "1790000000000-0", fields)
    assert json.loads(body) == {
        "id": "1790000000000-0",
        "spider": "distributed",
        "job": "shop-x",
        "state": "paused",
        "via": "pause",
        "at": 1790000000000,
        "pages": 12,
        "queued": "not a number",
        "by": "ops@host",
    }
    assert body.startswith(b'{"id":"1790000000000-0","spider":"distributed","job"')


def test_urls_are_logged_and_stored_without_their_secrets():
    assert shown("https://user:pw@hooks.example:8443/in?token=t") == "https://hooks.example:8443/in"
    tag = url_tag("https://hooks.example/in?token=t")
    assert len(tag) == 16 and "t" not in tag.strip("0123456789abcdef")


def progress(state="running", queued=3, backing_off=0, pages=5, started="2030-01-01T00:00:00"):
    job = JobProgress("A", state=state, queued=queued, backing_off=backing_off, pages=pages)
    job.started_at = started
    job.totals = {"pages": pages}
    return job


def test_a_stall_begins_is_said_once_and_ends_with_a_page_a_new_run_or_a_pause():
    stall = 600_000
    first = stall_of(progress(), None, 1_000, stall)
    assert first == Stall(mark="1000 0 2030-01-01T00:00:00|5")
    mark = first.mark
    assert stall_of(progress(), mark, 1_000 + stall - 1, stall) == NOTHING
    assert stall_of(progress(), mark, 1_000 + stall, stall) == Stall(say=True)
    # Once said (the script sets the 1), never again for this stall.
    said = "1000 1 2030-01-01T00:00:00|5"
    assert stall_of(progress(), said, 10 * stall, stall) == NOTHING
    # A page fetched, or a new run, starts over.
    assert stall_of(progress(pages=6), said, 10 * stall, stall).mark == (
        f"{10 * stall} 0 2030-01-01T00:00:00|6"
    )
    assert stall_of(progress(started="2030-01-02T00:00:00"), said, 5, stall).mark == (
        "5 0 2030-01-02T00:00:00|5"
    )
    # Retries backing off count as queued, as the alert's crawler_job_queued does.
    assert stall_of(progress(queued=0, backing_off=2), mark, 1_000 + stall, stall).say
    # Nothing queued, or not running: no stall, and the mark goes.
    for job in (progress(queued=0), progress(state="paused"), progress(state="finished")):
        assert stall_of(job, mark, 1_000 + stall, stall) == Stall(clear=True)
        assert stall_of(job, None, 1_000 + stall, stall) == NOTHING
    assert stall_of(progress(), "garbage", 7, stall).mark == "7 0 2030-01-01T00:00:00|5"
