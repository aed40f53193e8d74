"""The stages a cell goes through. Everything that decides a cached outcome lives here (and in
harness/spec.py): the cache digest is derived from this folder, never from a hand list."""
