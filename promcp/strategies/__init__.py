"""promcp.strategies — the mitigations of the tools tax, defined once for the what-if and for live runs.

* :mod:`promcp.strategies.schema`: tool definitions as hosts send them, slimming and ``$ref`` deduplication;
* :mod:`promcp.strategies.payloads`: one pure function per strategy, from the catalog (and a ranking) to what one
  LLM call carries (:class:`~promcp.strategies.payloads.Payload`) — ``promcp whatif`` counts these;
* :mod:`promcp.strategies.routing`: the router (BM25, the packaged MiniLM embedding, their hybrid);
* :mod:`promcp.strategies.live`: a strategy applied to a live conversation (``promcp run --strategy``): the
  catalog, the conversation so far and the router in, what this call sends out, with the host-served meta tools.

None of these modules imports pandas; only the embedding scorer loads torch (lazily, when first used).
"""
