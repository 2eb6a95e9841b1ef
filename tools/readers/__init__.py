"""Readers of the metric stores a training run leaves on disk (issue 13, part 1).

MEASUREMENTS_PLACEHOLDER
"""
from .base import KINDS, Limits, Series, StoreRun
from .discover import StoreRef, find_stores, read_store, sniff_dir, sniff_file

__all__ = ["KINDS", "Limits", "Series", "StoreRun", "StoreRef", "find_stores", "read_store", "sniff_dir", "sniff_file"]
