"""The memory files: which files are memory, discovery, safe reading, chunking, note dates, transcripts."""
