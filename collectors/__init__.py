"""promcp.collectors — importers that turn chat-client exports into promcp events (c-ots)."""
