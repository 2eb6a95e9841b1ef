"""Bundled example logs (package data), used by `grpo-debug triage --example`."""
