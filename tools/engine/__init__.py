"""The pure pipeline pieces, in the order triage uses them: normalize, prefilter and large logs, events,
metrics, facts, detectors, config checks, match, edits. None of them reads files it was not given, keeps
state between calls, or knows a face."""
