"""Stand-in for jax.random: a key is the seed it was made from (as an int64, as JAX takes it)."""


def PRNGKey(seed, impl=None):
    if not -2**63 <= seed < 2**63:
        raise OverflowError("Python int too large to convert to int64")
    return ("PRNGKey", seed)


def key(seed, *, impl=None):
    if not -2**63 <= seed < 2**63:
        raise OverflowError("Python int too large to convert to int64")
    return ("key", seed)
