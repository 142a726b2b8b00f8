;-----------------------------------------------------------------------------
; int asmbpe_memeq(const void *a, const void *b, size_t n)
;
; 1 if the n bytes at a equal the n bytes at b, else 0.
; In:  rdi = a, rsi = b, rdx = n.   Out: eax.   Clobbers: rcx, r8, ymm0, ymm1.
;
; Reads: n < 8 loads the 8 bytes that END where each range ends (up to 7 bytes
; before a and b: legal only because every buffer has SPEC §2's 64-byte front
; padding), XORs them and shifts right by (8 - n) * 8, so only the range's own
; bytes remain.  8..16 bytes: first and last qword; 17..32: four qwords; > 32:
; 32-byte vpcmpeqb blocks and one last, overlapping block ending at n.
; Never reads after a + n or b + n.  Writes nothing.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"

section .text

FUNC asmbpe_memeq, 3, 3, 0, a, b, n
    cmp         nq, 8
    jb          .short
    cmp         nq, 16
    ja          .over16
    mov         rax, [aq]                       ; 8..16: first and last qword
    xor         rax, [bq]
    mov         rcx, [aq + nq - 8]
    xor         rcx, [bq + nq - 8]
    or          rax, rcx
    jmp         .result

.short:                                         ; 0..7 bytes
    test        nq, nq
    jz          .equal
    mov         rax, [aq + nq - 8]              ; the 8 bytes ending at a + n
    xor         rax, [bq + nq - 8]
    lea         ecx, [nd * 8]
    neg         ecx
    add         ecx, 64                         ; (8 - n) * 8, in 8..56
    shr         rax, cl                         ; drop the bytes before the range
.result:
    xor         ecx, ecx
    test        rax, rax
    sete        cl
    mov         eax, ecx
    RET

.over16:
    cmp         nq, 32
    ja          .over32
    mov         rax, [aq]                       ; 17..32: four qwords
    xor         rax, [bq]
    mov         rcx, [aq + 8]
    xor         rcx, [bq + 8]
    or          rax, rcx
    mov         rcx, [aq + nq - 16]
    xor         rcx, [bq + nq - 16]
    or          rax, rcx
    mov         rcx, [aq + nq - 8]
    xor         rcx, [bq + nq - 8]
    or          rax, rcx
    jmp         .result

.over32:                                        ; > 32: ymm blocks
    lea         r8, [nq - 32]                   ; offset of the last block
    xor         ecx, ecx
.block:
    vmovdqu     ymm0, [aq + rcx]
    vpcmpeqb    ymm0, ymm0, [bq + rcx]
    vpmovmskb   eax, ymm0
    cmp         eax, -1
    jne         .differ
    add         rcx, 32
    cmp         rcx, r8
    jb          .block
    vmovdqu     ymm0, [aq + r8]                 ; last 32 bytes, may overlap
    vpcmpeqb    ymm0, ymm0, [bq + r8]
    vpmovmskb   eax, ymm0
    vzeroupper
    xor         ecx, ecx
    cmp         eax, -1
    sete        cl
    mov         eax, ecx
    RET
.differ:
    vzeroupper
.equal_or_not:
    xor         eax, eax
    RET
.equal:
    mov         eax, 1
    RET
ENDFUNC
