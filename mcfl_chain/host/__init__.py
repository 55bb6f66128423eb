"""Many trainers in one process over shared services (the simulator's batched engine):
:mod:`.engine` runs them, :mod:`.chain` shares their chain reads, :mod:`.compute`
batches their training."""
