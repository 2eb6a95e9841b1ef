"""The pure pipeline pieces, in the order triage uses them: normalize, prefilter and large logs, events,
metrics, facts, detectors, config checks, match (with version_gate: rules gated by the run's framework
versions, fixes in the user's release's spelling), edits. None of them reads files it was not given, keeps
state between calls, or knows a face."""
