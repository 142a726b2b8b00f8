;-----------------------------------------------------------------------------
; encode_decode.asm — ids back to bytes (asmbpe_decode) and the encoder's
; counters (asmbpe_enc_stats).
;
; asmbpe_decode builds the id -> bytes table on its first call (build_tokens,
; encode_table.asm); asmbpe_enc_stats sums the counters the worker
; (encode_worker.asm) keeps in each thread state.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "encode.inc"

extern build_tokens

section .text

;-----------------------------------------------------------------------------
; int64_t asmbpe_decode(asmbpe_enc *e, const uint16_t *ids, uint64_t n,
;                       uint8_t *out, uint64_t cap)
; The bytes of ids[0, n), every id < 256 + n_merges (the caller strips
; MASKBIT and handles the specials): written to out when they fit in cap
; (else nothing past cap is written), and their number returned either way.
; ASMBPE_EINVAL at an id out of range, ASMBPE_ENOMEM when the id -> bytes
; table (built on the first call: each merge's bytes are its parts' bytes)
; cannot be had or would pass TOK_MAX_BYTES.  Reads up to 15 bytes past a
; token's bytes in the table (padded).
;-----------------------------------------------------------------------------
%define dc_enc       rbx   ; the encoder
%define dc_ids       r12   ; ids
%define dc_n         r13   ; their number
%define dc_out       r14   ; out
%define dc_cap       r15   ; cap
%define dc_off       r8    ; enc.tokoff: each id's first byte in dc_bytes
%define dc_bytes     r9    ; enc.tokbytes
%define dc_nids      r10   ; ids defined (256 + merges)
%define dc_len       rbp   ; bytes so far (written or counted)
%define dc_lend      ebp   ; (dc_len, 32-bit)
%define dc_at        r11   ; the next id's index
%define dc_atd       r11d  ; (dc_at, 32-bit)
FUNC asmbpe_decode, 5, 15, 1, e, ids, n, out, cap
    mov         dc_enc, eq
    mov         dc_ids, idsq
    mov         dc_n, nq
    mov         dc_out, outq
    mov         dc_cap, capq
    cmp         qword [dc_enc + enc.tokoff], 0
    jne         .have_table
    call        build_tokens                    ; rbx = e
    test        rax, rax
    jnz         .ret
.have_table:
    mov         dc_off, [dc_enc + enc.tokoff]
    mov         dc_bytes, [dc_enc + enc.tokbytes]
    mov         dc_nids, [dc_enc + enc.nmerges]
    add         dc_nids, 256                    ; ids defined
    xor         dc_lend, dc_lend                ; bytes so far
    xor         dc_atd, dc_atd                  ; i
.id:
    cmp         dc_at, dc_n
    jae         .done
    movzx       eax, word [dc_ids + dc_at * 2]
    inc         dc_at
    cmp         rax, dc_nids
    jae         .einval
    mov         rsi, [dc_off + rax * 8]
    mov         rcx, [dc_off + rax * 8 + 8]
    sub         rcx, rsi                        ; its length
    add         rsi, dc_bytes
    lea         rdx, [dc_len + rcx]
    cmp         rdx, dc_cap
    ja          .count_only                     ; past cap: count, write nothing
    lea         rdi, [dc_out + dc_len]
    mov         dc_len, rdx
    cmp         rcx, 16
    ja          .long
    lea         rax, [rdi + 16]                 ; a 16-byte store fits in cap?
    sub         rax, dc_out
    cmp         rax, dc_cap
    ja          .long
    vmovdqu     xmm0, [rsi]
    vmovdqu     [rdi], xmm0
    jmp         .id
.long:
    rep movsb
    jmp         .id
.count_only:
    mov         dc_len, rdx
    jmp         .id
.done:
    mov         rax, dc_len
    jmp         .ret
.einval:
    mov         rax, ASMBPE_EINVAL
.ret:
    RET
ENDFUNC
%undef dc_enc
%undef dc_ids
%undef dc_n
%undef dc_out
%undef dc_cap
%undef dc_off
%undef dc_bytes
%undef dc_nids
%undef dc_len
%undef dc_lend
%undef dc_at
%undef dc_atd

;-----------------------------------------------------------------------------
; void asmbpe_enc_stats(const asmbpe_enc *e, uint64_t tid, uint64_t *out)
; The ASMBPE_ES_* counters of thread index tid, or of all threads summed
; (tid >= MAX_THREADS), over every call so far.  cache = passes - merge.
;-----------------------------------------------------------------------------
struc estats                                    ; the counters (ASMBPE_ES_*)
    .chunks:    resq 1                          ; chunks split
    .hits:      resq 1                          ; chunks not encoded (found)
    .longs:     resq 1                          ; chunks that took the heap path
    .cyc_pretok: resq 1                         ; cycles: pre-tokenizing
    .cyc_cache: resq 1                          ; the passes, less merging
    .cyc_merge: resq 1                          ; misses and uncached chunks
    .cyc_write: resq 1                          ; moving ids into order
    .cyc_total: resq 1                          ; the whole worker
endstruc
%define ES_COUNT    (estats_size / 8)           ; ASMBPE_ES_COUNT

FUNC asmbpe_enc_stats, 3, 7, 0, e, tid, out
    xor         eax, eax
    mov         ecx, ES_COUNT
.zero:
    mov         [outq + rcx * 8 - 8], rax
    dec         ecx
    jnz         .zero
    xor         ecx, ecx
    mov         r10d, MAX_THREADS
    cmp         tidq, MAX_THREADS
    jae         .thread
    mov         rcx, tidq                       ; one thread: [tid, tid + 1)
    lea         r10, [rcx + 1]
.thread:
    mov         r8, [eq + enc.ts + rcx * 8]
    test        r8, r8
    jz          .next
    mov         rax, [r8 + tstate.chunks]
    add         [outq + estats.chunks], rax
    mov         rax, [r8 + tstate.chunks]       ; hits: the chunks not encoded
    sub         rax, [r8 + tstate.encoded]
    add         [outq + estats.hits], rax
    mov         rax, [r8 + tstate.longs]
    add         [outq + estats.longs], rax
    mov         rax, [r8 + tstate.cyc_pretok]
    add         [outq + estats.cyc_pretok], rax
    mov         rax, [r8 + tstate.cyc_pass]
    sub         rax, [r8 + tstate.cyc_merge]
    add         [outq + estats.cyc_cache], rax
    mov         rax, [r8 + tstate.cyc_merge]
    add         [outq + estats.cyc_merge], rax
    mov         rax, [r8 + tstate.cyc_write]
    add         [outq + estats.cyc_write], rax
    mov         rax, [r8 + tstate.cyc_total]
    add         [outq + estats.cyc_total], rax
.next:
    inc         ecx
    cmp         ecx, r10d
    jb          .thread
    RET
ENDFUNC
