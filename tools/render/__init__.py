"""Human text, one module per result type: triage and rule pages (rich), family reports, probe results and
short lists (plain text). JSON is each model's own dump."""
