"""The cluster's read model: what workers publish, and how the monitor, crawlstatus and jobs
read it.
"""
