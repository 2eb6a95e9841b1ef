"""Run folders (issue 13, parts 2-4): read what a run leaves on disk as one run, plot it, compare two runs.

    from grpo_debug.tools.rundir import triage_folder, analyze
    result = triage_folder("outputs/run7")      # TriageResult; coverage.files says what was read and how
    result = triage_any(path=p)                 # a folder or store file as above, anything else tools.triage
    a = analyze(path="outputs/run7")            # Analysis(ctx, result, label, merged): a.run is the run model

| module      | does                                                                              |
|-------------|-----------------------------------------------------------------------------------|
| discover.py | which files of a folder to read (bounded depth, entries, bytes; symlinks kept in)  |
| merge.py    | console logs + configs + scripts + metric stores -> one engine Context             |
| analyze.py  | folder triage (evidence mapped back to file and line), the loader of plot/compare  |
| plot.py     | sparklines (text) and small-multiples PNG (matplotlib, optional extra)             |
| compare.py  | two runs: config facts that differ, first diverging step, findings one run lacks   |
| fleet.py    | many runs: --jobs N process pool or one Ray task per node, a JSON line per run     |
"""
from grpo_debug.tools.errors import InputError
from grpo_debug.tools.rundir.analyze import Analysis, analyze, triage_any, triage_folder

__all__ = ["Analysis", "InputError", "analyze", "triage_any", "triage_folder"]
