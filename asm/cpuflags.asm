;-----------------------------------------------------------------------------
; uint32_t asmbpe_cpu_flags(void)
;
; Returns the CPU_* bits of asmbpe.inc: SSE4.2 (crc32) and POPCNT from
; cpuid leaf 1, AVX2, BMI1, BMI2 from cpuid leaf 7, LZCNT from leaf
; 0x80000001 (ecx bit 5, ABM on AMD),
; OSYMM when cpuid leaf 1 reports OSXSAVE and xgetbv(0) & 6 == 6 (the OS saves
; xmm and ymm state), XGETBV1 when cpuid(0xD, 1).eax bit 2 says xgetbv(1)
; (XINUSE) is available.  AVX2 is reported only together with OSYMM: a CPU
; with AVX2 whose OS does not save ymm cannot run our code.
; Clobbers: rax, rcx, rdx, r8, r9 (rbx is saved: cpuid writes it).
;-----------------------------------------------------------------------------
%include "asmbpe.inc"

section .text

FUNC asmbpe_cpu_flags, 0, 10, 0
    xor         r8d, r8d                ; flags
    xor         eax, eax
    cpuid
    mov         r9d, eax                ; highest standard leaf
    mov         eax, 1
    cpuid
    bt          ecx, 20                 ; SSE4.2
    jnc         .no_sse42
    or          r8d, CPU_SSE42
.no_sse42:
    bt          ecx, 23                 ; POPCNT
    jnc         .no_popcnt
    or          r8d, CPU_POPCNT
.no_popcnt:
    bt          ecx, 27                 ; OSXSAVE
    jnc         .leaf7
    xor         ecx, ecx
    xgetbv
    and         eax, 6
    cmp         eax, 6
    jne         .leaf7
    or          r8d, CPU_OSYMM
.leaf7:
    cmp         r9d, 7
    jb          .done
    mov         eax, 7
    xor         ecx, ecx
    cpuid
    bt          ebx, 3
    jnc         .no_bmi1
    or          r8d, CPU_BMI1
.no_bmi1:
    bt          ebx, 8
    jnc         .no_bmi2
    or          r8d, CPU_BMI2
.no_bmi2:
    test        r8d, CPU_OSYMM
    jz          .leafd
    bt          ebx, 5
    jnc         .leafd
    or          r8d, CPU_AVX2
.leafd:
    cmp         r9d, 0xD
    jb          .done
    test        r8d, CPU_OSYMM
    jz          .done
    mov         eax, 0xD
    mov         ecx, 1
    cpuid
    bt          eax, 2
    jnc         .done
    or          r8d, CPU_XGETBV1
.done:
    mov         eax, 0x80000000         ; the extended leaves
    cpuid
    cmp         eax, 0x80000001
    jb          .flags
    mov         eax, 0x80000001
    cpuid
    bt          ecx, 5                  ; LZCNT
    jnc         .flags
    or          r8d, CPU_LZCNT
.flags:
    mov         eax, r8d
    RET
ENDFUNC
