"""The search core: a search's request, query planning, candidate ranking, snippets, hits and time."""
