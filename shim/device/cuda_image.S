/* cuda_image.S: the device kernels' fatbin (built by nvcc from cuda_kernels.cu) embedded in the
 * shim as the hidden object reprod_cuda_image, which cuda_module.c hands to cuModuleLoadData.
 * Assembled only when nvcc is present (Makefile: REPROD_FATBIN names the file). */
    .section .rodata.reprod_cuda_image, "a"
    .balign 64
    .globl reprod_cuda_image
    .hidden reprod_cuda_image
    .type reprod_cuda_image, @object
reprod_cuda_image:
    .incbin REPROD_FATBIN
    .size reprod_cuda_image, . - reprod_cuda_image
    .section .note.GNU-stack, "", @progbits
