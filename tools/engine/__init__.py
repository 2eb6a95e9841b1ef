"""The pure pipeline pieces: normalize, large logs, events, metrics, facts, detectors, config checks, match, edits."""
