"""A/B runs over git revisions: each revision's engines checked out in a cached worktree
(`revisions`), measured in interleaved rounds of fresh workers (`rounds`), judged on
per-round paired ratios (`mibench.harness.judge.paired`), stored as a `mibench.ab/2`
artifact (`record`); `bisect` searches first-parent history with the same test."""
