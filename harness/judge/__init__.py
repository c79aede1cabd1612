"""The judgement room: every rule that turns numbers into a verdict. What is the same
measurement (comparable), which runs to compare (pick, commits, duplicates), the gates of
`compare` (compare, comparison, memory, scores, tolerances, compile_counts, environment,
compile_compare), the busy-side rule (busy), the A/B verdict (paired), the noise floor
learnt from A/A runs (noise), the steps of a history and their verdicts (steps, history),
the speedups too large to trust (suspicious), and the nightly's decisions: a night's run
judged against its history (nightly) and what that does to the known regressions
(lifecycle); harness/nightly/ runs, confirms, bisects and stores around them. The maths
these rules stand on is harness/stats/ (pure functions on numbers); the words they give
are harness/verdicts.py."""
