"""The `memsift` command line."""
