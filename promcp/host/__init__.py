"""The promcp host: the customized MCP client behind ``promcp run`` (agent loop, servers, LLM backends)."""
