"""The MCP front-end: memory_search, memory_get and memory_status over stdio and streamable HTTP."""
