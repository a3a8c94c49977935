"""trustscore: a public credit bureau for AI agents."""

__version__ = "0.1.0"
