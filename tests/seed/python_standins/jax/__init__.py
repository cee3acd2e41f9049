"""Stand-in for JAX (tests/seed/python_standins/README.md): jax imports jax.random."""
from jax import random  # noqa: F401
