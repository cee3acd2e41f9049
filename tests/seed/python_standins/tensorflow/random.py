"""Stand-in for tf.random: set_seed keeps the global seed, Generator.from_seed the seed."""
global_seed = None


def set_seed(seed):
    global global_seed
    global_seed = seed


class Generator:
    def __init__(self, seed):
        self.seed = seed

    @classmethod
    def from_seed(cls, seed, alg=None):
        return cls(seed)
