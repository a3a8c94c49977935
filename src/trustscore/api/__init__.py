"""The HTTP API: thin Litestar controllers over the services."""
