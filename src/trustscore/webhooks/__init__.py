"""Alerts: events derived from the log, Standard Webhooks signatures, retry schedule, Atom feeds (pure)."""
