"""Fault injection and invariants: the ``memtrio chaos`` harness and the ``memtrio trace`` viewer."""
