"""LanceDB lake: table schemas, the embedding cache and atomic publication of an index."""
