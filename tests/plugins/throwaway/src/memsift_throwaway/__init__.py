"""A throwaway memsift plugin package for memsift's own tests."""
