/* python_bootstrap.S: hooks/seeding/python_bootstrap.py embedded in the shim as the hidden,
 * NUL-terminated string reprod_python_bootstrap, which python.c compiles inside the interpreter
 * (Makefile: REPROD_PYTHON_BOOTSTRAP names the file). */
    .section .rodata.reprod_python_bootstrap, "a"
    .globl reprod_python_bootstrap
    .hidden reprod_python_bootstrap
    .type reprod_python_bootstrap, @object
reprod_python_bootstrap:
    .incbin REPROD_PYTHON_BOOTSTRAP
    .byte 0
    .size reprod_python_bootstrap, . - reprod_python_bootstrap
    .section .note.GNU-stack, "", @progbits
