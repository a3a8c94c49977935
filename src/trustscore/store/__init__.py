"""PostgreSQL storage: the embedded server, the connection pool, migrations and the log's SQL."""
