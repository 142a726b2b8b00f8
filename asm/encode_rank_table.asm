;-----------------------------------------------------------------------------
; encode_rank_table.asm — the rank encoder's tables: asmbpe_renc_new / _free,
; rk_state (a thread index's state, made on first use), asmbpe_renc_decode
; (the rank encoder: its layouts and macros in encode_rank.inc)
;-----------------------------------------------------------------------------
%include "encode_rank.inc"

extern mask_tab
extern rk_ct_seed
extern rk_reach_build

section .text

;-----------------------------------------------------------------------------
; asmbpe_renc *asmbpe_renc_new(const uint32_t *pairs, uint64_t n_pairs,
;                              const uint32_t *byte_ids,
;                              const uint8_t *tok_bytes,
;                              const uint64_t *tok_offsets, uint64_t n_tokens,
;                              uint64_t flags)
; pairs: n_pairs rows {left, right, priority, result} (no pair twice, ids
; and priorities < n_tokens <= RK_MAX_TOK, one result per priority: the
; slots keep the priority, renc.res the result); byte_ids[256]; token i is
; tok_bytes[tok_offsets[i], tok_offsets[i + 1]).  flags: RF_WHOLE, RF_RANKS
; (which implies RF_WHOLE: the caller promises that the pairs are every
; split of a token into two, priority = result = the token's id).  NULL
; when out of memory or an argument is out of range.
;-----------------------------------------------------------------------------
%define nw_pairs    rbx
%define nw_n        rbp
%define nw_enc      r14
%define nw_i        r15
%define nw_t        r12
%define nw_t2       r13
FUNC asmbpe_renc_new, 7, 15, 1, pairs, npairs, byteids, tokbytes, tokoff, ntok, flags
    mov         nw_t2, flagsm
    push        tokoffq
    push        tokbytesq
    push        ntokq
    push        byteidsq
    mov         nw_pairs, pairsq
    mov         nw_n, npairsq
    xor         eax, eax
    mov         rcx, ntokq
    dec         rcx
    cmp         rcx, RK_MAX_TOK                 ; 1 <= n_tokens <= RK_MAX_TOK
    jae         .bad
    mov         edi, (renc_size + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .bad
    mov         nw_enc, rax
    mov         rax, [rsp]                      ; byte ids
    lea         rdi, [nw_enc + renc.byteid]
    mov         rsi, rax
    mov         ecx, 256
    rep movsd
    mov         rax, [rsp + 8]
    mov         [nw_enc + renc.ntok], rax
    mov         rax, nw_t2
    and         eax, RF_WHOLE | RF_RANKS | RF_NOGROW | RF_SPLIT
    test        eax, RF_RANKS                   ; (ranks imply whole tokens)
    jz          .flags
    or          eax, RF_WHOLE
.flags:
    mov         [nw_enc + renc.flags], rax

    ; the pair slots: a power of two >= 2 n, at least 1024
    lea         rax, [nw_n * 2]
    POW2_AT_LEAST 10
    mov         eax, 64
    sub         eax, ecx
    mov         [nw_enc + renc.shift], rax
    shl         rdx, 3
    lea         rax, [rdx - 1]
    mov         [nw_enc + renc.smask], rax
    mov         [nw_enc + renc.sbytes], rdx
    mov         rdi, rdx
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.slots], rax
    mov         rdi, rax
    mov         rcx, [nw_enc + renc.sbytes]
    shr         rcx, 3
    mov         rax, -1
    rep stosq                                   ; every key ~0 (and the rest)
    mov         rdi, [nw_enc + renc.ntok]       ; the result of each priority
    lea         rdi, [rdi * 4 + 4095]
    and         rdi, ~4095
    mov         [nw_enc + renc.rbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.res], rax
    mov         r8, [nw_enc + renc.slots]
    mov         r9, [nw_enc + renc.smask]
    mov         r10, [nw_enc + renc.shift]
    xor         nw_i, nw_i
.insert:
    cmp         nw_i, nw_n
    jae         .inserted
    PKEY        [nw_pairs], [nw_pairs + 4]      ; left << 20 | right
    mov         eax, [nw_pairs + 8]             ; priority (< n_tokens)
    mov         edx, [nw_pairs + 12]            ; result
    mov         r11, [nw_enc + renc.res]
    mov         [r11 + rax * 4], edx
    shl         rax, 40
    or          rax, rcx                        ; the slot
    mov         r11, RK_GOLD
    imul        r11, rcx
    shrx        r11, r11, r10
    shl         r11, 3
.probe:
    cmp         qword [r8 + r11], -1
    je          .free
    add         r11, 8
    and         r11, r9
    jmp         .probe
.free:
    mov         [r8 + r11], rax
    add         nw_pairs, 16
    inc         nw_i
    jmp         .insert
.inserted:
    ; the byte pairs: the table's answer for every two bytes, by b0 | b1 << 8
    mov         edi, BP_BYTES
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.bp], rax
    mov         r8, [nw_enc + renc.slots]
    mov         r9, [nw_enc + renc.smask]
    mov         r10, [nw_enc + renc.shift]
    xor         nw_i, nw_i
.bpair:
    movzx       eax, r15b                       ; b0 (nw_i's low byte)
    mov         ecx, [nw_enc + renc.byteid + rax * 4]
    shl         rcx, 20
    mov         eax, r15d
    shr         eax, 8                          ; b1
    mov         eax, [nw_enc + renc.byteid + rax * 4]
    or          rcx, rax
    RPROBE      nw_enc
    mov         r11, [nw_enc + renc.bp]
    mov         [r11 + nw_i * 8], eax
    mov         [r11 + nw_i * 8 + 4], edx
    inc         nw_i
    cmp         nw_i, 65536
    jb          .bpair

    ; the token bytes and offsets: one mapping, offsets first, PAD around
    ; the bytes
    mov         rcx, [nw_enc + renc.ntok]
    mov         rax, [rsp + 24]                 ; tok_offsets
    mov         nw_t, [rax + rcx * 8]           ; bytes in all
    lea         rdi, [rcx * 8 + 8 + 2 * PAD]
    add         rdi, nw_t
    add         rdi, 4095
    and         rdi, ~4095
    mov         [nw_enc + renc.tbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.tokoff], rax
    mov         rdi, rax
    mov         rsi, [rsp + 24]
    mov         rcx, [nw_enc + renc.ntok]
    inc         rcx
    rep movsq
    add         rdi, PAD
    mov         [nw_enc + renc.tokbytes], rdi
    mov         rsi, [rsp + 16]                 ; tok_bytes
    mov         rcx, nw_t
    rep movsb

    ; the chunk table's seed: every byte, and with RF_WHOLE every token of
    ; 2..CT_MAX_LEN bytes; a power of two >= 4 (256 + tokens) entries, at
    ; least 2^CT_MIN_BITS
    mov         rax, [nw_enc + renc.ntok]
    add         rax, 256
    shl         rax, 2
    POW2_AT_LEAST CT_MIN_BITS
    lea         rax, [rdx - 1]
    mov         [nw_enc + renc.ctmask], rax
    mov         rax, rdx
    shr         rax, 3
    lea         rax, [rax + rax * 4]            ; 5/8 of the entries
    mov         [nw_enc + renc.ctcap], rax
    shl         rdx, CT_SHIFT
    mov         [nw_enc + renc.ctbytes], rdx
    mov         rdi, [nw_enc + renc.ntok]       ; the seed: a list of entries
    add         rdi, 256                        ; (at most every byte and
    shl         rdi, CT_SHIFT                   ; token)
    add         rdi, 4095
    and         rdi, ~4095
    mov         [nw_enc + renc.sdbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.seed], rax
    test        qword [nw_enc + renc.flags], RF_RANKS
    jz          .no_bloom
    mov         edi, 1 << (BLOOM_BITS - 3)
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.bloom], rax
.no_bloom:
    xor         nw_i, nw_i
.cbyte:
    vpxor       xmm0, xmm0, xmm0
    vpinsrb     xmm0, xmm0, r15d, 0             ; (nw_i)
    mov         eax, 1
    vpinsrb     xmm0, xmm0, eax, ctent.len
    mov         eax, [nw_enc + renc.byteid + nw_i * 4]
    call        ct_seed_put
    inc         nw_i
    cmp         nw_i, 256
    jb          .cbyte
    test        qword [nw_enc + renc.flags], RF_WHOLE
    jz          .done
    xor         nw_i, nw_i
.ctok:
    cmp         nw_i, [nw_enc + renc.ntok]
    jae         .ctoks
    mov         rax, [nw_enc + renc.tokoff]
    mov         rsi, [rax + nw_i * 8]
    mov         rdx, [rax + nw_i * 8 + 8]
    sub         rdx, rsi                        ; its length
    cmp         rdx, 2
    jb          .ctnext
    cmp         rdx, CT_MAX_LEN
    ja          .ctnext
    add         rsi, [nw_enc + renc.tokbytes]   ; (PAD after the bytes)
    CT_KEY      rsi, rdx, edx
    mov         eax, r15d                       ; (nw_i)
    call        ct_seed_put
.ctnext:
    inc         nw_i
    jmp         .ctok
.ctoks:

    ; the whole-token slots (RF_WHOLE): tokens over CT_MAX_LEN bytes by crc32c
    ; (the shorter ones are in the seed)
    mov         rax, [nw_enc + renc.ntok]
    add         rax, rax
    POW2_AT_LEAST 10
    lea         rax, [rdx - 1]
    mov         [nw_enc + renc.wmask], rax
    lea         rdi, [rdx * 8]
    mov         [nw_enc + renc.wbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.wslots], rax
    mov         rdi, rax
    mov         rcx, [nw_enc + renc.wbytes]
    shr         rcx, 3
    mov         rax, -1
    rep stosq
    xor         nw_i, nw_i
.winsert:
    cmp         nw_i, [nw_enc + renc.ntok]
    jae         .winserted
    mov         rax, [nw_enc + renc.tokoff]
    mov         rsi, [rax + nw_i * 8]
    mov         nw_t2, [rax + nw_i * 8 + 8]
    sub         nw_t2, rsi                      ; its length
    cmp         nw_t2, CT_MAX_LEN               ; (shorter ones: the seed)
    jbe         .wnext
    add         rsi, [nw_enc + renc.tokbytes]
    CRC_BYTES   rsi, nw_t2, rax
    mov         rdx, [nw_enc + renc.wslots]
    mov         r9, [nw_enc + renc.wmask]
    mov         ecx, eax
    and         rcx, r9
.wprobe:
    cmp         dword [rdx + rcx * 8], NO_PRIO
    je          .wfree
    inc         rcx
    and         rcx, r9
    jmp         .wprobe
.wfree:
    mov         [rdx + rcx * 8], r15d           ; (nw_i)
    mov         [rdx + rcx * 8 + 4], eax
.wnext:
    inc         nw_i
    jmp         .winsert
.winserted:
.done:
    test        qword [nw_enc + renc.flags], RF_SPLIT
    jz          .built
    call        rk_reach_build                  ; (r14 = nw_enc)
    test        eax, eax
    jnz         .fail
.built:
    mov         rax, nw_enc
    add         rsp, 32
    RET
.fail:
    mov         rdi, nw_enc
    call        asmbpe_renc_free_impl
.bad:
    xor         eax, eax
    add         rsp, 32
    RET
ENDFUNC

; ct_seed_put (asmbpe_renc_new): r14 = the encoder, xmm0 = a key, eax =
; its id: an entry of one id appended to the seed (with RF_RANKS and 3+
; bytes, its filter bit set).  Clobbers rax, rcx, rdx, r8-r11.
ct_seed_put:
    or          eax, 1 << CT_NSHIFT
    mov         r10d, eax
    cmp         qword [r14 + renc.bloom], 0     ; its filter bit
    je          .put
    vpextrb     eax, xmm0, ctent.len
    cmp         eax, 3
    jb          .put
    sub         rsp, 16
    vmovdqu     [rsp], xmm0                     ; its bytes, hashed
    xor         ecx, ecx                        ; (ROLL_K)
    xor         edx, edx
    mov         r11d, ROLL_K
.roll:
    movzx       r9d, byte [rsp + rdx]
    lea         ecx, [rcx + r9 + 1]
    imul        ecx, r11d
    inc         edx
    cmp         edx, eax
    jb          .roll
    add         rsp, 16
    shr         ecx, 32 - BLOOM_BITS
    mov         r11, [r14 + renc.bloom]
    bts         [r11], rcx
.put:
    mov         rax, [r14 + renc.seedn]
    shl         rax, CT_SHIFT
    add         rax, [r14 + renc.seed]
    vmovdqu     [rax + ctent.key], xmm0
    mov         [rax + ctent.ids], r10d
    inc         qword [r14 + renc.seedn]
    ret


;-----------------------------------------------------------------------------
; void asmbpe_renc_free(asmbpe_renc *e): everything it mapped (NULL: nothing).
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_free, 1, 10, 0, e
    call        asmbpe_renc_free_impl
    RET
ENDFUNC

; asmbpe_renc_free_impl: rdi = the encoder or 0: its tables, its thread
; states (cache, scratch) and itself unmapped.  Keeps rbx, rbp, r12-r15;
; clobbers the other registers.
asmbpe_renc_free_impl:
    test        rdi, rdi
    jz          .ret
    push        rbx
    push        r12
    push        r13
    mov         rbx, rdi
    xor         r12d, r12d
.states:
    mov         r13, [rbx + renc.ts + r12 * 8]
    test        r13, r13
    jz          .next_state
    mov         rdi, [r13 + rts.cache]
    mov         esi, RC_ENTRIES * rcent_size + 4096
    call        .unmap
    mov         rdi, [r13 + rts.scratch]
    mov         rsi, [r13 + rts.scrbytes]
    call        .unmap
    mov         rdi, [r13 + rts.ct]
    mov         rsi, [r13 + rts.ctbytes]
    call        .unmap
    mov         rdi, [r13 + rts.arena]
    mov         rsi, [r13 + rts.acap]
    shl         rsi, 2
    call        .unmap
    mov         rdi, [r13 + rts.lt]
    mov         rsi, [r13 + rts.ltmask]
    inc         rsi
    shl         rsi, 4
    call        .unmap
    mov         rdi, [r13 + rts.ltarena]
    mov         rsi, [r13 + rts.ltacap]
    call        .unmap
    mov         rdi, [r13 + rts.dbuf]
    mov         rsi, [r13 + rts.dbcap]
    call        .unmap
    mov         rdi, r13
    mov         esi, (rts_size + 4095) & ~4095
    call        .unmap
.next_state:
    inc         r12
    cmp         r12, MAX_THREADS
    jb          .states
    mov         rdi, [rbx + renc.slots]
    mov         rsi, [rbx + renc.sbytes]
    call        .unmap
    mov         rdi, [rbx + renc.wslots]
    mov         rsi, [rbx + renc.wbytes]
    call        .unmap
    mov         rdi, [rbx + renc.bp]
    mov         esi, BP_BYTES
    call        .unmap
    mov         rdi, [rbx + renc.seed]
    mov         rsi, [rbx + renc.sdbytes]
    call        .unmap
    mov         rdi, [rbx + renc.bloom]
    mov         esi, 1 << (BLOOM_BITS - 3)
    call        .unmap
    mov         rdi, [rbx + renc.reach4]
    mov         esi, R4_BYTES
    call        .unmap
    mov         rdi, [rbx + renc.reach16]
    mov         esi, 4 << R16_BITS
    call        .unmap
    mov         rdi, [rbx + renc.t3]
    mov         esi, 8 << T3_BITS
    call        .unmap
    mov         rdi, [rbx + renc.f2]
    mov         esi, F2_BYTES
    call        .unmap
    mov         rdi, [rbx + renc.res]
    mov         rsi, [rbx + renc.rbytes]
    call        .unmap
    mov         rdi, [rbx + renc.tokoff]
    mov         rsi, [rbx + renc.tbytes]
    call        .unmap
    mov         rdi, rbx
    mov         esi, (renc_size + 4095) & ~4095
    call        .unmap
    pop         r13
    pop         r12
    pop         rbx
.ret:
    ret
.unmap:                                         ; rdi = address or 0, rsi
    test        rdi, rdi
    jz          .ret
    jmp         asmbpe_unmap

;-----------------------------------------------------------------------------
; rk_state: rdi = the encoder, rsi = a thread index.  Out: rax = its state
; (made on first use, its cache mapped), 0 when out of memory.  Keeps rbx,
; rbp, r12-r15; clobbers the other registers.
;-----------------------------------------------------------------------------
PROC rk_state
    mov         rax, [rdi + renc.ts + rsi * 8]
    test        rax, rax
    jnz         .ret
    push        rbx
    push        r12
    push        r13
    mov         rbx, rdi
    mov         r12, rsi
    mov         edi, (rts_size + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .out
    mov         r13, rax
    mov         [r13 + rts.enc], rbx
    lea         rdi, [r13 + rts.pc]             ; every pair cache key ~0
    mov         ecx, 2 << PC_BITS
    mov         rax, -1
    rep stosq
    mov         edi, RC_ENTRIES * rcent_size + 4096 ; zeroed: every entry
                                                ; empty (+ a page: 32-byte
                                                ; loads of the last ids)
    call        asmbpe_map
    test        rax, rax
    jz          .no_cache
    mov         [r13 + rts.cache], rax
    mov         rdi, [rbx + renc.ctbytes]       ; the chunk table: the seed
    call        asmbpe_map
    test        rax, rax
    jz          .no_ct
    mov         [r13 + rts.ct], rax
    mov         rax, [rbx + renc.ctmask]
    mov         [r13 + rts.ctmask], rax
    mov         rax, [rbx + renc.ctbytes]
    mov         [r13 + rts.ctbytes], rax
    dec         rax
    mov         [r13 + rts.ctbmask], rax
    mov         rax, [rbx + renc.ctcap]
    mov         [r13 + rts.ctcap], rax
    push        rbx                             ; the seed into it
    mov         rbx, r13
    call        rk_ct_seed
    pop         rbx
    mov         edi, CT_ARENA * 4
    call        asmbpe_map
    test        rax, rax
    jz          .no_arena
    mov         [r13 + rts.arena], rax
    mov         qword [r13 + rts.acap], CT_ARENA
    mov         edi, 16 << LT_BITS              ; the long-chunk table and
    call        asmbpe_map                      ; its arena
    test        rax, rax
    jz          .no_lt
    mov         [r13 + rts.lt], rax
    mov         qword [r13 + rts.ltmask], (1 << LT_BITS) - 1
    mov         edi, LT_ARENA
    call        asmbpe_map
    test        rax, rax
    jz          .no_ltarena
    mov         [r13 + rts.ltarena], rax
    mov         qword [r13 + rts.ltacap], LT_ARENA
    mov         [rbx + renc.ts + r12 * 8], r13
    mov         rax, r13
.out:
    pop         r13
    pop         r12
    pop         rbx
.ret:
    ret
.no_ltarena:
    mov         rdi, [r13 + rts.lt]
    mov         esi, 16 << LT_BITS
    call        asmbpe_unmap
.no_lt:
    mov         rdi, [r13 + rts.arena]
    mov         esi, CT_ARENA * 4
    call        asmbpe_unmap
.no_arena:
    mov         rdi, [r13 + rts.ct]
    mov         rsi, [rbx + renc.ctbytes]
    call        asmbpe_unmap
.no_ct:
    mov         rdi, [r13 + rts.cache]
    mov         esi, RC_ENTRIES * rcent_size + 4096
    call        asmbpe_unmap
.no_cache:
    mov         rdi, r13
    mov         esi, (rts_size + 4095) & ~4095
    call        asmbpe_unmap
    xor         eax, eax
    jmp         .out
ENDPROC


;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_decode(const asmbpe_renc *e, const uint32_t *ids,
;                            uint64_t n, uint8_t *out, uint64_t cap)
; The bytes of n ids (each < n_tokens) one after another into out: returns
; the bytes written, or ASMBPE_EINVAL (an id out of range: nothing is
; promised about out) or -(bytes needed) - 16 when they exceed cap (nothing
; written past cap).  Tokens are copied 16 bytes at a time where 16 bytes
; of room are left, byte by byte near the end.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_decode, 5, 15, 0, e, ids, n, out, cap
    mov         r12, idsq
    mov         r13, nq
    mov         r14, outq
    mov         r15, capq
    mov         r9, [eq + renc.tokoff]
    mov         r10, [eq + renc.tokbytes]
    mov         r11, [eq + renc.ntok]
    xor         eax, eax                        ; bytes written
    xor         ebx, ebx                        ; ids done
    lea         rbp, [r14 + r15]                ; the room's end
.next:
    cmp         rbx, r13
    jae         .done
    mov         ecx, [r12 + rbx * 4]
    inc         rbx
    cmp         rcx, r11
    jae         .bad
    mov         rdx, [r9 + rcx * 8]             ; its bytes
    mov         rcx, [r9 + rcx * 8 + 8]
    sub         rcx, rdx                        ; its length
    add         rdx, r10
    lea         rdi, [r14 + rax]                ; where they go
    add         rax, rcx
    cmp         rax, r15
    ja          .over
.copy:
    lea         rsi, [rdi + 16]
    cmp         rsi, rbp
    ja          .bytes
    vmovdqu     xmm0, [rdx]                     ; (the token table has PAD
    vmovdqu     [rdi], xmm0                     ; after its bytes)
    cmp         rcx, 16
    jbe         .next
    add         rdx, 16
    add         rdi, 16
    sub         rcx, 16
    jmp         .copy
.bytes:
    test        rcx, rcx
    jz          .next
    mov         sil, [rdx]
    mov         [rdi], sil
    inc         rdx
    inc         rdi
    dec         rcx
    jmp         .bytes
.over:                                          ; count what is needed
    cmp         rbx, r13
    jae         .need
    mov         ecx, [r12 + rbx * 4]
    inc         rbx
    cmp         rcx, r11
    jae         .bad
    add         rax, [r9 + rcx * 8 + 8]
    sub         rax, [r9 + rcx * 8]
    jmp         .over
.need:
    neg         rax
    sub         rax, 16
.done:
    RET
.bad:
    mov         rax, ASMBPE_EINVAL
    RET
ENDFUNC
