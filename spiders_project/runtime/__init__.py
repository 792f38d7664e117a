"""What every component of a worker shares, below the frontier and every feature.

WorkerRedis (the worker's one call path, identity and write batcher), the
frontier's Redis data model (its Lua scripts and their argument layouts), the
script clock, the seen-set, the JSON serialization of requests and values,
background tasks, and the frontier's typed config. It imports no feature and
not the frontier: both build on it (docs/ARCHITECTURE.md, "Layers").
"""
