"""Recording proxies for off-the-shelf clients: the MCP side (``promcp proxy mcp``) and the LLM-API side
(``promcp proxy llm``), on one HTTP reverse-proxy core (:mod:`promcp.proxy._http`)."""
