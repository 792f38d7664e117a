"""What every worker component shares below the frontier: background tasks, engine pauses,
Redis' clock, wiring.
"""
