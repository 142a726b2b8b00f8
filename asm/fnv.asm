;-----------------------------------------------------------------------------
; uint64_t asmbpe_fnv1a64(const void *p, size_t n)
;
; FNV-1a, 64 bits, of the n bytes at p: h = FNV64_OFFSET, then for each byte
; h = (h ^ byte) * FNV64_PRIME mod 2^64.  The hash tokenizer.bin keeps of its
; merge table (SPEC §7) and `.tok` files record; harness.tokenizer.fnv1a64
; calls it (its Python loop took 14 ms for 32,496 merges).  One byte per
; round: the xor and the multiply are a chain of 4 cycles a byte, which no
; unrolling shortens (FNV is sequential), 0.2 ms for that table.
; In:  rdi = p, rsi = n.   Out: rax.   Clobbers: rcx, rdx.
; Reads exactly the n bytes at p (none when n = 0).  Writes nothing.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"

section .text

FUNC asmbpe_fnv1a64, 2, 7, 0, p, n
    mov         rax, FNV64_OFFSET
    mov         rcx, FNV64_PRIME
    test        nq, nq
    jz          .done
    add         nq, pq                          ; n is now the end
.next_byte:
    movzx       edx, byte [pq]
    xor         rax, rdx
    imul        rax, rcx
    inc         pq
    cmp         pq, nq
    jne         .next_byte
.done:
    RET
ENDFUNC
