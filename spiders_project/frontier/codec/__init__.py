"""Requests as strict JSON and back: the codec of every frontier entry, and the callbacks it
may name.
"""
