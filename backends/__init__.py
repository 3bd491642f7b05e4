"""Search backends behind the `SearchManager` protocol. Backends never import each other."""
