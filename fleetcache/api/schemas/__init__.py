"""JSON Schemas of request bodies, one module per REST resource (Nova's where Nova has one)."""
