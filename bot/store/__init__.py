"""Persistence: models, engine, fire() with CAS + audit + outbox, migrations."""
