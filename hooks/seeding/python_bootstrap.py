# python_bootstrap.py: the Python side of hooks/seeding/python.c, which compiles this file
# inside the interpreter, in a namespace of its own (nothing here is importable, nothing is
# added to sys.modules or sys.path), and calls wrap(name) right after importing the module
# `name`. The namespace holds, from the C side:
#   _derive(index, seed)   the derived seed for entry point APIS[index] (logged, counted, traced)
#   _set_type_attribute(type, name, value)   setattr on an extension's immutable class
#   _warn(text)            one warning line in the shim's log
#   _modules               sys.modules
# Only integer seeds 0 <= s < 2^64 (2^32 for NumPy's legacy seeding) are derived; any other
# seed (None, str, bytes, float, arrays, lists, negative or larger integers) is passed on as it
# came. Code kept to what CPython 3.8 reads; it imports nothing.

# The entry points, in the order of python_apis in python.c.
APIS = ("random.Random.seed", "numpy.random.SeedSequence", "numpy.random.RandomState.seed",
        "jax.random.PRNGKey", "jax.random.key", "tf.random.set_seed",
        "tf.random.Generator.from_seed")
RANDOM, SEED_SEQUENCE, LEGACY, JAX_PRNGKEY, JAX_KEY, TF_SET_SEED, TF_FROM_SEED = range(7)
LIMIT64 = 1 << 64
LIMIT32 = 1 << 32
MARK = "_reprod_wraps"  # on each wrapper: the function it wraps (a module wrapped once)


def integer_seed(seed, limit, numpy=None):
    """The seed as an int when it is an integer below `limit` and not negative, else None."""
    if isinstance(seed, int) or (numpy is not None and isinstance(seed, numpy.integer)):
        value = int(seed)
        if 0 <= value < limit:
            return value
    return None


def dress(wrapper, original, owner):
    """Give `wrapper` the names and documentation of `original`, which it wraps."""
    wrapper.__name__ = getattr(original, "__name__", wrapper.__name__)
    wrapper.__qualname__ = getattr(original, "__qualname__", wrapper.__qualname__)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    wrapper.__module__ = getattr(owner, "__module__", None) or getattr(owner, "__name__", None)
    wrapper.__wrapped__ = original
    setattr(wrapper, MARK, original)
    return wrapper


def wrapped(function):
    return hasattr(function, MARK)


def from_version1_text(frame):
    """Whether random.Random.seed called from `frame` turned a str or bytes seed into this
    integer (version=1: its local x holds the hash; version 2 makes integers of more than 512
    bits, which pass anyway)."""
    code = frame.f_code
    if code.co_name != "seed" or "x" not in code.co_varnames or "version" not in code.co_varnames:
        return False
    variables = frame.f_locals
    return variables.get("version") == 1 and "x" in variables


def wrap_random(module):
    # _random.Random.seed, the C method behind random.seed, Random(s), Random.seed(s) and any
    # subclass that calls super().seed(): random.py turns str/bytes seeds (version 2) into
    # integers of more than 512 bits first, which pass unchanged.
    cls = module.Random
    original = cls.__dict__["seed"]
    if wrapped(original):
        return

    get_frame = _modules["sys"]._getframe

    def seed(self, *args, **kwargs):
        if len(args) == 1 and not kwargs:
            value = integer_seed(args[0], LIMIT64)
            if value is not None and not from_version1_text(get_frame(1)):
                args = (_derive(RANDOM, value),)
        return original(self, *args, **kwargs)

    set_class_attribute(cls, "seed", dress(seed, original, cls))


def wrap_numpy(modules):
    numpy = modules["numpy"]
    generator_module = modules.get("numpy.random.bit_generator")
    coerce = getattr(generator_module, "_coerce_to_uint32_array", None)
    if coerce is None:
        _warn("numpy.random.bit_generator._coerce_to_uint32_array not found (NumPy %s): "
              "SeedSequence seeds pass unchanged" % getattr(numpy, "__version__", "?"))
    elif not wrapped(coerce):
        # SeedSequence(entropy) turns its entropy into words with this module-level function,
        # which Cython calls through the module's globals; it is also called for the spawn key,
        # and calls itself for each item of a list: only an integer at the outermost call, the
        # entropy, is derived. Every bit generator built from a seed (PCG64(s), PCG64DXSM(s),
        # MT19937(s), Philox(s), SFC64(s), default_rng(s)) makes a SeedSequence of it. The
        # entropy the SeedSequence keeps and reports is the caller's: spawned children and
        # copies made from it are derived again, to the same words.
        depth = modules["_thread"]._local()

        def _coerce_to_uint32_array(x):
            level = getattr(depth, "level", 0)
            if level == 0:
                value = integer_seed(x, LIMIT64, numpy)
                if value is not None:
                    x = _derive(SEED_SEQUENCE, value)
            depth.level = level + 1
            try:
                return coerce(x)
            finally:
                depth.level = level

        generator_module._coerce_to_uint32_array = dress(_coerce_to_uint32_array, coerce,
                                                         generator_module)
    mt19937 = getattr(modules.get("numpy.random._mt19937"), "MT19937", None)
    legacy = getattr(mt19937, "__dict__", {}).get("_legacy_seeding")
    if legacy is None:
        _warn("numpy.random._mt19937.MT19937._legacy_seeding not found (NumPy %s): "
              "np.random.seed and RandomState seeds pass unchanged"
              % getattr(numpy, "__version__", "?"))
    elif not wrapped(legacy):
        # np.random.seed(s), RandomState(s) and RandomState.seed(s) all seed their MT19937 with
        # this method (a 32-bit seed, NumPy's legacy seeding).
        def _legacy_seeding(self, seed):
            value = integer_seed(seed, LIMIT32, numpy)
            if value is not None:
                seed = _derive(LEGACY, value)
            return legacy(self, seed)

        set_class_attribute(mt19937, "_legacy_seeding", dress(_legacy_seeding, legacy, mt19937))


def signed64(value):
    """The 64 bits of `value` as a signed int64, which JAX's seeds are."""
    return value - LIMIT64 if value >= 1 << 63 else value


def wrap_function(owner, name, index, convert=None):
    original = getattr(owner, name, None)
    if original is None or wrapped(original):
        return

    def function(seed, *args, **kwargs):
        value = integer_seed(seed, LIMIT64)
        if value is not None:
            seed = _derive(index, value)
            if convert is not None:
                seed = convert(seed)
        return original(seed, *args, **kwargs)

    setattr(owner, name, dress(function, original, owner))


def wrap_jax(module):
    wrap_function(module, "PRNGKey", JAX_PRNGKEY, signed64)
    wrap_function(module, "key", JAX_KEY, signed64)


def wrap_tensorflow(module):
    random = getattr(module, "random", None)
    if random is None:
        return
    wrap_function(random, "set_seed", TF_SET_SEED)
    generator = getattr(random, "Generator", None)
    from_seed = getattr(generator, "__dict__", {}).get("from_seed")
    if isinstance(from_seed, classmethod) and not wrapped(from_seed.__func__):
        original = from_seed.__func__

        def from_seed_wrapper(cls, seed, *args, **kwargs):
            value = integer_seed(seed, LIMIT64)
            if value is not None:
                seed = _derive(TF_FROM_SEED, value)
            return original(cls, seed, *args, **kwargs)

        setattr(generator, "from_seed", classmethod(dress(from_seed_wrapper, original, generator)))


def set_class_attribute(cls, name, value):
    try:
        setattr(cls, name, value)
    except TypeError:  # an immutable (extension) type
        _set_type_attribute(cls, name, value)
    if cls.__dict__.get(name) is not value:
        raise RuntimeError("%s.%s could not be replaced" % (cls.__name__, name))


def wrap(name):
    """Wrap the seeding entry points of module `name`, just imported."""
    try:
        if name == "_random":
            wrap_random(_modules[name])
        elif name == "numpy.random":
            wrap_numpy(_modules)
        elif name == "jax.random":
            wrap_jax(_modules[name])
        elif name == "tensorflow":
            wrap_tensorflow(_modules[name])
    except Exception as error:  # never into the job: its seeds then pass unchanged
        _warn("%s: seeds pass unchanged (%s: %s)" % (name, type(error).__name__, error))
    return 1
