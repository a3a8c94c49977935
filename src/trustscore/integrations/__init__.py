"""The bureau's standard ways in for other agents: an MCP server and an A2A agent card (docs/integrations.md)."""
