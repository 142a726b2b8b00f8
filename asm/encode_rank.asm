;-----------------------------------------------------------------------------
; encode_rank.asm — the rank encoder (SPEC §11): vocabularies that asmbpe did
; not train (tiktoken rank files, Hugging Face tokenizer.json), u32 ids.
;
; A chunk that is itself a token is that token (RF_WHOLE: tiktoken always,
; HF with ignore_merges).  Otherwise it starts as the ids of its bytes (any
; ids: cl100k's "!" is 0) and the adjacent pair of lowest priority merges,
; leftmost first, one merge at a time, until no adjacent pair is in the pair
; table.  The caller (harness.vocab.pair_table) gives the table: for a rank
; file every split of a token into two tokens, priority = result = its rank;
; for HF each merge, priority = its number.
;
;   asmbpe_renc_new / _free   the pair hash, the whole-token hash, the bytes
;   asmbpe_renc_chunk         one chunk -> ids (rk_chunk)
;   asmbpe_renc_text          a padded text: split, then each chunk
;
; Chunks of up to RK_SHORT bytes: arrays id / prio / result, a scan for the
; lowest priority per merge (tiktoken's way, fast when short); longer ones:
; a min-heap of (priority << 32 | position) over a linked list, stale entries
; skipped when popped, O(n log n): a 1 MB run of one letter stays fast.
;
; Not yet: threads, a chunk cache, the asmbpe_encode integration (the
; merge-table encoder of SPEC §6 stays the path for asmbpe's own
; vocabularies).  One call at a time per encoder (its scratch is shared).
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"

extern asmbpe_split_offsets

%define NO_PRIO     0xFFFFFFFF      ; no pair / empty
%define RK_SHORT    128             ; chunks up to this: the scan
%define RK_GOLD     0x9E3779B97F4A7C15
%define RK_SPLITS   4096            ; chunk ends per asmbpe_split_offsets call
%define RF_WHOLE    1               ; flags: a chunk that is a token is it

; the encoder object
struc renc
    .slots:     resq 1              ; pair slots {u64 left << 32 | right,
                                    ; u32 priority, u32 result}, key ~0: empty
    .smask:     resq 1              ; slot bytes - 1 (slots * 16 - 1)
    .shift:     resq 1              ; 64 - log2(slots)
    .sbytes:    resq 1              ; bytes mapped for the slots
    .wslots:    resq 1              ; whole-token slots {u32 id, u32 crc}, id
                                    ; ~0: empty; 0 without RF_WHOLE
    .wmask:     resq 1              ; whole slots - 1
    .wbytes:    resq 1              ; bytes mapped for them
    .tokoff:    resq 1              ; u64 offsets [ntok + 1] (a copy)
    .tokbytes:  resq 1              ; token bytes (a copy, PAD around)
    .tbytes:    resq 1              ; bytes mapped for both
    .ntok:      resq 1
    .flags:     resq 1
    .scratch:   resq 1              ; rk_chunk's arrays, or 0
    .scrbytes:  resq 1              ; bytes mapped for them
    .lnext:     resq 1              ; long path: next[], prev[], prio[],
    .lprev:     resq 1              ; result[] (in the scratch)
    .lprio:     resq 1
    .lres:      resq 1
    .ends:      resq RK_SPLITS      ; asmbpe_renc_text's chunk ends
    .byteid:    resd 256            ; the id of each byte
endstruc

section .text

;-----------------------------------------------------------------------------
; RPROBE: rcx = a pair's key (left << 32 | right) -> eax = its priority,
; NO_PRIO if none; edx = its result.  Needs r8 = slots, r9 = smask, r10 =
; shift.  Keeps rcx; clobbers r11.
;-----------------------------------------------------------------------------
%macro RPROBE 0
    mov         r11, RK_GOLD
    imul        r11, rcx
    shrx        r11, r11, r10
    shl         r11, 4                          ; its home slot (bytes)
%%probe:
    cmp         rcx, [r8 + r11]
    je          %%hit
    cmp         qword [r8 + r11], -1
    je          %%none
    add         r11, 16
    and         r11, r9
    jmp         %%probe
%%hit:
    mov         eax, [r8 + r11 + 8]
    mov         edx, [r8 + r11 + 12]
    jmp         %%done
%%none:
    mov         eax, NO_PRIO
%%done:
%endmacro

; CRC_BYTES p, n, out32: out = crc32c of n bytes at p (8 at a time, then the
; rest byte by byte).  %1 = p, %2 = n (64-bit registers, kept), %3 = out (a
; 64-bit register).  Clobbers rcx, r11.
%macro CRC_BYTES 3
    mov         %3, %2                          ; seeded with the length
    xor         ecx, ecx
%%q:
    lea         r11, [rcx + 8]
    cmp         r11, %2
    ja          %%b
    crc32       %3, qword [%1 + rcx]
    mov         rcx, r11
    jmp         %%q
%%b:
    cmp         rcx, %2
    jae         %%done
    crc32       %3, byte [%1 + rcx]
    inc         rcx
    jmp         %%b
%%done:
%endmacro

;-----------------------------------------------------------------------------
; asmbpe_renc *asmbpe_renc_new(const uint32_t *pairs, uint64_t n_pairs,
;                              const uint32_t *byte_ids,
;                              const uint8_t *tok_bytes,
;                              const uint64_t *tok_offsets, uint64_t n_tokens,
;                              uint64_t flags)
; pairs: n_pairs rows {left, right, priority, result} (no pair twice, ids <
; n_tokens, priority < NO_PRIO); byte_ids[256]; token i is tok_bytes[
; tok_offsets[i], tok_offsets[i + 1]).  flags: RF_WHOLE.  NULL when out of
; memory or an argument is out of range.
;-----------------------------------------------------------------------------
%define nw_pairs    rbx
%define nw_n        rbp
%define nw_enc      r14
%define nw_i        r15
%define nw_t        r12
%define nw_t2       r13
FUNC asmbpe_renc_new, 7, 15, 0, pairs, npairs, byteids, tokbytes, tokoff, ntok, flags
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
    mov         edx, 0xFFFFFFFE
    cmp         rcx, rdx                        ; 1 <= n_tokens < 2^32 - 1
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
    and         eax, RF_WHOLE
    mov         [nw_enc + renc.flags], rax

    ; the pair slots: a power of two >= 2 n, at least 1024
    lea         rax, [nw_n * 2]
    mov         ecx, 10
.size:
    mov         edx, 1
    shl         rdx, cl
    cmp         rdx, rax
    jae         .sized
    inc         ecx
    jmp         .size
.sized:
    mov         eax, 64
    sub         eax, ecx
    mov         [nw_enc + renc.shift], rax
    shl         rdx, 4
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
    mov         r8, [nw_enc + renc.slots]
    mov         r9, [nw_enc + renc.smask]
    mov         r10, [nw_enc + renc.shift]
    xor         nw_i, nw_i
.insert:
    cmp         nw_i, nw_n
    jae         .inserted
    mov         rcx, [nw_pairs]                 ; left | right << 32
    rorx        rcx, rcx, 32                    ; left << 32 | right
    mov         r11, RK_GOLD
    imul        r11, rcx
    shrx        r11, r11, r10
    shl         r11, 4
.probe:
    cmp         qword [r8 + r11], -1
    je          .free
    add         r11, 16
    and         r11, r9
    jmp         .probe
.free:
    mov         [r8 + r11], rcx
    mov         rax, [nw_pairs + 8]             ; priority | result << 32
    mov         [r8 + r11 + 8], rax
    add         nw_pairs, 16
    inc         nw_i
    jmp         .insert
.inserted:

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

    ; the whole-token slots (RF_WHOLE): tokens of 2+ bytes by crc32c
    test        qword [nw_enc + renc.flags], RF_WHOLE
    jz          .done
    mov         rax, [nw_enc + renc.ntok]
    add         rax, rax
    mov         ecx, 10
.wsize:
    mov         edx, 1
    shl         rdx, cl
    cmp         rdx, rax
    jae         .wsized
    inc         ecx
    jmp         .wsize
.wsized:
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
    jae         .done
    mov         rax, [nw_enc + renc.tokoff]
    mov         rsi, [rax + nw_i * 8]
    mov         nw_t2, [rax + nw_i * 8 + 8]
    sub         nw_t2, rsi                      ; its length
    cmp         nw_t2, 2
    jb          .wnext
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
.done:
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

;-----------------------------------------------------------------------------
; void asmbpe_renc_free(asmbpe_renc *e): everything it mapped (NULL: nothing).
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_free, 1, 10, 0, e
    call        asmbpe_renc_free_impl
    RET
ENDFUNC

; asmbpe_renc_free_impl: rdi = the encoder or 0.  Clobbers the caller-saved
; registers; keeps rbx, rbp, r12-r15.
asmbpe_renc_free_impl:
    test        rdi, rdi
    jz          .ret
    push        rbx
    mov         rbx, rdi
    mov         rdi, [rbx + renc.slots]
    mov         rsi, [rbx + renc.sbytes]
    call        .unmap
    mov         rdi, [rbx + renc.wslots]
    mov         rsi, [rbx + renc.wbytes]
    call        .unmap
    mov         rdi, [rbx + renc.tokoff]
    mov         rsi, [rbx + renc.tbytes]
    call        .unmap
    mov         rdi, [rbx + renc.scratch]
    mov         rsi, [rbx + renc.scrbytes]
    call        .unmap
    mov         rdi, rbx
    mov         esi, (renc_size + 4095) & ~4095
    call        .unmap
    pop         rbx
.ret:
    ret
.unmap:                                         ; rdi = address or 0, rsi
    test        rdi, rdi
    jz          .ret
    jmp         asmbpe_unmap

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_chunk(asmbpe_renc *e, const uint8_t *chunk, size_t len,
;                           uint32_t *out)
; The ids of one chunk (len >= 1 bytes, PAD readable after it) into out (room
; for len ids).  Returns the ids written, or ASMBPE_ENOMEM.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_chunk, 4, 15, 0, e, chunk, len, out
    mov         rbx, eq
    call        rk_chunk
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; rk_chunk: rbx = the encoder, rsi = the chunk (PAD readable after it), rdx =
; its length (>= 1), rcx = out.  Out: rax = ids written, or ASMBPE_ENOMEM.
; Keeps rbx, rbp, r12-r15; clobbers the other registers.
;-----------------------------------------------------------------------------
%define rk_p        r12     ; the chunk
%define rk_n        r13     ; its length
%define rk_out      r14     ; out
%define rk_m        r15     ; ids left (short path)
%define rk_s        rbp     ; scratch
rk_chunk:
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    mov         rk_p, rsi
    mov         rk_n, rdx
    mov         rk_out, rcx
    cmp         rk_n, 1
    ja          .multi
    movzx       eax, byte [rk_p]
    mov         eax, [rbx + renc.byteid + rax * 4]
    mov         [rk_out], eax
    mov         eax, 1
    jmp         .ret

.multi:
    test        qword [rbx + renc.flags], RF_WHOLE
    jz          .merge
    CRC_BYTES   rk_p, rk_n, rax                 ; a token?
    mov         rdi, [rbx + renc.wslots]
    mov         r9, [rbx + renc.wmask]
    mov         r8d, eax
    and         r8, r9
.wprobe:
    mov         r10d, [rdi + r8 * 8]            ; id
    cmp         r10d, NO_PRIO
    je          .merge                          ; not a token
    cmp         eax, [rdi + r8 * 8 + 4]
    jne         .wnext
    mov         rsi, [rbx + renc.tokoff]
    mov         rdx, [rsi + r10 * 8]
    mov         rcx, [rsi + r10 * 8 + 8]
    sub         rcx, rdx
    cmp         rcx, rk_n
    jne         .wnext
    add         rdx, [rbx + renc.tokbytes]      ; compare its bytes, 8 at a
    xor         ecx, ecx                        ; time (both have padding
.wcmp:                                          ; after them)
    mov         rsi, [rdx + rcx]
    xor         rsi, [rk_p + rcx]
    mov         r11, rk_n
    sub         r11, rcx
    cmp         r11, 8
    jae         .wfull
    shl         r11d, 3
    bzhi        rsi, rsi, r11
    test        rsi, rsi
    jnz         .wnext
    jmp         .whole
.wfull:
    test        rsi, rsi
    jnz         .wnext
    add         rcx, 8
    cmp         rcx, rk_n
    jb          .wcmp
.whole:
    mov         [rk_out], r10d
    mov         eax, 1
    jmp         .ret
.wnext:
    inc         r8
    and         r8, r9
    jmp         .wprobe

.merge:
    ; scratch: 5 u32 arrays of n (id, prio/next, result, prev, prio) and a
    ; heap of 3 n u64, for the longest chunk so far
    lea         rax, [rk_n + rk_n * 4]
    lea         rax, [rax * 4]
    lea         rcx, [rk_n * 8]
    lea         rax, [rax + rcx * 2]
    add         rax, rcx
    add         rax, 64
    mov         ecx, 4096                       ; (the short path: 12 RK_SHORT)
    cmp         rax, rcx
    cmovb       rax, rcx
    cmp         rax, [rbx + renc.scrbytes]
    jbe         .scratch_ok
    push        rax
    mov         rdi, [rbx + renc.scratch]
    mov         rsi, [rbx + renc.scrbytes]
    test        rdi, rdi
    jz          .no_old
    call        asmbpe_unmap
    mov         qword [rbx + renc.scratch], 0
    mov         qword [rbx + renc.scrbytes], 0
.no_old:
    pop         rdi
    add         rdi, 4095
    and         rdi, ~4095
    push        rdi
    call        asmbpe_map
    pop         rdi
    test        rax, rax
    jz          .nomem
    mov         [rbx + renc.scratch], rax
    mov         [rbx + renc.scrbytes], rdi
.scratch_ok:
    mov         rk_s, [rbx + renc.scratch]
    mov         r8, [rbx + renc.slots]
    mov         r9, [rbx + renc.smask]
    mov         r10, [rbx + renc.shift]
    xor         ecx, ecx
.ids:                                           ; id[i] = the byte's id
    movzx       eax, byte [rk_p + rcx]
    mov         eax, [rbx + renc.byteid + rax * 4]
    mov         [rk_s + rcx * 4], eax
    inc         rcx
    cmp         rcx, rk_n
    jb          .ids
    cmp         rk_n, RK_SHORT
    ja          .long

    ;-------------------------------------------------------------------------
    ; short: id[] at rk_s, prio[] at rk_s + 4 RK_SHORT, result[] after it
    ;-------------------------------------------------------------------------
%define SP_PRIO     (4 * RK_SHORT)
%define SP_RES      (8 * RK_SHORT)
    xor         edi, edi
.sinit:                                         ; prio[i] of (id[i], id[i+1])
    rorx        rcx, [rk_s + rdi * 4], 32
    RPROBE
    mov         [rk_s + SP_PRIO + rdi * 4], eax
    mov         [rk_s + SP_RES + rdi * 4], edx
    inc         edi
    lea         eax, [edi + 1]
    cmp         rax, rk_n
    jb          .sinit
    mov         rk_m, rk_n                      ; ids
.sloop:                                         ; the lowest priority, leftmost
    mov         eax, NO_PRIO
    xor         edi, edi                        ; i
    xor         esi, esi                        ; its position
    lea         rcx, [rk_m - 1]
.sscan:
    mov         edx, [rk_s + SP_PRIO + rdi * 4]
    cmp         edx, eax
    jae         .snext
    mov         eax, edx
    mov         rsi, rdi
.snext:
    inc         rdi
    cmp         rdi, rcx
    jb          .sscan
    cmp         eax, NO_PRIO
    je          .sdone
    mov         edx, [rk_s + SP_RES + rsi * 4]  ; merge at k = rsi
    mov         [rk_s + rsi * 4], edx
    lea         rdi, [rsi + 1]                  ; remove k + 1 from the three
.sshift:                                        ; arrays
    lea         rax, [rdi + 1]
    cmp         rax, rk_m
    jae         .sshifted
    mov         edx, [rk_s + rax * 4]
    mov         [rk_s + rdi * 4], edx
    mov         edx, [rk_s + SP_PRIO + rax * 4]
    mov         [rk_s + SP_PRIO + rdi * 4], edx
    mov         edx, [rk_s + SP_RES + rax * 4]
    mov         [rk_s + SP_RES + rdi * 4], edx
    inc         rdi
    jmp         .sshift
.sshifted:
    dec         rk_m
    lea         rax, [rsi + 1]                  ; the pair (k, k + 1)
    mov         dword [rk_s + SP_PRIO + rsi * 4], NO_PRIO
    cmp         rax, rk_m
    jae         .sleft
    rorx        rcx, [rk_s + rsi * 4], 32
    RPROBE
    mov         [rk_s + SP_PRIO + rsi * 4], eax
    mov         [rk_s + SP_RES + rsi * 4], edx
.sleft:
    test        rsi, rsi                        ; the pair (k - 1, k)
    jz          .sloop
    rorx        rcx, [rk_s + rsi * 4 - 4], 32
    RPROBE
    mov         [rk_s + SP_PRIO + rsi * 4 - 4], eax
    mov         [rk_s + SP_RES + rsi * 4 - 4], edx
    jmp         .sloop
.sdone:
    xor         ecx, ecx
.scopy:
    mov         eax, [rk_s + rcx * 4]
    mov         [rk_out + rcx * 4], eax
    inc         rcx
    cmp         rcx, rk_m
    jb          .scopy
    mov         rax, rk_m
    jmp         .ret

    ;-------------------------------------------------------------------------
    ; long: id[] at rk_s, then next[] (u32; n: the end), prev[] (u32; ~0:
    ; none), prio[] and result[] of the pair (i, next[i]) (NO_PRIO: none, or
    ; i is gone), then heap[] (r12; r15 entries) of u64 priority << 32 | i
    ;-------------------------------------------------------------------------
.long:
    lea         rax, [rk_s + rk_n * 4]
    mov         [rbx + renc.lnext], rax
    lea         rax, [rax + rk_n * 4]
    mov         [rbx + renc.lprev], rax
    lea         rax, [rax + rk_n * 4]
    mov         [rbx + renc.lprio], rax
    lea         rax, [rax + rk_n * 4]
    mov         [rbx + renc.lres], rax
    lea         r12, [rax + rk_n * 4 + 7]
    and         r12, ~7                         ; the heap
    xor         r15d, r15d
    xor         ecx, ecx
.linit:
    mov         rdx, [rbx + renc.lnext]
    lea         eax, [ecx + 1]
    mov         [rdx + rcx * 4], eax
    mov         rdx, [rbx + renc.lprev]
    lea         eax, [ecx - 1]
    mov         [rdx + rcx * 4], eax
    mov         rdx, [rbx + renc.lprio]
    mov         dword [rdx + rcx * 4], NO_PRIO
    inc         rcx
    cmp         rcx, rk_n
    jb          .linit
    xor         edi, edi
.lpairs:                                        ; every (i, i + 1)
    call        lk_pair
    inc         rdi
    lea         rax, [rdi + 1]
    cmp         rax, rk_n
    jb          .lpairs
.lpop:
    call        lk_pop                          ; rax = the least, CF: none
    jc          .ldone
    mov         rdx, rax
    shr         rdx, 32                         ; its priority
    mov         esi, eax                        ; i
    mov         rcx, [rbx + renc.lprio]
    cmp         edx, [rcx + rsi * 4]
    jne         .lpop                           ; stale
    mov         rcx, [rbx + renc.lres]          ; merge (i, j = next[i])
    mov         eax, [rcx + rsi * 4]
    mov         [rk_s + rsi * 4], eax           ; id[i] = the result
    mov         rcx, [rbx + renc.lnext]
    mov         edi, [rcx + rsi * 4]            ; j
    mov         eax, [rcx + rdi * 4]            ; k = next[j]
    mov         [rcx + rsi * 4], eax            ; next[i] = k
    mov         rcx, [rbx + renc.lprio]
    mov         dword [rcx + rdi * 4], NO_PRIO  ; j is gone
    mov         dword [rcx + rsi * 4], NO_PRIO
    cmp         rax, rk_n
    jae         .lleft
    mov         rcx, [rbx + renc.lprev]
    mov         [rcx + rax * 4], esi            ; prev[k] = i
    mov         rdi, rsi
    push        rsi
    call        lk_pair                         ; (i, k)
    pop         rsi
.lleft:
    mov         rcx, [rbx + renc.lprev]
    mov         edi, [rcx + rsi * 4]            ; h = prev[i]
    cmp         edi, NO_PRIO
    je          .lpop
    call        lk_pair                         ; (h, i)
    jmp         .lpop
.ldone:
    xor         ecx, ecx                        ; the list from 0 (never
    xor         eax, eax                        ; merged away: only right
    mov         rdx, [rbx + renc.lnext]         ; ones are)
.lcopy:
    mov         r8d, [rk_s + rcx * 4]
    mov         [rk_out + rax * 4], r8d
    inc         rax
    mov         ecx, [rdx + rcx * 4]
    cmp         rcx, rk_n
    jb          .lcopy
    jmp         .ret

.nomem:
    mov         rax, ASMBPE_ENOMEM
.ret:
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret

; lk_pair (long path): rdi = i, alive, next[i] < n: prio[i] and result[i]
; of the pair (i, next[i]), pushed onto the heap (r12, r15 entries) when it
; is one.  rbp = the scratch (id[]), rbx = the encoder, r8-r10 its pair
; table.  Keeps rdi; clobbers rax, rcx, rdx, rsi, r11.
lk_pair:
    mov         rcx, [rbx + renc.lnext]
    mov         esi, [rcx + rdi * 4]
    mov         ecx, [rk_s + rdi * 4]
    shl         rcx, 32
    mov         eax, [rk_s + rsi * 4]
    or          rcx, rax                        ; the key
    RPROBE
    mov         rcx, [rbx + renc.lprio]
    mov         [rcx + rdi * 4], eax
    cmp         eax, NO_PRIO
    je          .none
    mov         rcx, [rbx + renc.lres]
    mov         [rcx + rdi * 4], edx
    shl         rax, 32
    or          rax, rdi                        ; the entry
    mov         rdx, r15
    inc         r15
.up:                                            ; sift up
    test        rdx, rdx
    jz          .place
    lea         rsi, [rdx - 1]
    shr         rsi, 1                          ; the parent
    cmp         rax, [r12 + rsi * 8]
    jae         .place
    mov         r11, [r12 + rsi * 8]
    mov         [r12 + rdx * 8], r11
    mov         rdx, rsi
    jmp         .up
.place:
    mov         [r12 + rdx * 8], rax
.none:
    ret

; lk_pop (long path): rax = the heap's least entry, removed; CF set when the
; heap (r12, r15 entries) is empty.  Clobbers rcx, rsi, rdi, r11.
lk_pop:
    test        r15, r15
    jz          .empty
    mov         rax, [r12]
    dec         r15
    jz          .done
    mov         rdi, [r12 + r15 * 8]            ; the last, sifted down from 0
    xor         esi, esi
.down:
    lea         r11, [rsi * 2 + 1]              ; the left child
    cmp         r11, r15
    jae         .put
    lea         rcx, [r11 + 1]
    cmp         rcx, r15
    jae         .one
    mov         rcx, [r12 + r11 * 8 + 8]
    cmp         rcx, [r12 + r11 * 8]
    jae         .one
    inc         r11                             ; the right one is less
.one:
    mov         rcx, [r12 + r11 * 8]
    cmp         rdi, rcx
    jbe         .put
    mov         [r12 + rsi * 8], rcx
    mov         rsi, r11
    jmp         .down
.put:
    mov         [r12 + rsi * 8], rdi
.done:
    clc
    ret
.empty:
    stc
    ret

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_text(asmbpe_renc *e, const uint8_t *text, size_t len,
;                          uint64_t pretok, uint32_t *out, size_t cap)
; The ids of a padded text (PAD readable around it): split by pre-tokenizer
; pretok, each chunk encoded.  cap >= len (ids never outnumber bytes).
; Returns the ids written, or ASMBPE_EINVAL (cap < len, unknown pretok),
; ASMBPE_ENOMEM.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_text, 6, 15, 0, e, text, len, pretok, out, cap
    mov         rax, ASMBPE_EINVAL
    cmp         capq, lenq
    jb          .ret
    mov         rbx, eq
    push        textq
    push        lenq
    push        pretokq
    push        outq                            ; [rsp]: out, advanced
    xor         r12d, r12d                      ; pos
    xor         r13d, r13d                      ; ids written
.split:
    cmp         r12, [rsp + 16]
    jae         .done
    mov         rdi, [rsp + 24]
    mov         rsi, [rsp + 16]
    mov         rdx, r12
    lea         rcx, [rbx + renc.ends]
    mov         r8d, RK_SPLITS
    mov         r9, [rsp + 8]
    call        asmbpe_split_offsets
    test        rax, rax
    js          .fail
    jz          .done
    mov         r14, rax                        ; ends got
    xor         r15d, r15d
.chunk:
    mov         rsi, [rsp + 24]
    add         rsi, r12                        ; the chunk
    mov         rdx, [rbx + renc.ends + r15 * 8]
    push        rdx
    sub         rdx, r12                        ; its length
    mov         rcx, [rsp + 8]
    lea         rcx, [rcx + r13 * 4]
    call        rk_chunk
    pop         r12                             ; pos = its end
    test        rax, rax
    js          .fail
    add         r13, rax
    inc         r15
    cmp         r15, r14
    jb          .chunk
    jmp         .split
.done:
    mov         rax, r13
.fail:
    add         rsp, 32
.ret:
    RET
ENDFUNC
