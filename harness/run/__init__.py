"""Run machinery: cells to worker processes, journal, shards, merge, bundles for other machines."""
