;-----------------------------------------------------------------------------
; checkasm.asm — TEST-ONLY support, linked into libasmbpe_test.so, never into
; libasmbpe.so.  The checked-call trampoline of dav1d/FFmpeg's checkasm, and a
; function that misbehaves on request so the trampoline itself is tested.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"

%define CANARY_SEED     0x5A17C0DE0BADF00D

; result bits of asmbpe_checked_call (mirrored in asmbpe.h)
%define CHK_RBX         (1 << 0)
%define CHK_RBP         (1 << 1)
%define CHK_R12         (1 << 2)
%define CHK_R13         (1 << 3)
%define CHK_R14         (1 << 4)
%define CHK_R15         (1 << 5)
%define CHK_DF          (1 << 6)
%define CHK_VZEROUPPER  (1 << 7)
%define CHK_STACK       (1 << 8)

%define NSTACKARGS      4                       ; args[6] .. args[9]
%define NCANARY         8                       ; 64 bytes of canaries

; asmbpe_checked_call's stack frame (6 pushes + this: rsp % 16 == 0)
struc chk_frame
    .args:      resq NSTACKARGS ; fn's stack arguments (at rsp)
    .canary:    resq NCANARY    ; canaries right above them
    .fill:      resq 1          ; fill
    .ret:       resq 1          ; ret
    .ymm:       resq 1          ; check_ymm
endstruc

section .text

;-----------------------------------------------------------------------------
; uint32_t asmbpe_checked_call(const void *fn, const uint64_t args[10],
;                              const uint64_t fill[6], uint64_t *ret,
;                              int check_ymm)
;
; Calls fn(args[0], ..., args[9]) (args 6 to 9 on the stack, as System V
; passes them) with rbx, rbp, r12, r13, r14, r15 holding fill[0..5] and
; NCANARY canary qwords right above the stack arguments, stores
; fn's rax in *ret and returns a CHK_* mask: a callee-saved register not
; preserved, DF left set, the canaries overwritten, or (check_ymm != 0, needs
; CPU_XGETBV1) the upper ymm state left dirty, i.e. a missing vzeroupper.
; The harness puts garbage in the upper half of 32-bit arguments itself.
;-----------------------------------------------------------------------------
FUNC asmbpe_checked_call, 5, 15, 0, fn, args, fill, ret, check_ymm
    sub         rsp, chk_frame_size
    mov         [rsp + chk_frame.fill], fillq
    mov         [rsp + chk_frame.ret], retq
    mov         [rsp + chk_frame.ymm], check_ymmq
    mov         rax, CANARY_SEED
    xor         rax, rsp
%assign i 0
%rep NCANARY
    mov         [rsp + chk_frame.canary + i * 8], rax
    %assign i i + 1
%endrep
%assign i 0
%rep NSTACKARGS                                 ; stack arguments
    mov         rax, [argsq + 48 + i * 8]
    mov         [rsp + chk_frame.args + i * 8], rax
    %assign i i + 1
%endrep
    vzeroupper                                  ; start from a clean state
    mov         r10, fnq
    mov         r11, argsq
    mov         rax, fillq
    mov         rbx, [rax]
    mov         rbp, [rax + 8]
    mov         r12, [rax + 16]
    mov         r13, [rax + 24]
    mov         r14, [rax + 32]
    mov         r15, [rax + 40]
    mov         rdi, [r11]
    mov         rsi, [r11 + 8]
    mov         rdx, [r11 + 16]
    mov         rcx, [r11 + 24]
    mov         r8,  [r11 + 32]
    mov         r9,  [r11 + 40]
    call        r10
    mov         rcx, [rsp + chk_frame.ret]
    mov         [rcx], rax
    mov         rcx, [rsp + chk_frame.fill]
    xor         r8d, r8d
; CHECK_REG reg, off, bit: r8d |= bit unless reg == [rcx + off] (rcx = fill).
;   %1 = reg (a callee-saved register), %2 = off (its fill's offset), %3 =
;   bit (its CHK_* bit).  Clobbers flags only.
%macro CHECK_REG 3
    cmp         %1, [rcx + %2]
    je          %%ok
    or          r8d, %3
%%ok:
%endmacro
    CHECK_REG   rbx, 0,  CHK_RBX
    CHECK_REG   rbp, 8,  CHK_RBP
    CHECK_REG   r12, 16, CHK_R12
    CHECK_REG   r13, 24, CHK_R13
    CHECK_REG   r14, 32, CHK_R14
    CHECK_REG   r15, 40, CHK_R15
    pushfq
    pop         rax
    bt          eax, 10                         ; DF
    jnc         .df_ok
    or          r8d, CHK_DF
    cld
.df_ok:
    mov         rax, CANARY_SEED
    xor         rax, rsp
%assign i 0
%rep NCANARY
    cmp         [rsp + chk_frame.canary + i * 8], rax
    je          .canary_ok %+ i
    or          r8d, CHK_STACK
.canary_ok %+ i:
    %assign i i + 1
%endrep
    cmp         qword [rsp + chk_frame.ymm], 0
    je          .done
    mov         ecx, 1
    xgetbv                                      ; XINUSE
    test        al, 4                           ; AVX (upper ymm) state in use
    jz          .done
    or          r8d, CHK_VZEROUPPER
    vzeroupper
.done:
    mov         eax, r8d
    add         rsp, chk_frame_size
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; uint64_t asmbpe_test_misbehave(int what)
;
; Returns 42 after breaking one rule on request, so tests can prove that
; asmbpe_checked_call notices: 1-6 clobber rbx, rbp, r12, r13, r14, r15;
; 7 leaves DF set; 8 leaves the upper ymm state dirty; 9 writes above its
; return address.  0 breaks nothing.  Only ever call it through the trampoline.
;-----------------------------------------------------------------------------
FUNC asmbpe_test_misbehave, 1, 1, 0, what
    mov         rax, 0x0123456789ABCDEF
    cmp         whatd, 1
    jne         .n2
    mov         rbx, rax
.n2:
    cmp         whatd, 2
    jne         .n3
    mov         rbp, rax
.n3:
    cmp         whatd, 3
    jne         .n4
    mov         r12, rax
.n4:
    cmp         whatd, 4
    jne         .n5
    mov         r13, rax
.n5:
    cmp         whatd, 5
    jne         .n6
    mov         r14, rax
.n6:
    cmp         whatd, 6
    jne         .n7
    mov         r15, rax
.n7:
    cmp         whatd, 7
    jne         .n8
    std
.n8:
    cmp         whatd, 8
    jne         .n9
    vpcmpeqb    ymm0, ymm0, ymm0
.n9:
    cmp         whatd, 9
    jne         .ret
    mov         [rsp + 8 + chk_frame.canary + 8], rax  ; canary 1 (+8: return address)
.ret:
    mov         eax, 42
    RET
ENDFUNC
