;-----------------------------------------------------------------------------
; encode_rank_doc.asm — one document: rk_doc (split, prefetch, each chunk;
; its passes A, F, B0, M and B), asmbpe_renc_text (the documents on
; threads: encode_rank_jobs.asm)
; (the rank encoder: its layouts and macros in encode_rank.inc)
;-----------------------------------------------------------------------------
%include "encode_rank.inc"

extern asmbpe_split_offsets
extern mask_tab
extern rk_state
extern rk_chunk
extern rk_merge
extern rk_sub_a
extern rk_sub_b
extern rk_long
extern rk_ct_full

; OTHER_HALF reg: reg = the half of rts.batch that rts.bcur is not.
; Clobbers rax.
%macro OTHER_HALF 1
    lea         rax, [rbx + rts.batch]
    mov         %1, [rbx + rts.bcur]
    sub         %1, rax
    xor         %1, RK_BATCH * rkrec_size
    add         %1, rax
%endmacro

; FAST checked: pass F's loop (rk_doc), %1 = 1: each hit's room checked
; against rts.outlim (else there is room for every chunk left as 16 ids).
; rdi = the record, rdx = out, r8 = rts.bend, r9 = renc.flags, r11 = the
; misses put off (a bit per chunk from rbp's).  A hit of up to CT_MAX_TOK
; ids is written at once; with RF_RANKS a miss keeps room for as many ids
; as it has bytes (its place in rts.mpos) and is merged after the loop
; (.resolve: log R61).  To .stop_f at the first chunk that is neither (a
; long one, a hit of 5+ ids, a miss without RF_RANKS, no room), to
; .fast_end after the last.
%macro FAST 1
.fast%1:
    mov         rcx, [rdi + rkrec.home]
    test        rcx, rcx
    jz          .stop_f                         ; (a long chunk)
    vmovdqa     xmm0, [rdi + rkrec.key]
    CT_PROBE    .fast_hit%1, .fast_miss%1
.fast_miss%1:
    test        r9d, RF_RANKS
    jz          .stop_f
    or          rcx, 1
    mov         [rdi + rkrec.free], rcx         ; the empty entry | 1
    mov         rax, r15
    sub         rax, rbp
    bts         r11, rax
    mov         [rbx + rts.mpos + rax * 8], r13
    movzx       eax, byte [rdi + rkrec.key + ctent.len]
    add         r13, rax                        ; its room: an id a byte
    jmp         .fast_next%1
.fast_hit%1:
    vmovdqu     xmm1, [rcx + ctent.ids]
    vmovd       eax, xmm1
    shr         eax, CT_NSHIFT                  ; how many
    cmp         eax, CT_MAX_TOK
    ja          .stop_f
%if %1
    lea         rsi, [rdx + r13 * 4 + 16]
    cmp         rsi, [rbx + rts.outlim]
    ja          .stop_f
%endif
    vpand       xmm1, xmm1, [ct_idmask]
    vmovdqu     [rdx + r13 * 4], xmm1
    add         r13, rax
.fast_next%1:
    add         rdi, rkrec_size
    inc         r15
    cmp         r15, r8
    jb          .fast%1
    jmp         .fast_end
%endmacro

; MISS_CHUNK idx: chunk idx (a register other than rdx, rsi, rdi, r10) of
; the batch (from rbp): rdi = its record, rsi = its bytes, rdx = its length
; (rk_doc's registers).  Clobbers r10.
%macro MISS_CHUNK 1
    lea         r10, [rbp + %1]                 ; (its index)
    mov         rdi, %1
    shl         rdi, 5                          ; (rkrec_size)
    add         rdi, [rbx + rts.bcur]
    mov         rdx, [rbx + rts.sstart]         ; the chunk
    test        r10, r10
    jz          %%first
    mov         rdx, [rbx + rts.ends + r10 * 8 - 8]
%%first:
    mov         rsi, [rbx + rts.text]
    add         rsi, rdx
    neg         rdx
    add         rdx, [rbx + rts.ends + r10 * 8] ; its length
%endmacro

; IDS_DOWN: the ids out[rsi .. rsi + rcx) (rdx = out; rsi, rcx counted in
; ids) moved down by rax ids, in order (safe, as they go down).  Clobbers
; rax, rcx, rsi, rdi.
%macro IDS_DOWN 0
    lea         rsi, [rdx + rsi * 4]
    shl         rax, 2
    mov         rdi, rsi
    sub         rdi, rax
    rep movsd
%endmacro

section .rodata
align 16
global ct_idmask:data hidden
ct_idmask:      times 4 dd 0x000FFFFF           ; an entry's ids, not their number

section .text

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_text(asmbpe_renc *e, const uint8_t *text, size_t len,
;                          uint64_t pretok, uint32_t *out, size_t cap)
; The ids of a padded text (PAD readable around it): split by pre-tokenizer
; pretok, each chunk encoded, with thread state 0.  cap >= len (ids never
; outnumber bytes).  Returns the ids written, or ASMBPE_EINVAL (cap < len,
; unknown pretok), ASMBPE_ENOMEM.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_text, 6, 15, 1, e, text, len, pretok, out, cap
    mov         rax, ASMBPE_EINVAL
    cmp         capq, lenq
    jb          .ret
    cmp         pretokq, PRETOK_MIN
    jb          .ret
    cmp         pretokq, PRETOK_MAX
    ja          .ret
    push        textq
    push        lenq
    push        pretokq
    push        outq
    xor         esi, esi
    call        rk_state
    test        rax, rax
    jz          .nomem
    mov         rbx, rax
    mov         rdi, [rsp + 24]
    mov         rsi, [rsp + 16]
    mov         rdx, [rsp + 8]
    mov         rcx, [rsp]
    call        rk_doc
    add         rsp, 32
.ret:
    RET
.nomem:
    add         rsp, 32
    mov         rax, ASMBPE_ENOMEM
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; rk_doc: rbx = a thread state, rdi = a padded text, rsi = its length, rdx =
; the pre-tokenizer (valid), rcx = out (room for rsi ids).  Out: rax = the
; ids written, or a negative status.  Keeps rbx, rbp, r12-r15; clobbers
; the other registers and ymm0-ymm11.
;
; The chunks, split RK_SPLITS at a time, go in batches of RK_BATCH.  Pass A
; (rk_pass_a, a batch ahead) makes each one's chunk table key and
; prefetches its home entry (a chunk of 16..LT_MAX_LEN bytes: its crc and
; its long-chunk table entry).  Pass F probes the table (linear, 32-byte
; entries: a byte or a whole token from the seed, or a chunk met before): a
; hit of up to CT_MAX_TOK ids is written with one 16-byte store; with
; RF_RANKS a miss keeps room for an id a byte and is merged into it after
; the loop (.resolve).  From the first chunk pass F does not take (a long
; one, a hit of 5+ ids, no room, a miss without RF_RANKS), B0 probes the
; rest, M looks up their misses' substrings (rk_sub_a) and B writes them in
; order: hits, misses (rk_sub_b, or rk_merge by the pair table; then put
; where their probe ended, rk_ct_put_miss), long chunks (rk_long).  A table
; or arena that fills up grows after its batch (rk_ct_full).
;-----------------------------------------------------------------------------
global rk_doc:function hidden
rk_doc:
    lea         rax, [rcx + rsi * 4]
    mov         [rbx + rts.outlim], rax         ; the room's end
    mov         [rbx + rts.text], rdi
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    push        rdi                             ; [rsp + 24]: text
    push        rsi                             ; [rsp + 16]: len
    push        rdx                             ; [rsp + 8]: pretok
    push        rcx                             ; [rsp]: out
    xor         r12d, r12d                      ; pos: the next chunk's start
    xor         r13d, r13d                      ; ids written
.split:
    cmp         r12, [rsp + 16]
    jae         .done
    mov         rdi, [rsp + 24]
    mov         rsi, [rsp + 16]
    mov         rdx, r12
    lea         rcx, [rbx + rts.ends]
    mov         r8d, RK_SPLITS
    mov         r9, [rsp + 8]
    call        asmbpe_split_offsets
    test        rax, rax
    js          .out
    jz          .done
    mov         r14, rax                        ; ends got
    xor         r15d, r15d                      ; the next chunk's index
    mov         [rbx + rts.sstart], r12
    lea         rdi, [rbx + rts.batch]          ; the first batch: pass A
    mov         [rbx + rts.bcur], rdi
    xor         r10d, r10d
    mov         r9d, RK_BATCH
    cmp         r9, r14
    cmova       r9, r14
    call        rk_pass_a
.batch:
    lea         rax, [r15 + RK_BATCH]
    cmp         rax, r14
    cmova       rax, r14
    mov         [rbx + rts.bend], rax
    mov         rbp, r15                        ; the batch's first
    mov         r10, rax                        ; the next batch: pass A
    cmp         r10, r14
    jae         .pass_b
    lea         r9, [r10 + RK_BATCH]
    cmp         r9, r14
    cmova       r9, r14
    OTHER_HALF  rdi
    call        rk_pass_a
.pass_b:
    ; pass F: the batch's chunks, while each is a hit of up to CT_MAX_TOK
    ; ids (probed, their ids written at once) or a miss (merged after the
    ; loop, its room kept); from the first other one on, the rest of the
    ; batch goes through B0, M and B
    mov         rdi, [rbx + rts.bcur]
    mov         rdx, [rsp]                      ; out
    mov         r8, [rbx + rts.bend]
    mov         r9, [rbx + rts.enc]
    mov         r9, [r9 + renc.flags]
    xor         r11d, r11d                      ; (no miss put off)
    mov         rax, r8                         ; room for every chunk left
    sub         rax, r15                        ; as 16 ids: no check per
    shl         rax, 4                          ; chunk
    lea         rax, [r13 + rax + 4]
    lea         rax, [rdx + rax * 4]
    cmp         rax, [rbx + rts.outlim]
    jbe         .fast0
    FAST        1
    FAST        0
.fast_end:                                      ; (the batch done)
    test        r11, r11
    jz          .fast_done
    call        .resolve
.fast_done:
    mov         r12, [rbx + rts.ends + r15 * 8 - 8]
    jmp         .batch_end
.stop_f:                                        ; chunk r15: neither
    test        r11, r11
    jz          .rest_f
    call        .resolve
    mov         rdi, r15                        ; (its record again)
    sub         rdi, rbp
    shl         rdi, 5                          ; (rkrec_size)
    add         rdi, [rbx + rts.bcur]
.rest_f:                                        ; the next chunk's start
    cmp         r15, rbp
    je          .rest
    mov         r12, [rbx + rts.ends + r15 * 8 - 8]
.rest:
    ; pass B0: each chunk left probed: rkrec.free = the entry found, or the
    ; empty one that ended the probe | 1 (a miss)
    mov         r10, r15
    xor         r11d, r11d                      ; a bit per missed chunk (from
                                                ; the batch's first, rbp)
.probe_all:
    mov         rcx, [rdi + rkrec.home]
    test        rcx, rcx
    jz          .probed                         ; (a long chunk)
    vmovdqa     xmm0, [rdi + rkrec.key]
    CT_PROBE    .found, .missed
.missed:
    or          rcx, 1
    mov         rax, r10
    sub         rax, rbp
    bts         r11, rax
.found:
    mov         [rdi + rkrec.free], rcx
.probed:
    add         rdi, rkrec_size
    inc         r10
    cmp         r10, [rbx + rts.bend]
    jb          .probe_all
    ; pass M (RF_RANKS): each missed chunk's substrings looked up at once
    ; (rk_sub_a prefetches their entries into its workspace, whose address
    ; replaces rkrec.home), so that the misses' memory waits overlap
    test        r11, r11
    jz          .emit                           ; (none missed)
    mov         rax, [rbx + rts.enc]
    test        qword [rax + renc.flags], RF_RANKS
    jz          .emit
    call        .sub_misses
.emit:
    ; pass B: in order, each chunk's ids from the first left (r15)
    mov         rdi, r15
    sub         rdi, rbp
    shl         rdi, 5                          ; (rkrec_size)
    add         rdi, [rbx + rts.bcur]
.chunk:
    mov         r8, [rbx + rts.ends + r15 * 8]  ; its end
    cmp         qword [rdi + rkrec.home], 0
    je          .slow
    mov         rcx, [rdi + rkrec.free]
    test        cl, 1
    jnz         .miss
    vmovdqu     xmm1, [rcx + ctent.ids]         ; a hit: its ids
    vmovd       eax, xmm1
    shr         eax, CT_NSHIFT                  ; how many
    cmp         eax, CT_MAX_TOK
    ja          .hit_arena
    vpand       xmm1, xmm1, [ct_idmask]
    mov         rdx, [rsp]
    lea         rdx, [rdx + r13 * 4]            ; where they go
    lea         rsi, [rdx + 16]
    cmp         rsi, [rbx + rts.outlim]
    ja          .hit_tail
    vmovdqu     [rdx], xmm1                     ; (past them: scratch)
    add         r13, rax
    mov         r12, r8
.next:
    add         rdi, rkrec_size
    inc         r15
    cmp         r15, [rbx + rts.bend]
    jb          .chunk
.batch_end:
    cmp         qword [rbx + rts.reset], 0      ; the table or its arena
    je          .no_reset                       ; filled up in this batch:
    call        rk_ct_full                      ; grown (or reset) now, the
    cmp         r15, r14                        ; next batch's homes found
    jae         .no_reset                       ; again
    mov         r10, r15
    lea         r9, [r15 + RK_BATCH]
    cmp         r9, r14
    cmova       r9, r14
    OTHER_HALF  rdi
    call        rk_pass_a
.no_reset:
    OTHER_HALF  rdi                             ; the next batch's records
    mov         [rbx + rts.bcur], rdi
    cmp         r15, r14
    jb          .batch
    jmp         .split
.hit_arena:                                     ; 5..15 ids, in the arena
    vpextrd     esi, xmm1, 1
    mov         rdx, [rbx + rts.arena]
    lea         rsi, [rdx + rsi * 4]
    mov         rdx, [rsp]
    lea         rdx, [rdx + r13 * 4]            ; where they go
    add         r13, rax
    mov         r12, r8
    lea         rcx, [rdx + 64]
    cmp         rcx, [rbx + rts.outlim]
    ja          .arena_ids
    vmovdqu     ymm1, [rsi]                     ; (the arena has room after
    vmovdqu     ymm2, [rsi + 32]                ; its last ids)
    vmovdqu     [rdx], ymm1
    vmovdqu     [rdx + 32], ymm2
    jmp         .next
.arena_ids:
    mov         ecx, [rsi]
    mov         [rdx], ecx
    add         rsi, 4
    add         rdx, 4
    dec         eax
    jnz         .arena_ids
    jmp         .next
.hit_tail:                                      ; the room's last ids
    add         r13, rax
    mov         r12, r8
    vmovdqa     [rdi + rkrec.key], xmm1         ; (the key is no longer
.hit_id:                                        ; needed)
    mov         esi, [rdi + rkrec.key]
    mov         [rdx], esi
    add         rdx, 4
    add         rdi, 4
    dec         eax
    jnz         .hit_id
    mov         rdi, [rbx + rts.bcur]           ; (the record again)
    mov         rax, r15
    sub         rax, rbp
    shl         rax, 5
    add         rdi, rax
    jmp         .next
.miss:                                          ; rcx = the empty entry | 1
    push        rdi
    push        r8
    mov         rsi, [rsp + 16 + 24]
    add         rsi, r12                        ; the chunk
    mov         rdx, r8
    sub         rdx, r12                        ; its length (2+: every byte
    mov         rcx, [rsp + 16]                 ; is in the table)
    lea         rcx, [rcx + r13 * 4]
    mov         rax, [rbx + rts.enc]
    test        qword [rax + renc.flags], RF_RANKS
    jz          .by_pairs
    mov         rdi, [rdi + rkrec.home]         ; its workspace
    call        rk_sub_b                        ; ids by the substrings'
    jmp         .encoded                        ; ids
.by_pairs:
    call        rk_merge                        ; by the pair table
.encoded:
    pop         r8
    pop         rdi
    test        rax, rax
    js          .out
    cmp         rax, CT_MAX_LEN
    ja          .put_done
    mov         rdx, [rsp]
    lea         rdx, [rdx + r13 * 4]            ; its ids
    call        rk_ct_put_miss
.put_done:
    add         r13, rax
    mov         r12, r8
    jmp         .next
.slow:                                          ; over CT_MAX_LEN bytes
    push        rdi
    push        r8
    mov         rsi, [rsp + 16 + 24]
    add         rsi, r12
    mov         rdx, r8
    sub         rdx, r12
    mov         rcx, [rsp + 16]
    lea         rcx, [rcx + r13 * 4]
    mov         eax, [rdi + rkrec.key]          ; (the crc, from pass A)
    call        rk_long
    pop         r8
    pop         rdi
    test        rax, rax
    js          .out
    add         r13, rax
    mov         r12, r8
    jmp         .next
    ; .sub_misses (pass M, a local routine): r11 = missed chunks of the
    ; batch (a bit each from rbp's): each one's substrings looked up at once
    ; (rk_sub_a prefetches their entries into the next workspace of rts.ws,
    ; whose address replaces its record's home), so that the misses' memory
    ; waits overlap.  Keeps rbx, rbp, r12-r15; clobbers the other registers
.sub_misses:
    push        r11                             ; [rsp]: the misses left
    lea         rax, [rbx + rts.ws]
    mov         [rbx + rts.wsnext], rax
.sm_next:
    mov         rax, [rsp]
    tzcnt       rcx, rax
    blsr        rax, rax
    mov         [rsp], rax
    MISS_CHUNK  rcx
    mov         rax, [rbx + rts.wsnext]
    mov         [rdi + rkrec.home], rax         ; its workspace
    mov         rdi, rax
    call        rk_sub_a
    mov         [rbx + rts.wsnext], rax
    cmp         qword [rsp], 0
    jne         .sm_next
    pop         r11
    ret

    ; .resolve (pass F's misses, a local routine): r11 = the chunks put off
    ; (a bit each from rbp's; their records' free = the empty entry | 1,
    ; their places in rts.mpos, room after each for an id a byte), r13 =
    ; the ids after them.  Each one's substrings looked up (rk_sub_a, their
    ; waits overlapping), then in order each merged (rk_sub_b) where its ids
    ; go once the ids before it have moved down over the room the ones
    ; before left unused, and put into the chunk table; the ids after the
    ; last moved down too, r13 less all that room.  Keeps rbx, rbp, r12,
    ; r14, r15; clobbers the other registers.  The frame: [rsp + 8] the
    ; misses left for rk_sub_b, [rsp + 16] the room unused
    ; so far (delta), [rsp + 24] where the ids not yet moved start (seg),
    ; [rsp + 32] the miss (its number in the batch), [rsp + 48] out
.resolve:
    sub         rsp, 40
    mov         [rsp + 8], r11
    call        .sub_misses
    mov         qword [rsp + 16], 0
    mov         rax, [rsp + 8]
    tzcnt       rcx, rax
    mov         rax, [rbx + rts.mpos + rcx * 8]
    mov         [rsp + 24], rax                 ; (the first one's place)
.res_emit:
    mov         rax, [rsp + 8]
    tzcnt       rcx, rax
    blsr        rax, rax
    mov         [rsp + 8], rax
    mov         [rsp + 32], rcx
    mov         rax, [rsp + 16]
    test        rax, rax
    jz          .res_moved
    mov         rsi, [rsp + 24]
    mov         rcx, [rbx + rts.mpos + rcx * 8]
    sub         rcx, rsi                        ; the ids since the last
    mov         rdx, [rsp + 48]
    IDS_DOWN
.res_moved:
    mov         rcx, [rsp + 32]
    MISS_CHUNK  rcx
    mov         rdi, [rdi + rkrec.home]         ; its workspace
    mov         rcx, [rsp + 32]
    mov         rax, [rbx + rts.mpos + rcx * 8]
    sub         rax, [rsp + 16]
    mov         rcx, [rsp + 48]
    lea         rcx, [rcx + rax * 4]            ; where its ids go
    call        rk_sub_b
    mov         rcx, [rsp + 32]
    mov         rdx, [rbx + rts.mpos + rcx * 8]
    sub         rdx, [rsp + 16]
    mov         rsi, [rsp + 48]
    lea         rdx, [rsi + rdx * 4]            ; its ids
    mov         rdi, rcx
    shl         rdi, 5                          ; (rkrec_size)
    add         rdi, [rbx + rts.bcur]
    call        rk_ct_put_miss                  ; (keeps rax, rdi)
    mov         rcx, [rsp + 32]
    movzx       edx, byte [rdi + rkrec.key + ctent.len]
    mov         rsi, [rbx + rts.mpos + rcx * 8]
    add         rsi, rdx
    mov         [rsp + 24], rsi                 ; the next ids to move
    sub         rdx, rax
    add         [rsp + 16], rdx                 ; its room unused
    cmp         qword [rsp + 8], 0
    jne         .res_emit
    mov         rax, [rsp + 16]
    test        rax, rax
    jz          .res_done
    mov         rsi, [rsp + 24]
    mov         rcx, r13
    sub         rcx, rsi                        ; the ids after the last
    mov         rdx, [rsp + 48]
    IDS_DOWN
    sub         r13, [rsp + 16]
.res_done:
    add         rsp, 40
    ret
.done:
    mov         rax, r13
.out:
    add         rsp, 32
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret

;-----------------------------------------------------------------------------
; rk_ct_put_miss (rk_doc): rbx = the thread state, rdi = a missed chunk's
; record (its key; rkrec.free = the empty entry that ended its probe | 1),
; rax = its ids (1..CT_MAX_LEN), rdx = where they are: the chunk put into
; the chunk table (its ids in the entry, or 5+ in the arena), unless the
; table or its arena is full (then rts.reset = 1: changed after the batch,
; whose records point into it).  Keeps rax, rdi, r8, r10-r15; clobbers rcx,
; rdx, rsi, r9, xmm0-xmm2.
;-----------------------------------------------------------------------------
rk_ct_put_miss:
    cmp         qword [rbx + rts.reset], 0      ; (full: no more this batch)
    jne         .ret
    mov         rcx, [rbx + rts.ctfill]
    cmp         rcx, [rbx + rts.ctcap]
    jae         .full
    cmp         rax, CT_MAX_TOK
    ja          .arena
    inc         rcx
    mov         [rbx + rts.ctfill], rcx
    mov         rcx, [rdi + rkrec.free]         ; the chunk into the table
    and         rcx, ~1
    vmovdqa     xmm0, [rdi + rkrec.key]
    vmovdqu     [rcx + ctent.key], xmm0
    CT_IDS      rcx, rdx, rax
.ret:
    ret
.arena:                                         ; 5..15 ids: into the arena
    mov         rsi, [rbx + rts.apos]
    lea         r9, [rsi + rax + 16]            ; (16 ids of room after the
    cmp         r9, [rbx + rts.acap]            ; last: 64-byte loads)
    ja          .full
    sub         r9, 16
    mov         [rbx + rts.apos], r9
    inc         rcx
    mov         [rbx + rts.ctfill], rcx
    mov         rcx, [rdi + rkrec.free]
    and         rcx, ~1
    vmovdqa     xmm0, [rdi + rkrec.key]
    vmovdqu     [rcx + ctent.key], xmm0
    mov         r9d, eax
    shl         r9d, CT_NSHIFT
    mov         [rcx + ctent.ids], r9d          ; their number
    mov         [rcx + ctent.ids + 4], esi      ; where they start
    mov         dword [rcx + ctent.ids + 8], 0
    mov         dword [rcx + ctent.ids + 12], 0
    mov         rcx, [rbx + rts.arena]
    lea         rcx, [rcx + rsi * 4]
    xor         esi, esi
.arena_put:
    mov         r9d, [rdx + rsi * 4]
    mov         [rcx + rsi * 4], r9d
    inc         esi
    cmp         rsi, rax
    jb          .arena_put
    ret
.full:
    mov         qword [rbx + rts.reset], 1
    ret

; rk_pass_a (rk_doc's pass A): rbx = the thread state, chunks r10 (first)
; to r9 (end) of rts.ends, rdi = their records: each chunk's chunk table
; key and home entry (0 when over CT_MAX_LEN bytes), the entry prefetched.
; Clobbers rax, rcx, rdx, rsi, rdi, r8, r10, r11, xmm0, xmm1.
rk_pass_a:
    push        r12
    push        r13
    push        r14
    mov         r8, [rbx + rts.sstart]          ; the first chunk's start
    test        r10, r10
    jz          .first
    mov         r8, [rbx + rts.ends + r10 * 8 - 8]
.first:
    mov         r12, [rbx + rts.text]
    mov         r13, [rbx + rts.ctmask]
    mov         r14, [rbx + rts.ct]
.chunk:
    mov         rax, [rbx + rts.ends + r10 * 8] ; its end
    mov         rdx, rax
    sub         rdx, r8                         ; its length
    lea         rsi, [r12 + r8]                 ; the chunk
    mov         r8, rax
    cmp         rdx, CT_MAX_LEN
    ja          .long
    CT_KEY      rsi, rdx, edx
    vmovdqa     [rdi + rkrec.key], xmm0
    KEY_HASH    xmm0, rcx
    and         rcx, r13
    shl         rcx, CT_SHIFT
    add         rcx, r14                        ; its home entry
    prefetcht0  [rcx]
.put:
    mov         [rdi + rkrec.home], rcx
    add         rdi, rkrec_size
    inc         r10
    cmp         r10, r9
    jb          .chunk
    pop         r14
    pop         r13
    pop         r12
    ret
.long:                                          ; over CT_MAX_LEN bytes: home
    xor         ecx, ecx                        ; 0; up to LT_MAX_LEN, the
    cmp         rdx, LT_MAX_LEN                 ; crc rk_long looks it up by
    ja          .put                            ; into the key (LT_CRC), its
    LT_CRC      rsi, rdx, rax, rcx, r11         ; long-chunk table entry
    mov         [rdi + rkrec.key], eax          ; prefetched (log R54)
    mov         ecx, eax
    and         rcx, [rbx + rts.ltmask]
    shl         rcx, 4                          ; (ltent_size)
    add         rcx, [rbx + rts.lt]
    prefetcht0  [rcx]
    xor         ecx, ecx
    jmp         .put
