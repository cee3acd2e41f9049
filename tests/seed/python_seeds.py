"""Python's own generators, seeded through each entry point the shim wraps, one line each:
what tests/seed/seed_python.sh compares between a run under the shim and a native one.

    python_seeds.py derived SEED64 SEED32   every entry point that the shim derives, seeded
                                            with SEED64 (SEED32 for NumPy's legacy seeding):
                                            under the shim with the caller's seed s for both,
                                            natively with the derivations of s
    python_seeds.py unchanged               seeds the shim must pass on as they are (the same
                                            program with and without the shim)
    python_seeds.py random SEED64           the random module alone (an interpreter without
                                            NumPy)
Sections print "name: value"; an entry point that raises prints the exception's type.
"""
import sys


def show(name, function):
    try:
        value = function()
    except Exception as error:  # the same error with and without the shim
        value = type(error).__name__
    print("%s: %s" % (name, value))


def random_part(seed):
    import random

    def module_seed():
        random.seed(seed)
        return random.random()

    def method_seed():
        generator = random.Random()
        generator.seed(seed)
        return generator.random()

    class Subclass(random.Random):
        pass

    show("random.seed", module_seed)
    show("random.Random(s)", lambda: random.Random(seed).random())
    show("Random.seed(s)", method_seed)
    show("subclass(s)", lambda: Subclass(seed).randrange(10**9))


def numpy_part(seed, seed32):
    import numpy as np

    def legacy_module():
        np.random.seed(seed32)
        return np.random.random()

    def legacy_method():
        state = np.random.RandomState()
        state.seed(seed32)
        return state.randint(10**9)

    show("np.random.seed", legacy_module)
    show("RandomState(s)", lambda: np.random.RandomState(seed32).random())
    show("RandomState.seed(s)", legacy_method)
    show("RandomState(np.uint32(s))", lambda: np.random.RandomState(np.uint32(seed32)).random())
    show("default_rng(s)", lambda: np.random.default_rng(seed).random())
    show("SeedSequence(s)", lambda: list(np.random.SeedSequence(seed).generate_state(2)))
    show("SeedSequence(s).spawn", lambda: list(np.random.SeedSequence(seed).spawn(2)[1].generate_state(2)))
    show("SeedSequence(np.uint64(s))", lambda: list(np.random.SeedSequence(np.uint64(seed)).generate_state(2)))
    for name in ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"):
        bit_generator = getattr(np.random, name)
        show(name + "(s)", lambda: bit_generator(seed).random_raw())
    show("Generator(PCG64(s))", lambda: np.random.Generator(np.random.PCG64(seed)).integers(10**9))


def unchanged_part():
    import pickle
    import random
    import numpy as np

    for seed in ("abc", b"abc", bytearray(b"abc"), 1.5, -5, 2**64, 2**64 + 5, 2**80):
        def module_seed(seed=seed):
            random.seed(seed)
            return random.random()
        show("random.seed(%r)" % (seed,), module_seed)
    show("random.seed(version=1)", lambda: (random.seed("abc", version=1), random.random())[1])
    show("random.setstate", lambda: (random.setstate((3, tuple(range(624)) + (624,), None)),
                                     random.random())[1])
    for seed in ([1, 2], (5,), np.array([1, 2], dtype=np.uint32), -1, 2**32, 1.5, "7"):
        def legacy(seed=seed):
            np.random.seed(seed)
            return np.random.random()
        show("np.random.seed(%r)" % (seed,), legacy)
        show("RandomState(%r)" % (seed,), lambda seed=seed: np.random.RandomState(seed).random())
    state = ("MT19937", np.arange(624, dtype=np.uint32), 0)
    show("RandomState.set_state", lambda: (np.random.set_state(state), np.random.random())[1])
    for entropy in ([5], [5, 6], (7,), 2**64, 2**64 + 1, -1, 1.5):
        show("SeedSequence(%r)" % (entropy,),
             lambda entropy=entropy: list(np.random.SeedSequence(entropy).generate_state(2)))
        show("default_rng(%r)" % (entropy,), lambda entropy=entropy: np.random.default_rng(entropy).random())
    show("SeedSequence(pool from a list, spawn_key)",
         lambda: list(np.random.SeedSequence([9, 10], spawn_key=(1, 2)).generate_state(2)))
    generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence([3, 4])))
    show("pickled Generator", lambda: pickle.loads(pickle.dumps(generator)).random())
    pcg_state = {"bit_generator": "PCG64", "state": {"state": 12345, "inc": 6789},
                 "has_uint32": 0, "uinteger": 0}

    def set_state():
        bit_generator = np.random.PCG64()
        bit_generator.state = pcg_state
        return bit_generator.random_raw()
    show("PCG64.state =", set_state)


if __name__ == "__main__":
    part = sys.argv[1]
    if part == "derived":
        random_part(int(sys.argv[2]))
        numpy_part(int(sys.argv[2]), int(sys.argv[3]))
    elif part == "unchanged":
        unchanged_part()
    elif part == "random":
        random_part(int(sys.argv[2]))
