"""The fingerprints a worker sent lately, bounded in count and age (frontier/dupefilter.py)."""

from spiders_project.frontier.dupefilter import SentFingerprints


def test_sent_fingerprints_are_bounded_and_keep_the_latest():
    sent = SentFingerprints(4)
    for i in range(9):
        sent.add(bytes([i]))
    assert len(sent) <= 4
    assert bytes([8]) in sent and bytes([7]) in sent
    assert bytes([0]) not in sent


def test_sent_fingerprints_of_size_zero_remember_nothing():
    sent = SentFingerprints(0)
    sent.add(b"x")
    assert b"x" not in sent and len(sent) == 0


def test_sent_fingerprints_with_recrawl_after_hold_none_longer_than_it():
    now = [0.0]
    sent = SentFingerprints(1000, max_age=10, clock=lambda: now[0])
    sent.add(b"a")
    now[0] = 4.9
    assert b"a" in sent
    sent.add(b"b")
    now[0] = 5.0  # a turn: a and b move to the old generation
    assert b"a" in sent and b"b" in sent
    sent.add(b"c")
    now[0] = 10.0  # another: a and b (added at most 10 s ago) go
    assert b"a" not in sent and b"b" not in sent and b"c" in sent
    now[0] = 30.0  # long idle: everything goes at once
    assert b"c" not in sent and len(sent) == 0
