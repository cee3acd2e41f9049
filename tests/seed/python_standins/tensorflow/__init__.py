"""Stand-in for TensorFlow (tests/seed/python_standins/README.md): tf.random."""
from tensorflow import random  # noqa: F401
