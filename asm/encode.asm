;-----------------------------------------------------------------------------
; encode.asm — encoding (SPEC §6): documents -> u16 token ids.
;
; Each document is split with the pre-tokenizer (asmbpe_split_offsets); each
; chunk becomes tokens by repeating one step: find the lowest-numbered merge
; among its adjacent pairs and apply it everywhere in the chunk, left to
; right, non-overlapping (what training did, and what Hugging Face's BPE
; does).  The ways to a chunk's tokens, all giving the same ids:
;
;   1..15 bytes, one id the whole-token table (each byte, and each id whose
;                       bytes encode to it alone: shared, built once)
;   2..48 bytes         the thread's cache (65,536 entries, two-way) or, on
;                       a miss, the short path, whose result then fills it
;   up to SHORT_MAX     the short path: rounds of "lowest rank, apply all"
;                       (up to 16 bytes: short16, one merge per step with
;                       the ranks in ymm lanes)
;   longer              the heap path: a min-heap of (rank, position) over a
;                       linked list of the chunk's tokens, O(n log n) — a
;                       1 MB run with no boundary stays fast
;
; Threads claim blocks of DOC_BLOCK documents (smaller ones at the end).
; Thread 0 takes them from the front and writes their ids one after another
; from out[0] (or `front`); the others take them from the back, and write a
; claim's documents one after another from out[start(d0) + d0], d0 its first
; document (the claim's own room: its bytes plus a <|bos|> per document, so
; the threads never share a range, and only the pages of the ids written are
; touched), then moved down into document order.
; Layout and constants: encode.inc.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "wordtab.inc"
%include "encode.inc"

extern asmbpe_map
extern asmbpe_unmap
extern asmbpe_parallel
extern asmbpe_split_offsets

section .rodata
align 64
; 64 bytes 0xFF then 64 zero bytes: the 48 bytes at (mask_tab + 64 - n) keep
; the first n bytes of a load (n <= 48)
mask_tab:
    times 64 db 0xFF
    times 64 db 0
; u16 1 << lane for lanes 0..15 (short16: a set of lanes from a bit mask)
bit_w:
%assign i 0
%rep 16
    dw 1 << i
%assign i i + 1
%endrep
; u16 lane numbers 0..15 (short16: the lane of a rank to replace)
lane_w:
%assign i 0
%rep 16
    dw i
%assign i i + 1
%endrep

section .bss
align 64
ts_pool_lock:   resd 16                         ; spin lock, a line of its own
ts_pool_n:      resq 1                          ; states kept
ts_pool:        resq TS_POOL_MAX

section .text

; POOL_LOCK / POOL_UNLOCK: the state pool's spin lock (held for a few
; instructions; never across a system call).  POOL_LOCK clobbers eax.
%macro POOL_LOCK 0
%%try:
    mov         eax, 1
    xchg        eax, [ts_pool_lock]
    test        eax, eax
    jz          %%held
%%wait:
    pause
    cmp         dword [ts_pool_lock], 0
    jne         %%wait
    jmp         %%try
%%held:
%endmacro
%macro POOL_UNLOCK 0
    mov         dword [ts_pool_lock], 0
%endmacro

; ts_unmap (local): rdi = a thread state.  Unmaps its cache, long-chunk
; arrays, document buffer and page.  Keeps rbx, rbp, r12-r15; clobbers rax,
; rcx, rdx, rsi, rdi, r9, r11.
ts_unmap:
    push        rbx
    mov         rbx, rdi
    mov         rdi, [rbx + tstate.cache]
    mov         esi, CACHE_ENTRIES * centry_size
    call        asmbpe_unmap
    mov         rdi, [rbx + tstate.long]
    mov         rsi, [rbx + tstate.longcap]
    shl         rsi, 5                          ; x LONG_BYTES_PER
    call        asmbpe_unmap
    mov         rdi, [rbx + tstate.doc]
    mov         rsi, [rbx + tstate.doccap]
    call        asmbpe_unmap
    mov         rdi, rbx
    mov         esi, (tstate_size + 4095) & ~4095
    call        asmbpe_unmap
    pop         rbx
    ret

; ts_give (local): rdi = a thread state no encoder holds any more.  Into the
; pool (its document buffer and long-chunk arrays unmapped first when over
; TS_POOL_KEEP bytes), or unmapped when the pool is full.  Keeps rbx, rbp,
; r12-r15; clobbers rax, rcx, rdx, rsi, rdi, r9, r11.
ts_give:
    push        rbx
    mov         rbx, rdi
    cmp         qword [rbx + tstate.doccap], TS_POOL_KEEP
    jbe         .doc_kept
    mov         rdi, [rbx + tstate.doc]
    mov         rsi, [rbx + tstate.doccap]
    call        asmbpe_unmap
    mov         qword [rbx + tstate.doc], 0
    mov         qword [rbx + tstate.doccap], 0
.doc_kept:
    mov         rsi, [rbx + tstate.longcap]
    shl         rsi, 5                          ; x LONG_BYTES_PER
    cmp         rsi, TS_POOL_KEEP
    jbe         .long_kept
    mov         rdi, [rbx + tstate.long]
    call        asmbpe_unmap
    mov         qword [rbx + tstate.long], 0
    mov         qword [rbx + tstate.longcap], 0
.long_kept:
    POOL_LOCK
    mov         rax, [ts_pool_n]
    cmp         rax, TS_POOL_MAX
    jae         .full
    lea         rcx, [ts_pool]
    mov         [rcx + rax * 8], rbx
    inc         rax
    mov         [ts_pool_n], rax
    POOL_UNLOCK
    pop         rbx
    ret
.full:
    POOL_UNLOCK
    mov         rdi, rbx
    pop         rbx
    jmp         ts_unmap                        ; tail call

; ts_take (local): rax = a thread state from the pool, or 0 when it has none.
; Its counters, scratch and run memo are cleared here; its cache, if it has
; one, is marked tstate.stale for its thread to clear.  Keeps rbx, rbp, rsi,
; r8-r15; clobbers rcx, rdx, rdi.
ts_take:
    POOL_LOCK
    xor         edx, edx
    mov         rcx, [ts_pool_n]
    test        rcx, rcx
    jz          .unlock
    dec         rcx
    mov         [ts_pool_n], rcx
    lea         rdx, [ts_pool]
    mov         rdx, [rdx + rcx * 8]
.unlock:
    POOL_UNLOCK
    test        rdx, rdx
    jz          .none
    xor         eax, eax
    lea         rdi, [rdx + tstate.chunks]      ; counters and cycles
    mov         ecx, (tstate.doc - tstate.chunks) / 8
    rep stosq
    lea         rdi, [rdx + tstate.stale]       ; the rest of the page
    mov         ecx, (tstate_size - tstate.stale) / 8
    rep stosq
    cmp         qword [rdx + tstate.cache], 0
    setne       al
    mov         [rdx + tstate.stale], rax
.none:
    mov         rax, rdx
    ret

;-----------------------------------------------------------------------------
; uint64_t asmbpe_enc_trim(void)
; Unmaps every thread state the pool keeps (asmbpe_enc_free leaves them there
; for the process's next encoder) and returns how many.  A state in the pool
; belongs to no encoder: safe at any time, from any thread.
;-----------------------------------------------------------------------------
FUNC asmbpe_enc_trim, 0, 11, 0
    xor         ebp, ebp
.next:
    POOL_LOCK
    mov         rax, [ts_pool_n]
    test        rax, rax
    jz          .done
    dec         rax
    mov         [ts_pool_n], rax
    lea         rcx, [ts_pool]
    mov         rdi, [rcx + rax * 8]
    POOL_UNLOCK
    call        ts_unmap
    inc         rbp
    jmp         .next
.done:
    POOL_UNLOCK
    mov         rax, rbp
    RET
ENDFUNC

; COPY_IDS dst, src, n, i, t32, t16: dst[0 .. n) = src[0 .. n), u16 ids one
; at a time (n >= 1; n and i 64-bit registers, t32 / t16 one scratch register).
%macro COPY_IDS 6
    xor         %4, %4
%%copy:
    movzx       %5, word [%2 + %4 * 2]
    mov         [%1 + %4 * 2], %6
    inc         %4
    cmp         %4, %3
    jb          %%copy
%endmacro

; PAIR_HOME a32, b32: ecx = P = a << 16 | b, r11d = its home slot in the
; pair -> merge table (r10d = shift).
%macro PAIR_HOME 2
    mov         ecx, %1
    shl         ecx, 16
    or          ecx, %2                         ; P
    imul        r11d, ecx, RANK_MUL
    shrx        r11d, r11d, r10d
%endmacro

; PROBE dst32, dst64: the linear probe for P = ecx from slot r11d: dst = its
; merge number, NO_RANK at the first empty slot (r8 = slots, r9d = mask).
%macro PROBE 2
%%probe:
    mov         %2, [r8 + r11 * 8]
    cmp         %1, ecx
    je          %%hit
    cmp         %1, NO_RANK
    je          %%done                          ; (dst32 = NO_RANK)
    inc         r11d
    and         r11d, r9d
    jmp         %%probe
%%hit:
    shr         %2, 32
%%done:
%endmacro

; RANK dst32, dst64, a32, b32: dst = the merge number of the pair (a, b),
; NO_RANK if none (dst64: dst32's 64-bit register; its top half is zero on a
; hit).  Each probe is one load of a {key, rank} slot.  Needs r8 = slots, r9d
; = mask, r10d = shift.  Clobbers ecx, r11.
%macro RANK 4
    PAIR_HOME   %3, %4
    PROBE       %1, %2
%endmacro

; RANKV dst32, dst64, a32, b32: RANK without a data-dependent branch while
; the probe run ends within 4 slots of the home slot (short16): one 32-byte
; load of the 4 slots {key, rank} (the table's tail repeats its first
; slots), their keys compared with P and with the empty key at once; the
; first slot that holds either gives the rank (an empty slot's rank dword
; is NO_RANK).  Longer runs go on slot by slot.  Needs r8-r10 as RANK, ymm9
; = all ones.  Clobbers ecx, esi, r11, ymm6, ymm7.
%macro RANKV 4
    PAIR_HOME   %3, %4
    vmovd       xmm6, ecx
    vpbroadcastd ymm6, xmm6
    vmovdqu     ymm7, [r8 + r11 * 8]
    vpcmpeqd    ymm6, ymm6, ymm7                ; key == P
    vpcmpeqd    ymm7, ymm7, ymm9                ; empty
    vpor        ymm6, ymm6, ymm7
    vmovmskps   esi, ymm6
    and         esi, 0x55                       ; (the key dwords)
    jz          %%far
    tzcnt       esi, esi
    lea         r11, [r8 + r11 * 8 + 4]
    mov         %1, [r11 + rsi * 4]
    jmp         %%done
%%far:                                          ; (rare) past the 4 slots
    add         r11d, 4
    and         r11d, r9d
    PROBE       %1, %2
%%done:
%endmacro

; ENTRY_EQ entry, ne: to ne unless the cache entry holds the chunk (rsi =
; its bytes, rdx = its length, 2..CACHE_MAX_LEN, r9 = mask_tab + 64 - rdx):
; its length, then its masked 16 / 32 / 48 bytes (reads past the chunk:
; text or padding).  Falls through when it does.  Clobbers eax, ymm0, ymm1.
%macro ENTRY_EQ 2
    cmp         [%1 + centry.len], dl
    jne         %2
    cmp         edx, 16
    ja          %%key32
    vmovdqu     xmm0, [rsi]
    vpand       xmm0, xmm0, [r9]
    vpcmpeqb    xmm0, xmm0, [%1 + centry.key]
    vpmovmskb   eax, xmm0
    cmp         eax, 0xFFFF
    jne         %2
    jmp         %%eq
%%key32:
    vmovdqu     ymm0, [rsi]
    vpand       ymm0, ymm0, [r9]
    vpcmpeqb    ymm0, ymm0, [%1 + centry.key]
    vpmovmskb   eax, ymm0
    cmp         eax, -1
    jne         %2
    cmp         edx, 32
    jbe         %%eq
    vmovdqu     xmm1, [rsi + 32]
    vpand       xmm1, xmm1, [r9 + 32]
    vpcmpeqb    xmm1, xmm1, [%1 + centry.key + 32]
    vpmovmskb   eax, xmm1
    cmp         eax, 0xFFFF
    jne         %2
%%eq:
%endmacro

; SHORT_HASH key, h, t: h = the 16-bit hash of a chunk of 1..SEED_MAX_LEN
; bytes from its key (xmm: the bytes zero-padded, the length in byte 15):
; crc32c of its two qwords, the top 16 bits.  The index of its cache entry
; and of its whole-token slot.  Clobbers t.
%macro SHORT_HASH 3
    vmovq       %3, %1
    xor         %2, %2
    crc32       %2, %3
    vpextrq     %3, %1, 1
    crc32       %2, %3
    shr         %2, 32 - 16
%endmacro

; LOAD_TABLE enc: r8, r9, r10 for RANK.
%macro LOAD_TABLE 1
    mov         r8, [%1 + enc.slots]
    mov         r9, [%1 + enc.mask]
    mov         r10, [%1 + enc.shift]
%endmacro

;-----------------------------------------------------------------------------
; asmbpe_enc *asmbpe_enc_new(const uint32_t *merges, uint64_t n_merges)
; merges[i] = left | right << 16 makes id 256 + i (checked by the caller:
; ids defined, no pair twice).  NULL when out of memory or n_merges too big.
;-----------------------------------------------------------------------------
FUNC asmbpe_enc_new, 2, 12, 0, merges, n
    mov         rbx, mergesq
    mov         rbp, nq
    xor         eax, eax
    cmp         rbp, 65535 - 256
    ja          .ret
    mov         edi, (enc_size + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .ret
    mov         r14, rax
    mov         [r14 + enc.nmerges], rbp
    lea         rax, [rbp * 2]                  ; slots: a power of two
    mov         ecx, 10                         ; >= 2 n, at least 1024
.size:
    mov         edx, 1
    shl         edx, cl
    cmp         rdx, rax
    jae         .sized
    inc         ecx
    jmp         .size
.sized:
    lea         rax, [rdx - 1]
    mov         [r14 + enc.mask], rax
    mov         eax, 32
    sub         eax, ecx
    mov         [r14 + enc.shift], rax
    lea         rdi, [rdx * 8 + RANK_TAIL * 8]  ; (+ the tail: RANKV)
    mov         [r14 + enc.slotbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [r14 + enc.slots], rax
    mov         rdi, rax                        ; every slot empty
    mov         rcx, [r14 + enc.slotbytes]
    shr         rcx, 3
    mov         rax, -1
    rep stosq
    lea         rdi, [rbp * 4 + 4]              ; a copy of the merges (for
    call        asmbpe_map                      ; the id -> bytes table)
    test        rax, rax
    jz          .fail_slots
    mov         [r14 + enc.merges], rax
    mov         rdi, rax
    mov         rsi, rbx
    lea         rcx, [rbp * 4]
    rep movsb
    mov         edi, BP_BYTES                   ; the byte-pair ranks, for a
    call        asmbpe_map                      ; chunk's first ranks
    test        rax, rax
    jz          .fail_merges
    mov         [r14 + enc.bp], rax
    mov         rdi, rax
    mov         ecx, BP_BYTES / 8
    mov         rax, -1
    rep stosq
    LOAD_TABLE  r14
    xor         esi, esi                        ; merge i
.insert:
    cmp         rsi, rbp
    jae         .done
    mov         eax, [rbx + rsi * 4]
    rol         eax, 16                         ; P = left << 16 | right
    test        eax, 0xFF00FF00
    jnz         .not_bytes
    mov         edx, eax                        ; two bytes: a << 8 | b
    shr         edx, 8
    movzx       edi, al
    or          edx, edi
    mov         rdi, [r14 + enc.bp]
    mov         [rdi + rdx * 2], si
.not_bytes:
    mov         ecx, eax
    imul        r11d, ecx, RANK_MUL
    shrx        r11d, r11d, r10d
.probe:
    cmp         dword [r8 + r11 * 8], NO_RANK
    je          .put
    inc         r11d
    and         r11d, r9d
    jmp         .probe
.put:
    mov         [r8 + r11 * 8], ecx
    mov         [r8 + r11 * 8 + 4], esi
    inc         rsi
    jmp         .insert
.done:
    mov         rdi, [r14 + enc.mask]           ; the tail: the first slots
    lea         rdi, [r8 + rdi * 8 + 8]         ; again, so that RANKV's load
    vmovdqu     ymm0, [r8]                      ; from any slot sees the
    vmovdqu     [rdi], ymm0                     ; probe run as it wraps
    vzeroupper
    mov         rax, r14
    jmp         .ret
.fail_merges:
    mov         rdi, [r14 + enc.merges]
    lea         rsi, [rbp * 4 + 4]
    call        asmbpe_unmap
.fail_slots:
    mov         rdi, [r14 + enc.slots]
    mov         rsi, [r14 + enc.slotbytes]
    call        asmbpe_unmap
.fail:
    mov         rdi, r14
    mov         esi, (enc_size + 4095) & ~4095
    call        asmbpe_unmap
    xor         eax, eax
.ret:
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; void asmbpe_enc_free(asmbpe_enc *e)          (e may be NULL)
;-----------------------------------------------------------------------------
FUNC asmbpe_enc_free, 1, 12, 0, e
    mov         rbx, eq
    test        rbx, rbx
    jz          .ret
    xor         ebp, ebp                        ; thread index
.thread:
    cmp         ebp, MAX_THREADS
    jae         .threads_done
    mov         rdi, [rbx + enc.ts + rbp * 8]
    test        rdi, rdi
    jz          .next
    call        ts_give                         ; to the pool, for the next
.next:                                          ; encoder
    inc         ebp
    jmp         .thread
.threads_done:
    mov         rdi, [rbx + enc.seed]
    mov         esi, SEED_SLOTS * seedslot_size
    call        asmbpe_unmap
    mov         rdi, [rbx + enc.slots]
    mov         rsi, [rbx + enc.slotbytes]
    call        asmbpe_unmap
    mov         rdi, [rbx + enc.bp]
    mov         esi, BP_BYTES
    call        asmbpe_unmap
    mov         rbp, [rbx + enc.nmerges]
    mov         rdi, [rbx + enc.merges]
    lea         rsi, [rbp * 4 + 4]
    call        asmbpe_unmap
    mov         rdi, [rbx + enc.tokoff]
    lea         rsi, [rbp * 8 + 257 * 8]
    call        asmbpe_unmap
    mov         rdi, [rbx + enc.tokbytes]
    mov         rsi, [rbx + enc.tokcap]
    call        asmbpe_unmap
    mov         rdi, rbx
    mov         esi, (enc_size + 4095) & ~4095
    call        asmbpe_unmap
.ret:
    RET
ENDFUNC

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
FUNC asmbpe_decode, 5, 15, 1, e, ids, n, out, cap
    mov         rbx, eq
    mov         r12, idsq
    mov         r13, nq
    mov         r14, outq
    mov         r15, capq
    cmp         qword [rbx + enc.tokoff], 0
    jne         .have_table
    call        build_tokens                    ; rbx = e
    test        rax, rax
    jnz         .ret
.have_table:
    mov         r8, [rbx + enc.tokoff]
    mov         r9, [rbx + enc.tokbytes]
    mov         r10, [rbx + enc.nmerges]
    add         r10, 256                        ; ids defined
    xor         ebp, ebp                        ; bytes so far
    xor         r11d, r11d                      ; i
.id:
    cmp         r11, r13
    jae         .done
    movzx       eax, word [r12 + r11 * 2]
    inc         r11
    cmp         rax, r10
    jae         .einval
    mov         rsi, [r8 + rax * 8]
    mov         rcx, [r8 + rax * 8 + 8]
    sub         rcx, rsi                        ; its length
    add         rsi, r9
    lea         rdx, [rbp + rcx]
    cmp         rdx, r15
    ja          .count_only                     ; past cap: count, write nothing
    lea         rdi, [r14 + rbp]
    mov         rbp, rdx
    cmp         rcx, 16
    ja          .long
    lea         rax, [rdi + 16]                 ; a 16-byte store fits in cap?
    sub         rax, r14
    cmp         rax, r15
    ja          .long
    vmovdqu     xmm0, [rsi]
    vmovdqu     [rdi], xmm0
    jmp         .id
.long:
    rep movsb
    jmp         .id
.count_only:
    mov         rbp, rdx
    jmp         .id
.done:
    mov         rax, rbp
    jmp         .ret
.einval:
    mov         rax, ASMBPE_EINVAL
.ret:
    RET
ENDFUNC

; build_tokens: rbx = encoder.  Fills enc.tokoff and enc.tokbytes.  rax = 0, or
; ASMBPE_ENOMEM.  Keeps rbx, r12-r15; clobbers the rest.
build_tokens:
    SAVE        rbx, r12, r13, r14, r15, rbp    ; (6: calls aligned)
    mov         r12, [rbx + enc.nmerges]
    lea         rdi, [r12 * 8 + 257 * 8]        ; offsets [256 + n + 1]
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         r13, rax
    xor         eax, eax                        ; lengths first, in off[id + 1]
.bytes:
    mov         qword [r13 + rax * 8 + 8], 1
    inc         eax
    cmp         eax, 256
    jb          .bytes
    mov         r14, [rbx + enc.merges]
    xor         ecx, ecx                        ; merge k
    mov         r15d, 256                       ; bytes in all
.merge_len:
    cmp         rcx, r12
    jae         .lengths_done
    mov         eax, [r14 + rcx * 4]
    movzx       edx, ax                         ; left
    shr         eax, 16                         ; right
    mov         rdx, [r13 + rdx * 8 + 8]
    add         rdx, [r13 + rax * 8 + 8]
    mov         [r13 + rcx * 8 + 257 * 8], rdx
    add         r15, rdx
    cmp         r15, TOK_MAX_BYTES
    ja          .too_big
    inc         rcx
    jmp         .merge_len
.lengths_done:
    xor         eax, eax                        ; lengths -> start offsets
    xor         edx, edx
    lea         rcx, [r12 + 256]
.prefix:
    add         rdx, [r13 + rax * 8 + 8]
    mov         [r13 + rax * 8 + 8], rdx
    inc         rax
    cmp         rax, rcx
    jb          .prefix
    lea         rdi, [r15 + 4095 + 16]          ; the bytes, and 16 to spare
    and         rdi, ~4095
    mov         rbp, rdi
    call        asmbpe_map
    test        rax, rax
    jz          .free_off
    mov         [rbx + enc.tokcap], rbp
    mov         rbp, rax
    xor         eax, eax
.byte_ids:
    mov         [rbp + rax], al
    inc         eax
    cmp         eax, 256
    jb          .byte_ids
    xor         r8d, r8d                        ; merge k: left's bytes, right's
.merge_bytes:
    cmp         r8, r12
    jae         .built
    mov         rdi, [r13 + r8 * 8 + 256 * 8]
    add         rdi, rbp
    mov         eax, [r14 + r8 * 4]
    movzx       edx, ax
    shr         eax, 16
    mov         rsi, [r13 + rdx * 8]
    mov         rcx, [r13 + rdx * 8 + 8]
    sub         rcx, rsi
    add         rsi, rbp
    rep movsb
    mov         rsi, [r13 + rax * 8]
    mov         rcx, [r13 + rax * 8 + 8]
    sub         rcx, rsi
    add         rsi, rbp
    rep movsb
    inc         r8
    jmp         .merge_bytes
.built:
    mov         [rbx + enc.tokbytes], rbp
    mov         [rbx + enc.tokoff], r13
    xor         eax, eax
    jmp         .ret
.too_big:
.free_off:
    mov         rdi, r13
    lea         rsi, [r12 * 8 + 257 * 8]
    call        asmbpe_unmap
.enomem:
    mov         rax, ASMBPE_ENOMEM
.ret:
    RESTORE

; build_seed: rdi = encoder, with thread 0's state.  Maps enc.seed and fills
; it (encode.inc): in id order, each id of up to SEED_MAX_LEN bytes that
; those bytes encode to alone (every byte; a merge's checked by short_path
; in thread 0's room) goes to the first free slot of its line.  Builds the
; id -> bytes table first if needed.  rax = 0, ASMBPE_ENOMEM, or
; ASMBPE_EINVAL should a byte find its line full (never, with SHORT_HASH).
; Keeps rbx, rbp, r12-r15; clobbers the rest.
struc bs_frame                                  ; build_seed's stack frame
    .job:       resq 1                          ; a job of job.enc alone: the
                                                ; encoder (all short_path reads)
    .slot:      resq 1                          ; the id's free slot
    .len:       resq 1                          ; its length
                resq 1                          ; (unused)
    .buf:       resb 64                         ; 16 zero bytes, the id's
                                                ; bytes zero-padded to 48
    .ids:       resw 32                         ; their ids (up to 32)
                resq 1                          ; (6 pushes + the frame: aligned)
endstruc
build_seed:
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, bs_frame_size
    mov         r13, rdi
    mov         [rsp + bs_frame.job + job.enc], r13
    lea         r12, [rsp + bs_frame.job]
    cmp         qword [r13 + enc.tokoff], 0
    jne         .have_tokens
    mov         rbx, r13
    call        build_tokens
    test        rax, rax
    jnz         .ret
.have_tokens:
    mov         edi, SEED_SLOTS * seedslot_size
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         r15, rax
    mov         rbx, [r13 + enc.ts]               ; short_path's room
    vpxor       xmm0, xmm0, xmm0
    vmovdqu     [rsp + bs_frame.buf], ymm0
    vmovdqu     [rsp + bs_frame.buf + 32], ymm0
    xor         r14d, r14d                      ; id
.id:
    mov         rax, [r13 + enc.nmerges]
    add         rax, 256
    cmp         r14, rax
    jae         .built
    mov         rbp, [r13 + enc.tokoff]
    mov         rsi, [rbp + r14 * 8]
    mov         rdx, [rbp + r14 * 8 + 8]
    sub         rdx, rsi                        ; its length
    cmp         rdx, SEED_MAX_LEN
    ja          .next
    add         rsi, [r13 + enc.tokbytes]       ; (padded by 16)
    lea         r9, [mask_tab + 64]
    sub         r9, rdx
    vmovdqu     xmm0, [rsi]
    vpand       xmm0, xmm0, [r9]
    vmovdqu     [rsp + bs_frame.buf + 16], xmm0       ; (byte 15: 0)
    vpinsrb     xmm0, xmm0, edx, 15             ; the key
    SHORT_HASH  xmm0, r8, rcx
    shl         r8, SD_SHIFT
    add         r8, r15
    cmp         byte [r8 + seedslot.len], 0
    je          .free
    xor         r8, seedslot_size               ; the other slot of the line
    cmp         byte [r8 + seedslot.len], 0
    je          .free
    cmp         r14d, 256                       ; lower ids have both
    jb          .no_byte_slot
    jmp         .next
.free:
    mov         [rsp + bs_frame.slot], r8
    mov         [rsp + bs_frame.len], rdx
    cmp         r14d, 256
    jb          .store                          ; a byte is its own id
    lea         rsi, [rsp + bs_frame.buf + 16]
    lea         rdi, [rsp + bs_frame.ids]
    call        short_path
    lea         rax, [rsp + bs_frame.ids + 2]
    cmp         rdi, rax
    jne         .next                           ; more than one id
    movzx       eax, word [rsp + bs_frame.ids]
    cmp         eax, r14d
    jne         .next                           ; another id, same bytes
.store:
    mov         r8, [rsp + bs_frame.slot]
    vmovdqu     xmm0, [rsp + bs_frame.buf + 16]
    vmovdqu     [r8 + seedslot.key], xmm0
    mov         rdx, [rsp + bs_frame.len]
    mov         [r8 + seedslot.len], dl
    mov         rax, r14
    bts         rax, 63
    mov         [r8 + seedslot.val], rax
.next:
    inc         r14
    jmp         .id
.built:
    mov         [r13 + enc.seed], r15
    xor         eax, eax
    jmp         .ret
.no_byte_slot:
    mov         rdi, r15
    mov         esi, SEED_SLOTS * seedslot_size
    call        asmbpe_unmap
    mov         rax, ASMBPE_EINVAL
    jmp         .ret
.enomem:
    mov         rax, ASMBPE_ENOMEM
.ret:
    vzeroupper
    add         rsp, bs_frame_size
    RESTORE

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

;-----------------------------------------------------------------------------
; int64_t asmbpe_encode(asmbpe_enc *e, const uint8_t *text,
;                       const uint64_t *doc_ends, uint64_t n_docs,
;                       uint64_t threads, uint64_t flags,
;                       uint16_t *out, uint64_t *counts, uint16_t *front)
;
; Encodes documents text[doc_ends[i-1], doc_ends[i]) (the first from 0) on
; `threads` threads.  flags: ASMBPE_ENC_BOS puts <|bos|> (id 256 + n_merges)
; before each document; ASMBPE_ENC_NOCACHE bypasses the chunk cache.  out
; must hold doc_ends[n_docs - 1] + n_docs ids; on return it holds every
; document's ids in order, counts[i] of them for document i.  With
; ASMBPE_ENC_CLAIMS (see asmbpe.h) the ids stay where the threads wrote
; them, thread 0's from front (NULL: out); front is not read without it.
; Returns the ids written, or ASMBPE_EINVAL / ASMBPE_ENOMEM / ASMBPE_ETHREAD.
; Not for two calls at once on one encoder (the threads' caches are shared).
;-----------------------------------------------------------------------------
struc en_frame                                  ; asmbpe_encode_impl's frame
    .job:       resb job_size                   ; the job (at rsp: its pointer)
                resq 1                          ; (calls aligned)
endstruc
%if en_frame.job != 0
    %error "en_frame: the job must be at rsp"
%endif

FUNC asmbpe_encode, 6, 6, 0, e, text, ends, ndocs, threads, flags
    and         flagsq, EF_PUBLIC
    jmp         asmbpe_encode_impl              ; (nothing pushed: the stack
ENDFUNC                                         ; arguments are where they were)

; asmbpe_encode_impl: asmbpe_encode and asmbpe_encode_docs (flags checked,
; EF_DOCPTRS set by the latter)
HIDDEN
FUNC asmbpe_encode_impl, 9, 15, 0, e, text, ends, ndocs, threads, flags, out, counts, front
    STACK_ALLOC en_frame_size
    mov         rax, ASMBPE_EINVAL
    test        threadsq, threadsq
    jz          .ret
    cmp         threadsq, MAX_THREADS
    ja          .ret
    xor         eax, eax
    test        ndocsq, ndocsq
    jz          .ret
    mov         [rsp + en_frame.job + job.enc], eq
    mov         [rsp + en_frame.job + job.buf], textq
    mov         [rsp + en_frame.job + job.ends], endsq
    mov         [rsp + en_frame.job + job.ndocs], ndocsq
    mov         [rsp + en_frame.job + job.flags], flagsq
    mov         rax, outm
    mov         [rsp + en_frame.job + job.out], rax
    mov         rax, countsm
    mov         [rsp + en_frame.job + job.counts], rax
    mov         rax, [rsp + en_frame.job + job.out]              ; thread 0's ids: from front
    test        qword [rsp + en_frame.job + job.flags], EF_CLAIMS ; when given (EF_CLAIMS),
    jz          .front_is_out                   ; else from out[0]
    mov         rcx, frontm
    test        rcx, rcx
    cmovnz      rax, rcx
.front_is_out:
    mov         [rsp + en_frame.job + job.front], rax
    mov         qword [rsp + en_frame.job + job.next], 0
    mov         qword [rsp + en_frame.job + job.back], 0
    mov         qword [rsp + en_frame.job + job.status], 0
    mov         [rsp + en_frame.job + job.nth], threadsq
    mov         r15, threadsq
    mov         r13, eq
    xor         r12d, r12d                      ; each thread's state
.states:
    cmp         r12, r15
    jae         .states_done
    mov         rbx, [r13 + enc.ts + r12 * 8]
    test        rbx, rbx
    jnz         .have_state
    call        ts_take                         ; one an old encoder used,
    test        rax, rax                        ; else a new one
    jnz         .taken
    mov         edi, (tstate_size + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
.taken:
    mov         rbx, rax
    mov         [r13 + enc.ts + r12 * 8], rbx
.have_state:
    test        qword [rsp + en_frame.job + job.flags], EF_NOCACHE
    jnz         .next_state
    cmp         qword [rbx + tstate.cache], 0
    jne         .next_state
    mov         edi, CACHE_ENTRIES * centry_size
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [rbx + tstate.cache], rax
.next_state:
    inc         r12
    jmp         .states
.states_done:
    test        qword [rsp + en_frame.job + job.flags], EF_NOCACHE
    jnz         .seeded
    cmp         qword [r13 + enc.seed], 0
    jne         .seeded
    mov         rdi, r13
    call        build_seed
    test        rax, rax
    jnz         .ret
.seeded:
    lea         rdi, [enc_worker]
    mov         rsi, rsp                        ; the job (en_frame.job)
    mov         rdx, r15
    call        asmbpe_parallel
    movsxd      rax, eax
    test        rax, rax
    jnz         .ret
    mov         rax, [rsp + en_frame.job + job.status]
    test        rax, rax
    jnz         .ret
    test        qword [rsp + en_frame.job + job.flags], EF_CLAIMS
    jnz         .claims
    ; documents into order: each claim's ids move from out[start(d0) + d0]
    ; (d0: its first document, bit 63 of its count) down to the end of those
    ; before it (never up: a forward copy is safe)
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    mov         r14, rax                        ; (for EF_PROFILE)
    mov         r8, [rsp + en_frame.job + job.out]
    mov         rdi, r8                         ; destination
    mov         r9, [rsp + en_frame.job + job.ends]
    mov         r10, [rsp + en_frame.job + job.counts]
    xor         edx, edx                        ; d
    xor         r11d, r11d                      ; start(d)
    mov         rsi, r8                         ; thread 0's: in place
.move:
    cmp         rdx, [rsp + en_frame.job + job.ndocs]
    jae         .moved
    mov         rcx, [r10 + rdx * 8]
    btr         rcx, 63
    jnc         .same_claim                     ; rsi: after the last document
    mov         [r10 + rdx * 8], rcx
    lea         rsi, [r11 + rdx]                ; a claim's first: its room
    lea         rsi, [r8 + rsi * 2]
.same_claim:
    add         rcx, rcx                        ; bytes
    cmp         rsi, rdi
    je          .in_place
    rep movsb                                   ; (fast strings: ERMSB)
    jmp         .next_doc
.in_place:
    add         rdi, rcx
    add         rsi, rcx
.next_doc:
    mov         r11, [r9 + rdx * 8]
    inc         rdx
    jmp         .move
.moved:
    mov         rbx, rdi
    sub         rbx, r8
    shr         rbx, 1                          ; ids written
    test        qword [rsp + en_frame.job + job.flags], EF_PROFILE
    jz          .result
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    sub         rax, r14
    mov         rcx, [r13 + enc.ts]
    add         [rcx + tstate.cyc_write], rax
.result:
    mov         rax, rbx
    jmp         .ret
.claims:                                        ; EF_CLAIMS: no move; the ids
    mov         r10, [rsp + en_frame.job + job.counts]           ; written, the marks kept
    xor         eax, eax
    xor         edx, edx
    mov         rcx, 0x7FFFFFFFFFFFFFFF
.sum:
    mov         r8, [r10 + rdx * 8]
    and         r8, rcx
    add         rax, r8
    inc         rdx
    cmp         rdx, [rsp + en_frame.job + job.ndocs]
    jb          .sum
    jmp         .ret
.enomem:
    mov         rax, ASMBPE_ENOMEM
.ret:
    STACK_FREE  en_frame_size
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; int64_t asmbpe_encode_docs(asmbpe_enc *e, const uint8_t *const *docs,
;                            const uint64_t *doc_ends, uint64_t n_docs,
;                            uint64_t threads, uint64_t flags,
;                            uint16_t *out, uint64_t *counts,
;                            uint16_t *front)
;
; asmbpe_encode on documents that lie anywhere: document i is docs[i][0,
; doc_ends[i] - doc_ends[i-1]), read exactly (no padding needed).  Each
; thread copies the document it encodes into its own padded buffer (kept
; across calls), so the documents are never packed into one text.
;-----------------------------------------------------------------------------
FUNC asmbpe_encode_docs, 6, 6, 0, e, docs, ends, ndocs, threads, flags
    and         flagsq, EF_PUBLIC
    or          flagsq, EF_DOCPTRS
    jmp         asmbpe_encode_impl
ENDFUNC

;=============================================================================
; enc_worker(job, tid): claim blocks of documents until none is left.  Each
; document is split EW_BUF chunks at a time.  Pass 1 gives each chunk its
; ew_frame.entry: 1 << 63 | id when it is one id (a chunk of up to 15 bytes found
; in the whole-token table: no branch), else the way 0 of its cache set
; (both ways prefetched), or 0 when it is not cached.  It is two loops: 1a
; keeps each short chunk's key (ew_frame.key) and prefetches its whole-token line
; (ew_frame.entry meanwhile: the line's offset, tagged by bit 0), 1b compares once
; the lines are there.  Pass 2 writes the
; ids: one id directly, a cache hit as one 16-byte copy, the rest through
; chunk_miss / chunk_uncached, which count as encoded (asmbpe_enc_stats:
; hits = chunks - encoded).
;=============================================================================
%define EW_BUF      512                         ; chunk ends per split call
struc ew_frame                                  ; enc_worker's stack frame
    .ends:      resq EW_BUF                     ; chunk ends (at rsp: the split's
                                                ; output)
    .entry:     resq EW_BUF                     ; their entries (pass 1)
    .doc:       resq 1                          ; the claim's next document
    .docend:    resq 1                          ; the claim's end
    .len:       resq 1                          ; the document's length
    .pos:       resq 1                          ; the split's start
    .n:         resq 1                          ; chunks of this split
    .o:         resq 1                          ; the document's first id
    .d:         resq 1                          ; the document
    .cache:     resq 1                          ; the cache, or 0
    .prof:      resq 1                          ; EF_PROFILE: keep cycles
    .t0:        resq 1                          ; rdtsc at the start
    .t1:        resq 1                          ; rdtsc at a phase's start
    .t2:        resq 1                          ; rdtsc before a miss
    .first:     resq 1                          ; the claim's first document:
                                                ; 1 (a room), 2 (thread 0's
                                                ; first: job.front); else 0
    .front:     resq 1                          ; thread 0: documents taken
                                                ; (from the front); others -1
    .safe:      resq 1                          ; a 16-byte store of ids at or
                                                ; below this stays in the room
    .seed:      resq 1                          ; the whole-token table
                resq 2                          ; (unused)
    .key:       resb 16 * EW_BUF                ; pass 1: each short chunk's
                                                ; key, 16 bytes
                resq 1                          ; (6 pushes + the frame: aligned)
endstruc
%if ew_frame.ends != 0
    %error "ew_frame: the chunk ends must be at rsp"
%endif

; PROF_START slot / PROF_ADD slot, field: with EF_PROFILE, [rsp + slot] =
; rdtsc, and [rbx + field] += rdtsc - [rsp + slot].  Clobber rax, rdx.
%macro PROF_START 1
    cmp         qword [rsp + ew_frame.prof], 0
    je          %%off
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    mov         [rsp + %1], rax
%%off:
%endmacro
%macro PROF_ADD 2
    cmp         qword [rsp + ew_frame.prof], 0
    je          %%off
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    sub         rax, [rsp + %1]
    add         [rbx + %2], rax
%%off:
%endmacro

enc_worker:
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, ew_frame_size
    mov         r12, rdi
    mov         rax, [r12 + job.enc]
    mov         rbx, [rax + enc.ts + rsi * 8]
    mov         rax, [r12 + job.flags]
    and         eax, EF_PROFILE
    mov         [rsp + ew_frame.prof], rax
    PROF_START  ew_frame.t0
    xor         eax, eax
    test        qword [r12 + job.flags], EF_NOCACHE
    jnz         .no_cache
    mov         rax, [rbx + tstate.cache]
.no_cache:
    mov         [rsp + ew_frame.cache], rax
    mov         rdx, [r12 + job.enc]
    mov         rdx, [rdx + enc.seed]
    mov         [rsp + ew_frame.seed], rdx
    neg         rsi                             ; tid 0 -> 0, others -> < 0
    sar         rsi, 63
    mov         [rsp + ew_frame.front], rsi
    cmp         qword [rbx + tstate.stale], 0   ; a state from the pool: its
    je          .claim                          ; cache cleared here, by its
    PROF_START  ew_frame.t1                     ; own thread (cache phase)
    mov         rdi, [rbx + tstate.cache]
    mov         ecx, CACHE_ENTRIES * centry_size / 8
    xor         eax, eax
    rep stosq
    mov         qword [rbx + tstate.stale], 0
    PROF_ADD    ew_frame.t1, tstate.cyc_pass
.claim:                                         ; k = (left / threads) / 4,
    mov         rax, [r12 + job.ndocs]          ; 1..DOC_BLOCK (left: racy,
    sub         rax, [r12 + job.next]           ; only a size hint)
    jbe         .done
    xor         edx, edx
    div         qword [r12 + job.nth]
    shr         rax, 2
    mov         ecx, DOC_BLOCK
    cmp         rax, rcx
    cmova       rax, rcx
    mov         ecx, 1
    cmp         rax, rcx
    cmovb       rax, rcx
    mov         rcx, rax
    lock xadd   [r12 + job.next], rax           ; documents claimed before
    mov         rdx, [r12 + job.ndocs]
    sub         rdx, rax                        ; left
    jbe         .done
    cmp         rcx, rdx
    cmova       rcx, rdx                        ; this claim: rcx documents
    mov         rax, [rsp + ew_frame.front]
    test        rax, rax
    js          .back
    lea         rdx, [rax + rcx]                ; thread 0: [f, f + rcx), its
    mov         [rsp + ew_frame.front], rdx     ; ids after its last ones (the
    mov         [rsp + ew_frame.doc], rax       ; first from job.front), unmarked
    mov         [rsp + ew_frame.docend], rdx
    neg         rax                             ; ew_frame.first = f ? 0 : 2
    sbb         rax, rax
    add         rax, 1
    add         rax, rax
    mov         [rsp + ew_frame.first], rax
    jmp         .doc
.back:                                          ; the others: [e - rcx, e),
    mov         rax, rcx                        ; e = n - (documents taken
    lock xadd   [r12 + job.back], rax           ; from the back before), in
    mov         rdx, [r12 + job.ndocs]            ; the claim's room, its first
    sub         rdx, rax                        ; count marked
    mov         [rsp + ew_frame.docend], rdx
    sub         rdx, rcx
    mov         [rsp + ew_frame.doc], rdx
    mov         qword [rsp + ew_frame.first], 1
.doc:
    mov         rdx, [rsp + ew_frame.doc]
    cmp         rdx, [rsp + ew_frame.docend]
    jae         .claim
    mov         [rsp + ew_frame.d], rdx
    lea         rax, [rdx + 1]
    mov         [rsp + ew_frame.doc], rax
    mov         rcx, [r12 + job.ends]
    xor         eax, eax
    test        rdx, rdx
    jz          .start
    mov         rax, [rcx + rdx * 8 - 8]
.start:
    mov         rsi, [rcx + rdx * 8]
    sub         rsi, rax
    mov         [rsp + ew_frame.len], rsi
    mov         r13, [r12 + job.buf]
    test        qword [r12 + job.flags], EF_DOCPTRS
    jnz         .doc_copy
    add         r13, rax                        ; the document's text
.have_text:
    cmp         qword [rsp + ew_frame.first], 1
    jb          .same_claim                     ; w: after the last document's
    ja          .front_start                    ; ids, the claim's room, or
    add         rax, rdx                        ; job.front
    mov         r15, [r12 + job.out]
    lea         r15, [r15 + rax * 2]
    jmp         .same_claim
.front_start:
    mov         r15, [r12 + job.front]
.same_claim:
    mov         [rsp + ew_frame.o], r15
    mov         rax, [rsp + ew_frame.len]       ; room: len + 1 ids from w
    lea         rax, [r15 + rax * 2 - 14]
    mov         [rsp + ew_frame.safe], rax
    test        qword [r12 + job.flags], EF_BOS
    jz          .no_bos
    mov         rax, [r12 + job.enc]
    mov         rax, [rax + enc.nmerges]
    add         eax, 256
    mov         [r15], ax
    add         r15, 2
.no_bos:
    mov         qword [rsp + ew_frame.pos], 0
.split:
    PROF_START  ew_frame.t1
    mov         rdi, r13
    mov         rsi, [rsp + ew_frame.len]
    mov         rdx, [rsp + ew_frame.pos]
    mov         rcx, rsp                        ; (ew_frame.ends)
    mov         r8, (1 << 63) | EW_BUF          ; (bit 63: stop short of a
    call        asmbpe_split_offsets            ; window that would not fit)
    mov         [rsp + ew_frame.n], rax
    add         [rbx + tstate.chunks], rax
    PROF_ADD    ew_frame.t1, tstate.cyc_pretok
    PROF_START  ew_frame.t1
    mov         rdi, [rsp + ew_frame.cache]            ; pass 1: each chunk's entry
    test        rdi, rdi
    jz          .pass1_nocache
    mov         rbp, [rsp + ew_frame.pos]       ; chunk start
    mov         r10, [rsp + ew_frame.seed]
    xor         r14d, r14d                      ; k
    cmp         r14, [rsp + ew_frame.n]
    jae         .pass2
.hash:
    mov         rax, [rsp + ew_frame.ends + r14 * 8]
    mov         rdx, rax
    sub         rdx, rbp                        ; len
    lea         rsi, [r13 + rbp]
    mov         rbp, rax
    cmp         rdx, SEED_MAX_LEN
    ja          .hash_long
    lea         r9, [mask_tab + 64]             ; 1..15 bytes, no branch: the
    sub         r9, rdx                         ; key (its masked 16 bytes,
    vmovdqu     xmm0, [rsi]                     ; past the chunk: text or
    vpand       xmm0, xmm0, [r9]                ; padding; its length in byte
    vpinsrb     xmm0, xmm0, edx, 15             ; 15), its hash
    SHORT_HASH  xmm0, r8, rcx
    and         r8d, ~(CACHE_WAYS - 1)          ; the set / the slots' line
    shl         r8, SD_SHIFT
    mov         r11, r14
    shl         r11, 4
    vmovdqu     [rsp + ew_frame.key + r11], xmm0
    prefetcht0  [r10 + r8]
    or          r8, 1                           ; (short: the line, tagged)
    mov         [rsp + ew_frame.entry + r14 * 8], r8
.hash_next:
    inc         r14
    cmp         r14, [rsp + ew_frame.n]
    jb          .hash
    xor         r14d, r14d                      ; pass 1b: the short chunks'
.seed:                                          ; lines, fetched by now
    mov         r8, [rsp + ew_frame.entry + r14 * 8]
    test        r8b, 1
    jz          .seed_next                      ; (longer: done)
    mov         r11, r14
    shl         r11, 4
    vmovdqu     xmm0, [rsp + ew_frame.key + r11]
    lea         rax, [r10 + r8 - 1]
    lea         r8, [rdi + r8 * (centry_size / seedslot_size) - (centry_size / seedslot_size)]
    vpcmpeqb    xmm1, xmm0, [rax + seedslot.key]      ; the set's way 0, unless
    vpcmpeqb    xmm2, xmm0, [rax + seedslot_size + seedslot.key]    ; a slot holds the
    vpmovmskb   ecx, xmm1                       ; chunk
    vpmovmskb   r9d, xmm2
    cmp         ecx, 0xFFFF
    cmove       r8, [rax + seedslot.val]        ; 1 << 63 | its id
    cmp         r9d, 0xFFFF
    cmove       r8, [rax + seedslot_size + seedslot.val]
    mov         [rsp + ew_frame.entry + r14 * 8], r8
    prefetcht0  [r8]                            ; (1 << 63 | id: not canonical,
    prefetcht0  [r8 + centry_size]              ; dropped)
.seed_next:
    inc         r14
    cmp         r14, [rsp + ew_frame.n]
    jb          .seed
    jmp         .pass2
.hash_long:                                     ; 16..48 bytes: HASH_BYTES;
    xor         r8d, r8d                        ; longer: 0 (not cached)
    cmp         rdx, CACHE_MAX_LEN
    ja          .long_entry
    HASH_BYTES  rsi, rdx, r8, r9, rax
    and         r8d, (CACHE_ENTRIES - 1) & ~(CACHE_WAYS - 1)
    shl         r8, CE_SHIFT
    add         r8, rdi
    prefetcht0  [r8]
    prefetcht0  [r8 + centry_size]
.long_entry:
    mov         [rsp + ew_frame.entry + r14 * 8], r8
    jmp         .hash_next
.pass1_nocache:                                 ; no cache: one byte, 1 << 63
    mov         rbp, [rsp + ew_frame.pos]       ; | byte; the rest 0
    xor         r14d, r14d
.nc_chunk:
    cmp         r14, [rsp + ew_frame.n]
    jae         .pass2
    mov         rax, [rsp + ew_frame.ends + r14 * 8]
    mov         rdx, rax
    sub         rdx, rbp
    movzx       ecx, byte [r13 + rbp]
    bts         rcx, 63
    xor         r8d, r8d
    cmp         rdx, 1
    cmove       r8, rcx
    mov         rbp, rax
    mov         [rsp + ew_frame.entry + r14 * 8], r8
    inc         r14
    jmp         .nc_chunk
.pass2:                                         ; pass 2: the ids
    xor         r14d, r14d                      ; k
.chunk:
    cmp         r14, [rsp + ew_frame.n]
    jae         .chunks_done
    mov         r8, [rsp + ew_frame.entry + r14 * 8]
    inc         r14
    test        r8, r8
    jns         .lookup
    mov         [r15], r8w                      ; one id
    add         r15, 2
    jmp         .chunk
.lookup:
    mov         rbp, [rsp + ew_frame.pos]       ; the chunk: from the end of
    cmp         r14, 1                          ; the one before
    je          .chunk_start
    mov         rbp, [rsp + ew_frame.ends + r14 * 8 - 16]
.chunk_start:
    lea         rsi, [r13 + rbp]
    mov         rdx, [rsp + ew_frame.ends + r14 * 8 - 8]
    sub         rdx, rbp                        ; len
    test        r8, r8
    jz          .uncached
    lea         r9, [mask_tab + 64]
    sub         r9, rdx
    ENTRY_EQ    r8, .way1
.hit:
    movzx       eax, byte [r8 + centry.ntok]
    cmp         r15, [rsp + ew_frame.safe]      ; room for a 16-byte store?
    ja          .hit_small
    vmovdqu     xmm0, [r8 + centry.tok]
    vmovdqu     [r15], xmm0
    lea         r15, [r15 + rax * 2]
    jmp         .chunk
.hit_small:
    movzx       ecx, word [r8 + centry.tok]
    mov         [r15], cx
    add         r8, 2
    add         r15, 2
    dec         eax
    jnz         .hit_small
    jmp         .chunk
.way1:                                          ; the set's other entry
    add         r8, centry_size
    ENTRY_EQ    r8, .miss1
    vmovdqu     ymm0, [r8]                      ; found: the two swap, so
    vmovdqu     ymm1, [r8 + 32]                 ; that way 0 holds the last
    vmovdqu     ymm2, [r8 - centry_size]        ; used
    vmovdqu     ymm3, [r8 - centry_size + 32]
    vmovdqu     [r8 - centry_size], ymm0
    vmovdqu     [r8 - centry_size + 32], ymm1
    vmovdqu     [r8], ymm2
    vmovdqu     [r8 + 32], ymm3
    sub         r8, centry_size
    jmp         .hit
.miss1:
    sub         r8, centry_size                 ; (chunk_miss: way 0)
.miss:
    inc         qword [rbx + tstate.encoded]
    cmp         qword [rsp + ew_frame.prof], 0
    jne         .miss_timed
    mov         rdi, r15
    call        chunk_miss
    mov         r15, rdi
    jmp         .chunk
.uncached:
    cmp         qword [rsp + ew_frame.cache], 0        ; cached calls: a run of one
    je          .not_memo                       ; byte may be in the memo
    mov         rdi, r15
    call        run_memo
    test        rax, rax
    jz          .not_memo
    mov         r15, rdi
    jmp         .chunk
.not_memo:
    inc         qword [rbx + tstate.encoded]
    cmp         qword [rsp + ew_frame.prof], 0
    jne         .uncached_timed
    mov         rdi, r15
    call        chunk_uncached
    mov         r15, rdi
    jmp         .chunk
.miss_timed:
    lea         r10, [chunk_miss]
    jmp         .timed
.uncached_timed:
    lea         r10, [chunk_uncached]
.timed:                                         ; EF_PROFILE: time the call
    mov         r9, rdx
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    mov         [rsp + ew_frame.t2], rax
    mov         rdx, r9
    mov         rdi, r15
    call        r10
    mov         r15, rdi
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    sub         rax, [rsp + ew_frame.t2]
    add         [rbx + tstate.cyc_merge], rax
    jmp         .chunk
.chunks_done:
    PROF_ADD    ew_frame.t1, tstate.cyc_pass
    mov         rax, [rsp + ew_frame.n]
    test        rax, rax
    jz          .doc_done
    mov         rax, [rsp + ew_frame.ends + rax * 8 - 8]        ; the last chunk's end: the
    cmp         rax, [rsp + ew_frame.len]              ; next split's start, unless
    jae         .doc_done                       ; the document is done
    mov         [rsp + ew_frame.pos], rax
    jmp         .split
.doc_done:
    mov         rax, r15
    sub         rax, [rsp + ew_frame.o]
    shr         rax, 1
    mov         rcx, [rsp + ew_frame.first]
    mov         qword [rsp + ew_frame.first], 0
    cmp         rcx, 1                          ; a room's first document:
    jne         .count                          ; bit 63 of its count, for the
    bts         rax, 63                         ; move (which clears it)
.count:
    mov         rcx, [r12 + job.counts]
    mov         rdx, [rsp + ew_frame.d]
    mov         [rcx + rdx * 8], rax
    jmp         .doc
.doc_copy:                                      ; asmbpe_encode_docs: the
    mov         r14, rax                        ; document (r13[d], ew_frame.len
    mov         rbp, rdx                        ; bytes) into tstate.doc, padded
    PROF_START  ew_frame.t1                     ; (rax, rdx kept in r14, rbp;
    mov         rsi, [rsp + ew_frame.len]       ; the copy, and growing tstate.doc,
    lea         rax, [rsi + 2 * PAD + 64]       ; count as pre-tokenizing)
    cmp         rax, [rbx + tstate.doccap]
    jbe         .doc_room
    mov         rdi, [rbx + tstate.doc]         ; grow
    mov         rsi, [rbx + tstate.doccap]
    call        asmbpe_unmap
    mov         qword [rbx + tstate.doc], 0
    mov         qword [rbx + tstate.doccap], 0
    mov         rdi, [rsp + ew_frame.len]
    add         rdi, 2 * PAD + 64 + DOC_GRAIN - 1
    and         rdi, -DOC_GRAIN
    mov         [rsp + ew_frame.t2], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .doc_enomem
    mov         [rbx + tstate.doc], rax
    mov         rax, [rsp + ew_frame.t2]
    mov         [rbx + tstate.doccap], rax
    mov         r13, [r12 + job.buf]
.doc_room:
    mov         rsi, [r13 + rbp * 8]
    mov         rdi, [rbx + tstate.doc]
    add         rdi, PAD
    mov         r13, rdi                        ; the text: the copy
    mov         rcx, [rsp + ew_frame.len]
    rep movsb
    PROF_ADD    ew_frame.t1, tstate.cyc_pretok
    mov         rax, r14
    mov         rdx, rbp
    jmp         .have_text
.doc_enomem:
    mov         qword [r12 + job.status], ASMBPE_ENOMEM
.done:
    vzeroupper
    PROF_ADD    ew_frame.t0, tstate.cyc_total
    add         rsp, ew_frame_size
    RESTORE

;=============================================================================
; chunk_miss: rbx = thread state, r12 = job, rsi = the chunk's bytes, rdx =
; its length (2 .. CACHE_MAX_LEN), rdi = where its ids go, r8 = way 0 of
; its cache set.  Encodes it (short path) and, when the ids fit, moves way 0
; to way 1 and fills way 0.
; chunk_uncached: the same without a cache entry, any length >= 2.
; Both return rdi past the ids; keep rbx, rbp, r12-r15; clobber rax, rcx,
; rdx, rsi, r8-r11, ymm0-ymm9.
;=============================================================================
chunk_miss:
    push        rdi
    push        rsi
    push        rdx
    push        r8
    push        r8                              ; (alignment)
    call        short_path                      ; rdi past the ids
    pop         rax
    pop         rax                             ; the entry
    pop         rdx                             ; length
    pop         rsi                             ; bytes
    pop         r8                              ; first id
    mov         rcx, rdi
    sub         rcx, r8
    shr         rcx, 1                          ; ids
    cmp         ecx, CE_MAX_TOK
    ja          .ret
    vmovdqu     ymm0, [rax]                     ; way 0 -> way 1
    vmovdqu     ymm1, [rax + 32]
    vmovdqu     [rax + centry_size], ymm0
    vmovdqu     [rax + centry_size + 32], ymm1
    lea         r9, [mask_tab + 64]             ; key, zero-padded
    sub         r9, rdx
    vmovdqu     ymm2, [r9]
    vmovdqu     xmm3, [r9 + 32]
    vpand       ymm0, ymm2, [rsi]
    vpand       xmm1, xmm3, [rsi + 32]
    vmovdqu     [rax + centry.key], ymm0
    vmovdqu     [rax + centry.key + 32], xmm1
    mov         [rax + centry.len], dl
    mov         [rax + centry.ntok], cl
    add         rax, centry.tok
    COPY_IDS    rax, r8, rcx, rdx, esi, si
.ret:
    ret

chunk_uncached:
    cmp         rdx, SHORT_MAX
    jbe         short_path                      ; tail calls
    jmp         long_path

;=============================================================================
; run_memo: rbx = thread state, r12 = job, rsi = the chunk's bytes, rdx = its
; length (> CACHE_MAX_LEN), rdi = where its ids go.  A chunk that is one
; byte repeated: its ids from the memo (rax = 1, rdi past them), or, not
; there, encoded (chunk_uncached, counted as encoded and, with EF_PROFILE,
; timed as merging) and kept when its ids fit (rax = 1).  Any other chunk:
; rax = 0, nothing written.  Keeps rsi, rdx when rax = 0; keeps rbx, rbp,
; r12-r15; clobbers rax, rcx, r8-r11, ymm0-ymm9.  Reads the chunk rounded up to 32 bytes (text or padding).
;=============================================================================
run_memo:
    movzx       eax, byte [rsi]
    vmovd       xmm0, eax
    vpbroadcastb ymm0, xmm0
    xor         ecx, ecx
.same:                                          ; 32 bytes at a time
    vpcmpeqb    ymm1, ymm0, [rsi + rcx]
    vpmovmskb   r8d, ymm1
    mov         r9, rdx
    sub         r9, rcx                         ; bytes left (> 0)
    cmp         r9, 32
    jae         .whole
    bzhi        r8d, r8d, r9d                   ; (the last, partial)
    mov         r10d, -1
    bzhi        r10d, r10d, r9d
    cmp         r8d, r10d
    jne         .other
    jmp         .run
.whole:
    cmp         r8d, -1
    jne         .other
    add         rcx, 32
    cmp         rcx, rdx
    jb          .same
.run:                                           ; entry (byte * 17 + len)
    imul        r8d, eax, 17                    ; mod MEMO_ENTRIES
    add         r8d, edx
    and         r8d, MEMO_ENTRIES - 1
    shl         r8d, 6
    lea         r8, [r8 + rbx + tstate.memo]
    cmp         [r8 + mement.len], edx
    jne         .encode
    cmp         [r8 + mement.byte], al
    jne         .encode
    movzx       ecx, byte [r8 + mement.ntok]    ; found: its ids
    add         r8, mement.tok
    COPY_IDS    rdi, r8, rcx, r9, r10d, r10w
    lea         rdi, [rdi + rcx * 2]
    mov         eax, 1
    ret
.encode:
    inc         qword [rbx + tstate.encoded]
    push        r8                              ; the entry
    push        rax                             ; the byte
    push        rdx                             ; the length
    push        rdi                             ; the first id
    sub         rsp, 8
    test        qword [r12 + job.flags], EF_PROFILE
    jnz         .encode_timed
    call        chunk_uncached
.encoded:
    add         rsp, 8
    pop         r9                              ; the first id
    pop         rdx
    pop         rax
    pop         r8
    mov         rcx, rdi
    sub         rcx, r9
    shr         rcx, 1                          ; ids
    cmp         rcx, MEMO_MAX_TOK
    ja          .kept                           ; (too many: not kept)
    mov         [r8 + mement.len], edx
    mov         [r8 + mement.byte], al
    mov         [r8 + mement.ntok], cl
    add         r8, mement.tok
    COPY_IDS    r8, r9, rcx, r10, r11d, r11w
.kept:
    mov         eax, 1
    ret
.other:
    xor         eax, eax
    ret
.encode_timed:                                  ; EF_PROFILE: the encoding
    rdtsc                                       ; counts as merging
    shl         rdx, 32
    or          rax, rdx
    mov         [rsp], rax
    mov         rdx, [rsp + 16]                 ; the length
    call        chunk_uncached
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    sub         rax, [rsp]
    add         [rbx + tstate.cyc_merge], rax
    jmp         .encoded

;=============================================================================
; short_path: rbx = thread state, r12 = job, rsi = bytes, rdx = n (2 ..
; SHORT_MAX), rdi = ids out.  Rounds: the lowest rank r among the adjacent
; pairs, then every occurrence of that pair, left to right, becomes id
; 256 + r.  The ids are worked on in place at rdi, the pair ranks in
; tstate.rank.  The rewrite keeps the ranks up to date as it goes: a pair of two
; copied ids keeps its old rank (rank[i - 2] when the copy came from i - 1),
; only pairs with the new id are looked up; the next round's lowest rank
; falls out of the same pass.  Returns rdi past the ids.  Keeps rbx, rbp,
; r12-r15.
;=============================================================================
short_path:
    push        rbp
    push        r13
    push        r14
    push        r15
    mov         rax, [r12 + job.enc]
    LOAD_TABLE  rax
    cmp         edx, SHORT16_MAX
    jbe         short16
    xor         eax, eax                        ; bytes -> ids
.widen:
    movzx       ecx, byte [rsi + rax]
    mov         [rdi + rax * 2], cx
    inc         eax
    cmp         eax, edx
    jb          .widen
    mov         r13d, edx                       ; m: ids now
    mov         ebp, NO_RANK                    ; the lowest rank
    xor         edx, edx
.rank:                                          ; rank[j] of (id[j], id[j+1])
    lea         eax, [edx + 1]
    cmp         eax, r13d
    jae         .round
    movzx       ecx, word [rdi + rdx * 2]
    movzx       r15d, word [rdi + rdx * 2 + 2]
    RANK        r15d, r15, ecx, r15d
    mov         [rbx + tstate.rank + rdx * 4], r15d
    cmp         r15d, ebp
    cmovb       ebp, r15d
    inc         edx
    jmp         .rank
.round:
    cmp         ebp, NO_RANK
    je          .done
    mov         esi, ebp                        ; r: this round's merge
    mov         ebp, NO_RANK                    ; the next round's
    xor         eax, eax                        ; i: read
    xor         edx, edx                        ; j: write
    xor         r14d, r14d                      ; id[j-1] is new
.apply:
    cmp         eax, r13d
    jae         .applied
    lea         ecx, [eax + 1]
    cmp         ecx, r13d
    jae         .copy
    cmp         [rbx + tstate.rank + rax * 4], esi
    jne         .copy
    lea         ecx, [esi + 256]                ; (id[i], id[i+1]) -> 256 + r
    mov         [rdi + rdx * 2], cx
    add         eax, 2
    mov         r15d, 1                         ; id[j] is new
    jmp         .written
.copy:
    movzx       ecx, word [rdi + rax * 2]
    mov         [rdi + rdx * 2], cx
    inc         eax
    xor         r15d, r15d
.written:
    test        edx, edx
    jz          .next_id
    mov         ecx, r14d
    mov         r14d, r15d
    or          ecx, r15d
    jnz         .lookup
    mov         ecx, [rbx + tstate.rank + rax * 4 - 8]      ; both copied: rank[i-2]
    jmp         .set
.lookup:
    movzx       ecx, word [rdi + rdx * 2 - 2]
    movzx       r15d, word [rdi + rdx * 2]
    RANK        r15d, r15, ecx, r15d
    mov         ecx, r15d
.set:
    mov         [rbx + tstate.rank + rdx * 4 - 4], ecx
    cmp         ecx, ebp
    cmovb       ebp, ecx
    inc         edx
    jmp         .apply
.next_id:
    mov         r14d, r15d
    inc         edx
    jmp         .apply
.applied:
    mov         r13d, edx
    jmp         .round
.done:
    lea         rdi, [rdi + r13 * 2]
    pop         r15
    pop         r14
    pop         r13
    pop         rbp
    ret

;=============================================================================
; short16: short_path for 2 .. SHORT16_MAX bytes (most cache misses), entered
; from it with rbp, r13-r15 pushed, rax = the encoder and the merge table
; loaded (r8-r10).  The first ranks come from the byte-pair table (enc.bp).  One
; merge per step instead of rounds over the whole chunk: the pair ranks (u16,
; 0xFFFF: none) sit in ymm4, one lane per position; vphminposuw on each half
; gives the lowest rank and its leftmost lane i.  The pair at i joins the
; id at i with the next live one k: id[i] = 256 + r, k dies (its lane
; 0xFFFF), and only the lanes of the previous live position p and of i get
; new ranks (two lookups).  Taking the leftmost lowest rank each step is the
; rounds of the short path: every pair made by merge r involves the new id,
; so its rank is above r, and an overlapping pair at k dies with k.
; The lookups are RANKV (no data-dependent branch), and a merge whose next
; one is known early lets that one start at once (STEPS): the lookups of
; the two overlap.  Ids live in the thread state (tstate.rank, as u16 scratch),
; the live positions in a bit mask (r15d).  Writes the live ids at rdi;
; returns rdi past them.  Keeps rbx, r12 (pushed: the steps use them).
; Clobbers rax, rcx, rdx, rsi, r8-r11, ymm0-ymm9.
;=============================================================================
struc s16                                       ; short16's scratch, in tstate.rank
    .ids:       resw 16                         ; u16 ids, one per position
                resw 16                         ; (spare)
endstruc

; SET_LANE value32, lane32, width: u16 lane `lane` of ymm4 (width 16) or
; xmm4 (width 8) := value (ymm5 = lane_w).  Clobbers ymm6, ymm7.
%macro SET_LANE 3
    vmovd       xmm6, %1
    vmovd       xmm7, %2
  %if %3 == 16
    vpbroadcastw ymm6, xmm6
    vpbroadcastw ymm7, xmm7
    vpcmpeqw    ymm7, ymm7, ymm5
    vpblendvb   ymm4, ymm4, ymm6, ymm7
  %else
    vpbroadcastw xmm6, xmm6
    vpbroadcastw xmm7, xmm7
    vpcmpeqw    xmm7, xmm7, xmm5
    vpblendvb   xmm4, xmm4, xmm6, xmm7
  %endif
%endmacro

; MINPOS width, n, min32, lane32, t32: min = the lowest u16 lane of ymm<n>
; (width 16) or of xmm<n> (width 8), lane = the leftmost lane holding it
; (0xFFFF: every lane is "none").  Clobbers xmm1-xmm3, t.
%macro MINPOS 5
  %if %1 == 16
    vextracti128 xmm1, ymm%2, 1
    vphminposuw xmm2, xmm%2                     ; (min, lane) of lanes 0-7
    vphminposuw xmm3, xmm1                      ; and of lanes 8-15
    vmovd       %4, xmm2
    vmovd       %5, xmm3
    rorx        %4, %4, 16                      ; min << 16 | lane: the
    rorx        %5, %5, 16                      ; lower key is the lower
    add         %5, 8                           ; min, then the leftmost
    cmp         %5, %4                          ; lane (ties: the lower
    cmovb       %4, %5                          ; half)
    mov         %3, %4
    shr         %3, 16
    and         %4, 0xFF
  %else
    vphminposuw xmm2, xmm%2                     ; (min, lane) of lanes 0-7
    vmovd       %4, xmm2
    mov         %3, %4
    and         %3, 0xFFFF                      ; min
    shr         %4, 16                          ; its lane
  %endif
%endmacro

; STEPS width: short16's steps, on the ranks of ymm4 (width 16) or, for
; chunks of up to 9 bytes (8 pairs), of xmm4 alone (8: one vphminposuw, and
; xmm lane updates, a shorter chain per step).  Leaves to .out.
;
; Each merge also finds the next one early, when it can: the lowest rank r2
; (leftmost lane j) among the lanes the merge leaves alone (all but p, i and
; k).  When both new pairs of the merge rank above r2, (r2, j) is the next
; step's lowest rank (every other lane holds r2 or more, and the lanes with
; r2 are unchanged, so j is still the leftmost), and the next merge starts at
; once: its lookups do not wait for this merge's.  Otherwise the next step
; takes the lowest rank over all lanes again.  (A simulation on the misses of
; E100: 59 % of the merges need a full search.)

; BP_LANES xmm, first, count: lanes 0 .. count-1 of xmm = the byte-pair
; ranks of pairs first .. first+count-1 of the chunk at rsi (rbp = enc.bp),
; inserted from the table (no store, so no wide reload of narrow stores;
; no loop, so no mispredicted exit).  Reads rsi[first .. first+count].
; Clobbers eax.  (movzx + rol rather than movbe, which the CPU check does
; not require.)
%macro BP_LANES 3
%assign j 0
%rep %3
    movzx       eax, word [rsi + %2 + j]        ; byte j + 1 << 8 | byte j,
    rol         ax, 8                           ; swapped: the table's index
    vpinsrw     %1, %1, [rbp + rax * 2], j
%assign j j + 1
%endrep
%endmacro

%macro STEPS 1
  %if %1 == 16
    %define V(r) ymm %+ r
  %else
    %define V(r) xmm %+ r
  %endif
%%step:
    MINPOS      %1, 4, edx, eax, ecx
    cmp         edx, 0xFFFF
    je          .out
%%merge:                                        ; merge rank edx at lane eax
    mov         ebp, eax                        ; i
    add         edx, 256                        ; the new id t
    mov         [r13 + s16.ids + rbp * 2], dx
    mov         r14d, edx
    bzhi        edx, r15d, ebp                  ; p: the last live before i
    lzcnt       edx, edx                        ; (k > i does not change
    xor         edx, 31                         ; those bits; 63: none)
    lea         ecx, [ebp + 1]                  ; the live after i: k, the
    shrx        esi, r15d, ecx                  ; first, and q, the next
    tzcnt       eax, esi
    blsr        esi, esi
    add         eax, ecx                        ; k
    xor         r11d, r11d                      ; the lanes left alone: all
    bts         r11d, ebp                       ; but p, i, k (p = 63: bit
    bts         r11d, eax                       ; 31, no lane)
    bts         r11d, edx
    vmovd       xmm0, r11d
    vpbroadcastw V(0), xmm0
    vpand       V(0), V(0), V(8)                ; (ymm8 = bit_w)
    vpcmpeqw    V(0), V(0), V(8)
    vpor        V(0), V(0), V(4)
    MINPOS      %1, 0, r12d, ebx, r11d          ; r2, j
    btr         r15d, eax                       ; k dies
    vmovd       xmm6, eax                       ; lane k := 0xFFFF
    vpbroadcastw V(6), xmm6
    vpcmpeqw    V(6), V(6), V(5)
    vpor        V(4), V(4), V(6)
    mov         eax, NO_RANK
    test        esi, esi
    jz          %%set_i
    tzcnt       esi, esi
    add         esi, ecx                        ; q
    movzx       esi, word [r13 + s16.ids + rsi * 2]
    RANKV       eax, rax, r14d, esi             ; (t, id[q])
%%set_i:
    SET_LANE    eax, ebp, %1                    ; lane i := rank
    mov         edi, eax                        ; the lowest new rank
    cmp         edx, 63
    je          %%next
    movzx       esi, word [r13 + s16.ids + rdx * 2]
    RANKV       eax, rax, esi, r14d             ; (id[p], t)
    SET_LANE    eax, edx, %1                    ; lane p := rank
    cmp         eax, edi
    cmovb       edi, eax
%%next:
    cmp         r12d, 0xFFFF                    ; no lane left alone has a
    je          %%step                          ; merge
    cmp         edi, r12d                       ; a new pair ranks at or
    jbe         %%step                          ; below r2
    mov         eax, ebx
    mov         edx, r12d
    jmp         %%merge
  %undef V
%endmacro


short16:
    push        rbx
    push        r12
    push        rdi
    mov         rbp, [rax + enc.bp]             ; (rax: the encoder)
    lea         r13, [rbx + tstate.rank]
    vpmovzxbw   ymm0, [rsi]                     ; 16 bytes (padding past the
    vmovdqu     [r13 + s16.ids], ymm0           ; chunk: their lanes die)
    mov         r14d, edx                       ; n
    vmovdqu     ymm5, [lane_w]
    vmovdqu     ymm8, [bit_w]
    vpcmpeqd    ymm9, ymm9, ymm9
    mov         r15d, 1
    shlx        r15d, r15d, r14d
    dec         r15d                            ; live positions 0 .. n-1
    lea         eax, [r14 - 2]                  ; lanes from n - 1 on: no
    vmovd       xmm1, eax                       ; pair (all ones)
    vpbroadcastw ymm1, xmm1
    vpcmpgtw    ymm1, ymm5, ymm1
    BP_LANES    xmm4, 0, 8                      ; ranks of pairs 0 .. 7
    cmp         r14d, 9
    ja          .init16
    vpor        xmm4, xmm4, xmm1
    STEPS       8
.init16:
    BP_LANES    xmm6, 8, 7                      ; pairs 8 .. 14
    vinserti128 ymm4, ymm4, xmm6, 1
    vpor        ymm4, ymm4, ymm1
    STEPS       16
.out:                                           ; the live ids, in order
    pop         rdi
.out_id:
    tzcnt       ecx, r15d
    movzx       eax, word [r13 + s16.ids + rcx * 2]
    mov         [rdi], ax
    add         rdi, 2
    blsr        r15d, r15d
    jnz         .out_id
    pop         r12
    pop         rbx
    pop         r15
    pop         r14
    pop         r13
    pop         rbp
    ret

;=============================================================================
; long_path: rbx = thread state, r12 = job, rsi = bytes, rdx = n (>
; SHORT_MAX), rdi = ids out.  The ids live at rdi by position; next[] and
; prev[] link the live ones; a min-heap holds (rank << 32 | position) of
; candidate pairs, stale entries dropped when popped (the pair at that
; position no longer has that rank).  Same-rank pairs pop left to right,
; and a merge only makes pairs of higher rank, so this is the rounds of the
; short path, in O(n log n).  Returns rdi past the ids.  Keeps rbx, rbp,
; r12-r15.  On ENOMEM: sets the job's status, returns rdi unchanged.
;=============================================================================
struc lp_frame                                  ; long_path's stack frame
    .w:         resq 1                          ; ids out
    .p:         resq 1                          ; the chunk's bytes
    .n:         resq 1                          ; its length
endstruc                                        ; (5 pushes + ret + 24: aligned)

%define DEAD        0xFFFF

long_path:
    SAVE        rbp, r12, r13, r14, r15
    sub         rsp, lp_frame_size
    mov         [rsp + lp_frame.w], rdi
    mov         [rsp + lp_frame.p], rsi
    mov         [rsp + lp_frame.n], rdx
    inc         qword [rbx + tstate.longs]
    cmp         rdx, [rbx + tstate.longcap]
    jbe         .have_room
    mov         rdi, [rbx + tstate.long]        ; grow the arrays
    mov         rsi, [rbx + tstate.longcap]
    shl         rsi, 5
    call        asmbpe_unmap
    mov         qword [rbx + tstate.long], 0
    mov         qword [rbx + tstate.longcap], 0
    mov         rdi, [rsp + lp_frame.n]
    add         rdi, 65535
    and         rdi, ~65535
    mov         r13, rdi
    shl         rdi, 5
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [rbx + tstate.long], rax
    mov         [rbx + tstate.longcap], r13
.have_room:
    mov         rax, [r12 + job.enc]
    LOAD_TABLE  rax
    mov         r12, [rsp + lp_frame.w]         ; ids (r12 is saved)
    mov         r13, [rbx + tstate.long]        ; next[]
    mov         r14, [rbx + tstate.longcap]
    lea         r14, [r13 + r14 * 4]            ; prev[]
    mov         r15, [rbx + tstate.longcap]
    lea         r15, [r13 + r15 * 8]            ; heap[]
    xor         ebp, ebp                        ; heap size
    mov         rsi, [rsp + lp_frame.p]
    mov         rdx, [rsp + lp_frame.n]
    xor         eax, eax
.init:
    movzx       ecx, byte [rsi + rax]
    mov         [r12 + rax * 2], cx
    lea         ecx, [eax + 1]
    mov         [r13 + rax * 4], ecx
    lea         ecx, [eax - 1]
    mov         [r14 + rax * 4], ecx
    inc         rax
    cmp         rax, rdx
    jb          .init
    xor         edi, edi                        ; the first pairs
.init_pairs:
    lea         eax, [edi + 1]
    cmp         rax, [rsp + lp_frame.n]
    jae         .loop
    movzx       eax, word [r12 + rdi * 2]
    movzx       edx, word [r12 + rdi * 2 + 2]
    RANK        eax, rax, eax, edx
    cmp         eax, NO_RANK
    je          .init_next
    shl         rax, 32
    or          rax, rdi
    call        heap_push
.init_next:
    inc         edi
    jmp         .init_pairs
.loop:
    test        ebp, ebp
    jz          .finish
    call        heap_pop                        ; rax = rank << 32 | i
    mov         edi, eax                        ; i
    shr         rax, 32
    mov         esi, eax                        ; rank
    movzx       eax, word [r12 + rdi * 2]
    cmp         eax, DEAD
    je          .loop
    mov         ecx, [r13 + rdi * 4]            ; j = next[i]
    cmp         rcx, [rsp + lp_frame.n]
    jae         .loop
    movzx       edx, word [r12 + rcx * 2]
    push        rcx
    RANK        eax, rax, eax, edx
    pop         rcx
    cmp         eax, esi
    jne         .loop                           ; stale
    add         esi, 256                        ; merge: id[i] = t
    mov         [r12 + rdi * 2], si
    mov         word [r12 + rcx * 2], DEAD
    mov         edx, [r13 + rcx * 4]            ; k = next[j]
    mov         [r13 + rdi * 4], edx
    cmp         rdx, [rsp + lp_frame.n]
    jae         .no_k
    mov         [r14 + rdx * 4], edi            ; prev[k] = i
    push        rdx                             ; (t, id[k]) at i
    push        rdi
    movzx       eax, word [r12 + rdx * 2]
    RANK        eax, rax, esi, eax
    pop         rdi
    pop         rdx
    cmp         eax, NO_RANK
    je          .no_k
    shl         rax, 32
    or          rax, rdi
    push        rdi
    push        rsi
    call        heap_push
    pop         rsi
    pop         rdi
.no_k:
    mov         edx, [r14 + rdi * 4]            ; h = prev[i]
    cmp         edx, -1
    je          .loop
    movzx       eax, word [r12 + rdx * 2]       ; (id[h], t) at h
    push        rdx
    RANK        eax, rax, eax, esi
    pop         rdx
    cmp         eax, NO_RANK
    je          .loop
    shl         rax, 32
    or          rax, rdx
    call        heap_push
    jmp         .loop
.finish:                                        ; the live ids, in order
    xor         eax, eax                        ; read (position)
    xor         edx, edx                        ; write
.gather:
    movzx       ecx, word [r12 + rax * 2]
    mov         [r12 + rdx * 2], cx
    inc         edx
    mov         eax, [r13 + rax * 4]
    cmp         rax, [rsp + lp_frame.n]
    jb          .gather
    lea         rdi, [r12 + rdx * 2]
    jmp         .ret
.enomem:
    mov         r12, [rsp + lp_frame_size + 8 * 3]   ; the saved job (r12)
    mov         qword [r12 + job.status], ASMBPE_ENOMEM
    mov         rdi, [rsp + lp_frame.w]
.ret:
    add         rsp, lp_frame_size
    RESTORE

; heap_push: rax = key; r15 = heap, rbp = size (grows by one).  A min-heap.
; Clobbers rcx, rdx, r11.
heap_push:
    mov         ecx, ebp                        ; hole
    inc         ebp
.up:
    test        ecx, ecx
    jz          .place
    lea         edx, [ecx - 1]
    shr         edx, 1                          ; parent
    mov         r11, [r15 + rdx * 8]
    cmp         r11, rax
    jbe         .place
    mov         [r15 + rcx * 8], r11
    mov         ecx, edx
    jmp         .up
.place:
    mov         [r15 + rcx * 8], rax
    ret

; heap_pop: r15 = heap, rbp = size (> 0, shrinks by one).  rax = the least
; key.  Clobbers rcx, rdx, r8?  No: rcx, rdx, r11 and the stack slot below.
heap_pop:
    push        r8
    push        r9
    mov         rax, [r15]
    dec         ebp
    mov         r8, [r15 + rbp * 8]             ; the last key sinks from the top
    xor         ecx, ecx                        ; hole
.down:
    lea         edx, [ecx * 2 + 1]              ; left child
    cmp         edx, ebp
    jae         .place
    mov         r11, [r15 + rdx * 8]
    lea         r9d, [edx + 1]
    cmp         r9d, ebp
    jae         .one_child
    cmp         [r15 + r9 * 8], r11
    jae         .one_child
    mov         edx, r9d
    mov         r11, [r15 + rdx * 8]
.one_child:
    cmp         r8, r11
    jbe         .place
    mov         [r15 + rcx * 8], r11
    mov         ecx, edx
    jmp         .down
.place:
    mov         [r15 + rcx * 8], r8
    pop         r9
    pop         r8
    ret
