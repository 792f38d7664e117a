"""The write batcher: every write of a worker, in order, one MULTI/EXEC a tick."""
