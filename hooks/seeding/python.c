/* python.c: CPython's own generators (random, NumPy, and jax/tensorflow where importable) get
 * the seed of REPROD_SEED_POLICY, with LD_PRELOAD alone: nothing added to PYTHONPATH, no
 * sitecustomize, no change to the job.
 *
 * How. Python's generators never call a C library the shim could stand in front of, and
 * Debian's python3 has `_random` built in (no dlsym of PyInit__random to catch). CPython 3.8+
 * offers one public entry that is made for this and safe before the interpreter exists:
 * PySys_AddAuditHook, whose hooks the runtime keeps across its initialisation and calls, in
 * every interpreter of the process, for every audit event. The shim's constructor adds one
 * hook, when the process defines the CPython C API (an interpreter, or a program embedding one)
 * and the interpreter has not started yet (so `ctypes.CDLL(shim)` from a running Python changes
 * nothing). Every function of the C API is looked up at run time: no link-time dependency.
 *
 * The hook reacts only to the event "import" (raised by the import system just before it looks
 * for a module that is not in sys.modules) of a few names: `_random` (imported by random.py in
 * any way random is imported), `numpy.random`, `jax.random`, `tensorflow`. It then imports that
 * module itself (the import that was about to happen, at the same place: nested imports are what
 * the import system does anyway) and hands it to the Python side (python_bootstrap.py, compiled
 * into a private namespace, once in the main interpreter), which wraps the seeding entry points;
 * the outer import then finds the module loaded. The wrappers call back here (python_derive) for
 * the derivation, so policy, rank, log, counts, traces and the record of seeds the shim produced
 * are those of every other hook. Any other event costs a comparison of the event's first byte.
 */
#include "common.h"
#include "interpose/init.h"
#include "interpose/resolve.h"
#include "runtime/config.h"
#include "runtime/log.h"
#include "runtime/record.h"
#include "seed/seed.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* The Python side: hooks/seeding/python_bootstrap.py, embedded by python_bootstrap.S. */
extern const char reprod_python_bootstrap[];

/* CPython's objects stay opaque: only functions of its C API touch them (none of its structs'
 * layouts, which change between versions, is read). */
typedef struct python_object python_object;
typedef python_object *(*python_c_function)(python_object *self, python_object *args);
struct python_method_def { /* PyMethodDef, the same in every CPython 3 */
    const char *name;
    python_c_function function;
    int flags;
    const char *doc;
};
#define PYTHON_METH_VARARGS 0x0001
#define PYTHON_FILE_INPUT   257 /* Py_file_input */

typedef int (*python_audit_hook)(const char *event, python_object *args, void *user_data);

/* clang-format off */
#define PYTHON_FUNCTIONS(X)                                                                        \
    X(PySys_AddAuditHook, int (*)(python_audit_hook, void *))                                      \
    X(Py_IsInitialized, int (*)(void))                                                             \
    X(PyTuple_GetItem, python_object *(*)(python_object *, ssize_t))                               \
    X(PyUnicode_AsUTF8, const char *(*)(python_object *))                                          \
    X(PyLong_AsLong, long (*)(python_object *))                                                    \
    X(PyLong_AsUnsignedLongLong, unsigned long long (*)(python_object *))                          \
    X(PyLong_FromUnsignedLongLong, python_object *(*)(unsigned long long))                         \
    X(PyLong_FromLong, python_object *(*)(long))                                                   \
    X(PyDict_New, python_object *(*)(void))                                                        \
    X(PyDict_SetItemString, int (*)(python_object *, const char *, python_object *))              \
    X(PyDict_GetItemString, python_object *(*)(python_object *, const char *))                    \
    X(PyImport_AddModule, python_object *(*)(const char *))                                        \
    X(PyImport_GetModuleDict, python_object *(*)(void))                                            \
    X(PyImport_ImportModuleLevelObject, python_object *(*)(python_object *, python_object *,      \
                                                           python_object *, python_object *, int)) \
    X(PyCFunction_NewEx, python_object *(*)(struct python_method_def *, python_object *,          \
                                            python_object *))                                      \
    X(Py_CompileString, python_object *(*)(const char *, const char *, int))                       \
    X(PyEval_EvalCode, python_object *(*)(python_object *, python_object *, python_object *))     \
    X(PyObject_CallFunctionObjArgs, python_object *(*)(python_object *, ...))                      \
    X(PyObject_GenericSetAttr, int (*)(python_object *, python_object *, python_object *))        \
    X(PyType_Modified, void (*)(python_object *))                                                  \
    X(PyErr_Clear, void (*)(void))                                                                 \
    X(PyErr_Occurred, python_object *(*)(void))                                                    \
    X(PyErr_ExceptionMatches, int (*)(python_object *))                                            \
    X(Py_IncRef, void (*)(python_object *))                                                        \
    X(Py_DecRef, void (*)(python_object *))
/* clang-format on */
#define PYTHON_POINTER(name, type) __typeof__(type) name;
#define PYTHON_SYMBOL(name, type)  #name,
static struct {
    PYTHON_FUNCTIONS(PYTHON_POINTER)
} python;
static const char *const python_symbols[] = {PYTHON_FUNCTIONS(PYTHON_SYMBOL)};
_Static_assert(sizeof python == REPROD_ARRAY_LENGTH(python_symbols) * sizeof(void *),
               "one pointer per function of PYTHON_FUNCTIONS");

/* The seeding entry points the Python side wraps, by the index it passes to python_derive (the
 * same order as APIS in python_bootstrap.py). The name is what the log and the trace say. */
static const struct {
    const char *api;
    int width_bits; /* 32: NumPy's legacy seeding (mt19937_seed takes a uint32) */
} python_apis[] = {
    {"random.Random.seed", 64},
    {"numpy.random.SeedSequence", 64},
    {"numpy.random.RandomState.seed", 32},
    {"jax.random.PRNGKey", 64},
    {"jax.random.key", 64},
    {"tf.random.set_seed", 64},
    {"tf.random.Generator.from_seed", 64},
};

/* The modules whose import the hook acts on. */
static const char *const target_modules[] = {"_random", "numpy.random", "jax.random", "tensorflow"};

/* The targets this thread is importing for the Python side: their own import event, raised
 * again inside, is left alone (another target's is not: numpy may import random). */
static _Thread_local unsigned targets_in_progress __attribute__((tls_model("initial-exec")));

/* _derive(index, seed): the seed the entry point `index` hands to the real generator for the
 * caller's integer seed (0 <= seed < 2^width, checked by the Python side): policy, rank, log,
 * count, trace and the record of produced seeds are reprod_seed_replace*'s. */
static python_object *python_derive(python_object *self, python_object *args)
{
    (void)self;
    python_object *index_object = python.PyTuple_GetItem(args, 0);
    python_object *seed_object = index_object ? python.PyTuple_GetItem(args, 1) : NULL;
    if (!seed_object) return NULL; /* IndexError set */
    long index = python.PyLong_AsLong(index_object);
    unsigned long long seed = python.PyLong_AsUnsignedLongLong(seed_object);
    if (python.PyErr_Occurred() || index < 0 || index >= (long)REPROD_ARRAY_LENGTH(python_apis)) {
        python.PyErr_Clear(); /* not a seed this hook derives (the Python side checks first) */
        python.Py_IncRef(seed_object);
        return seed_object;
    }
    if (python_apis[index].width_bits == 32)
        return python.PyLong_FromUnsignedLongLong(
            reprod_seed_replace32(python_apis[index].api, (uint32_t)seed));
    return python.PyLong_FromUnsignedLongLong(reprod_seed_replace64(python_apis[index].api, seed));
}

/* _set_type_attribute(type, name, value): set an attribute of a class that Python's setattr
 * refuses (an extension's immutable type: _random.Random, NumPy's MT19937), as type.__setattr__
 * does once past that check: object's generic setattr (the type's dict), then PyType_Modified
 * (the method cache). Returns 1; an exception on failure. */
static python_object *python_set_type_attribute(python_object *self, python_object *args)
{
    (void)self;
    python_object *type = python.PyTuple_GetItem(args, 0);
    python_object *name = type ? python.PyTuple_GetItem(args, 1) : NULL;
    python_object *value = name ? python.PyTuple_GetItem(args, 2) : NULL;
    if (!value || python.PyObject_GenericSetAttr(type, name, value) != 0) return NULL;
    python.PyType_Modified(type);
    return python.PyLong_FromLong(1);
}

/* _warn(text): one warning line (an entry point the Python side could not wrap). */
static python_object *python_warn(python_object *self, python_object *args)
{
    (void)self;
    python_object *text_object = python.PyTuple_GetItem(args, 0);
    const char *text = text_object ? python.PyUnicode_AsUTF8(text_object) : NULL;
    if (!text) return NULL;
    char escaped[512];
    reprod_log(REPROD_LOG_WARN, "warning: python: %s",
               reprod_escape_text(text, escaped, sizeof escaped));
    return python.PyLong_FromLong(1);
}

static struct python_method_def python_methods[] = {
    {"_derive", python_derive, PYTHON_METH_VARARGS, NULL},
    {"_set_type_attribute", python_set_type_attribute, PYTHON_METH_VARARGS, NULL},
    {"_warn", python_warn, PYTHON_METH_VARARGS, NULL},
};

/* Optional (CPython 3.9+): with them the main interpreter compiles the Python side once, not at
 * each of the modules' imports (compiling it is most of the hook's cost). */
static struct {
    void *(*PyInterpreterState_Get)(void);
    void *(*PyInterpreterState_Main)(void);
} interpreters;
/* The Python side's namespace in the main interpreter, kept; dropped (not freed: the runtime
 * frees its objects) when the runtime clears its audit hooks, as Py_FinalizeEx does. */
static python_object *main_namespace;

/* &PyExc_Exception (a data symbol, found at run time like the functions), or NULL. */
static python_object **python_exception_class;

/* After a failed call: clear an Exception (a failed import is raised again by the import it came
 * from; a failure of the Python side costs only the derivation) and return 0; leave any other
 * BaseException set (KeyboardInterrupt from a ^C during the import, SystemExit) and return -1,
 * for the hook to raise it in the program as it would have been without the shim. */
static int clear_unless_fatal(void)
{
    if (!python.PyErr_Occurred()) return 0;
    if (python_exception_class && *python_exception_class &&
        !python.PyErr_ExceptionMatches(*python_exception_class))
        return -1;
    python.PyErr_Clear();
    return 0;
}

/* A new reference to the Python side's namespace (its functions, compiled and run) in the
 * running interpreter, or NULL with an Exception cleared (a KeyboardInterrupt or SystemExit left
 * set: clear_unless_fatal). */
static python_object *python_side(void)
{
    int in_main = interpreters.PyInterpreterState_Get && interpreters.PyInterpreterState_Main &&
                  interpreters.PyInterpreterState_Get() == interpreters.PyInterpreterState_Main();
    if (in_main && main_namespace) {
        python.Py_IncRef(main_namespace);
        return main_namespace;
    }
    python_object *globals = python.PyDict_New();
    python_object *builtins = python.PyImport_AddModule("builtins");
    int failed = !globals || !builtins ||
                 python.PyDict_SetItemString(globals, "__builtins__", builtins) != 0 ||
                 python.PyDict_SetItemString(globals, "_modules", python.PyImport_GetModuleDict());
    for (size_t i = 0; !failed && i < REPROD_ARRAY_LENGTH(python_methods); i++) {
        python_object *function = python.PyCFunction_NewEx(&python_methods[i], NULL, NULL);
        failed =
            !function || python.PyDict_SetItemString(globals, python_methods[i].name, function);
        if (function) python.Py_DecRef(function);
    }
    python_object *code =
        failed ? NULL
               : python.Py_CompileString(reprod_python_bootstrap, "<reprod>", PYTHON_FILE_INPUT);
    python_object *ran = code ? python.PyEval_EvalCode(code, globals, globals) : NULL;
    if (ran) python.Py_DecRef(ran);
    if (code) python.Py_DecRef(code);
    if (!ran) {
        clear_unless_fatal(); /* a fatal one stays set for wrap_module */
        if (globals) python.Py_DecRef(globals);
        return NULL;
    }
    if (in_main) {
        python.Py_IncRef(globals);
        main_namespace = globals;
    }
    return globals;
}

/* Import module `name` (a str) and let the Python side wrap its entry points. An Exception is
 * cleared (clear_unless_fatal); -1 leaves a KeyboardInterrupt or SystemExit set for the hook to
 * raise. */
static int wrap_module(python_object *name)
{
    python_object *module = python.PyImport_ImportModuleLevelObject(name, NULL, NULL, NULL, 0);
    if (!module) return clear_unless_fatal();
    python.Py_DecRef(module);
    python_object *globals = python_side();
    if (!globals && python.PyErr_Occurred()) return -1;
    python_object *wrap = globals ? python.PyDict_GetItemString(globals, "wrap") : NULL;
    python_object *done = wrap ? python.PyObject_CallFunctionObjArgs(wrap, name, NULL) : NULL;
    int rc = 0;
    if (!done) {
        rc = clear_unless_fatal();
        if (rc == 0)
            reprod_log(REPROD_LOG_WARN, "warning: python: the shim's Python side failed; seeds "
                                        "of random and NumPy pass unchanged");
    }
    if (done) python.Py_DecRef(done);
    if (globals) python.Py_DecRef(globals);
    return rc;
}

static int audit_hook(const char *event, python_object *args, void *user_data)
{
    (void)user_data;
    if (event[0] == 'c' && strcmp(event, "cpython._PySys_ClearAuditHooks") == 0)
        main_namespace = NULL; /* the interpreter is going */
    if (event[0] != 'i' || strcmp(event, "import") != 0) return 0;
    python_object *name = python.PyTuple_GetItem(args, 0);
    const char *text = name ? python.PyUnicode_AsUTF8(name) : NULL;
    if (!text) return clear_unless_fatal();
    for (unsigned i = 0; i < REPROD_ARRAY_LENGTH(target_modules); i++) {
        if (strcmp(text, target_modules[i]) != 0 || (targets_in_progress & 1u << i)) continue;
        targets_in_progress |= 1u << i;
        int rc = wrap_module(name);
        targets_in_progress &= ~(1u << i);
        return rc;
    }
    return 0;
}

/* At load: add the hook when this process can run Python and the interpreter has not started. */
__attribute__((constructor)) static void python_install(void)
{
    reprod_init();
    const struct reprod_config *config = reprod_config();
    if (config->mode == REPROD_MODE_OFF || config->seed_policy == REPROD_SEED_OFF) return;
    void **functions = (void **)&python;
    /* The first two decide; a process without them (not Python) is done in two lookups. */
    for (size_t i = 0; i < REPROD_ARRAY_LENGTH(python_symbols); i++) {
        functions[i] = reprod_dlsym(RTLD_DEFAULT, python_symbols[i]);
        if (!functions[i]) {
            if (i >= 2)
                reprod_log(REPROD_LOG_INFO, "python: %s not found: Python's seeds not derived",
                           python_symbols[i]);
            return;
        }
        if (i == 1 && python.Py_IsInitialized()) return; /* loaded by a running interpreter */
    }
    python_exception_class = reprod_dlsym(RTLD_DEFAULT, "PyExc_Exception");
    interpreters.PyInterpreterState_Get = reprod_dlsym(RTLD_DEFAULT, "PyInterpreterState_Get");
    interpreters.PyInterpreterState_Main = reprod_dlsym(RTLD_DEFAULT, "PyInterpreterState_Main");
    python.PySys_AddAuditHook(audit_hook, NULL);
}
