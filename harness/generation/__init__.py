"""Case generation: Hypothesis strategies, seeded generation, cases read off real models."""
