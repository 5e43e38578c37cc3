"""The storage interfaces on SQLite (`tx.SqliteTx`), each concept in its own module."""
