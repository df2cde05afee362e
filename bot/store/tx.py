"""Tx: the connection of a transaction the store opened, as a caller's callback receives it.

Code outside the store only passes it on to store functions (fire_in, submit_in, the command
bookkeeping in bot/store/commands.py): it never executes a statement on it.
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

#: A connection inside a transaction the store opened (the argument of a callback it runs).
Tx = Connection
