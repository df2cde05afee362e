"""RQ entry points, one module per workflow phase; thin shells over `bot`."""
