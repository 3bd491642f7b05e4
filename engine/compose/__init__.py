"""Composition: config to a ready manager (factory), fallback, the scope wrapper, keeping a manager fresh."""
