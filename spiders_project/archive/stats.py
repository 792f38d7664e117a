"""The archive's Scrapy stats, published with the worker's others. Stdlib only.

The first four become the exporter's ``crawler_warc_*_total`` counters
(``worker/heartbeat.metric_counters``, ``contract.WARC``).
"""

RECORDS = "warc/records"  # records written (warcinfo included)
BYTES = "warc/bytes"  # bytes written, gzip members as on disk
WRITE_ERRORS = "warc/write_errors"  # write attempts that failed (retries included)
DROPPED = "warc/records_dropped"  # records not archived (WARC_ON_ERROR=continue, a stop)
RECOVERED = "warc/files_recovered"  # .open files of dead workers closed at start
BACKLOG_PAUSES = "warc/backlog_pauses"  # times fetching paused for the writer to catch up

#: Stat -> the name after ``contract.WARC`` in the published counters.
METRIC_COUNTERS = {
    RECORDS: "records",
    BYTES: "bytes",
    WRITE_ERRORS: "write_errors",
    DROPPED: "records_dropped",
}
