"""`mibench compile`: ahead-of-time compiles for a TPU target."""
