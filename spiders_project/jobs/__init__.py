"""Crawl jobs: named crawls submitted, recorded and scheduled across the cluster.

A job is a set of seeds with one name (``"job"`` on a JSON seed, ``meta.JOB``
on everything crawled from it). ``scrapy jobs submit`` writes a job's seeds
and records it in ``<spider>:jobs`` (``submit.py``); ``scrapy jobs schedule``
stores a cron timetable that every worker's :class:`~spiders_project.jobs.schedules.JobSchedules`
checks, each tick running once for the whole cluster (``schedules.py``).
A job is running, paused, cancelled or finished (``states.py``): the operator
pauses, resumes and cancels it (``control.py``); every worker reads which
jobs are paused or cancelled and finds jobs finished (``state_loop.py``),
hands back a paused job's requests it holds and drops a cancelled job's as
the engine takes them (``pause_step.py``) and again right before their
download (``fetch_gate.py``); the frontier's lease and enqueue scripts set
aside or drop the requests they move.
"""
