"""The ``trustscore`` command: thin shells over the services and the pure core."""
