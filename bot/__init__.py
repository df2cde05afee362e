"""gitops-bot: the domain (pure core) and its adapters. No Flask and no RQ imports here."""
