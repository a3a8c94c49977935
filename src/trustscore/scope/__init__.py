"""Scope honesty (issue #12, docs/scope-honesty.md): declared capabilities against measured behaviour."""
