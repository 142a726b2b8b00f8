;-----------------------------------------------------------------------------
; encode_rank_split.asm — a long chunk met for the first time, cut where no
; token can span (RF_SPLIT): rk_split; and the tables it reads, built by
; asmbpe_renc_new (rk_reach_build).  A piece of one byte is its id, of two
; the renc.bp answer for them (a merge, exact either way), of three
; renc.t3's token where the whole-chunk rule holds (else merged: without it
; a 3-byte token may not be what its bytes merge to), of 4..15 the chunk
; table's entry (whose tokens are only there with the rule), else merged.
; (the rank encoder: its layouts and macros in encode_rank.inc)
;
; Why a cut is exact: if no token's bytes cover both byte p - 1 and byte p
; of a chunk, no merge can make a part that spans p, so the merges left of
; p and right of p never meet, and each side's merges come in the order the
; side alone would take (the lowest priority of the whole chunk, when it is
; on the left, is the lowest of the left; leftmost stays leftmost).  The ids
; of the chunk are then the ids of the left piece followed by those of the
; right.  A piece that is itself a token encodes as it (the chunk table and
; rk_merge use RF_WHOLE's shortcut), which is the merges' result only where
; every token's bytes merge to that token: Python sets RF_SPLIT for the
; vocabularies where that holds (no RF_WHOLE, or checked: cl100k_base,
; o200k_base; tests/test_rank_split.py).
;
; Where no token can span: every start i reaches at most
;   i + 2      when bytes i, i+1 make a token (renc.bp, exact: a 2-byte
;              token is only ever made from its two bytes),
;   i + 3      when bytes i..i+2 are a token (renc.t3, exact),
;   i + m      m: the longest token of 4+ bytes that starts with bytes
;              i..i+3 (renc.reach4; exact but for a 24-bit fingerprint,
;              whose rare collisions only reach further); for a rank file
;              (RF_RANKS) with m > 4, instead i + L for the longest L in
;              4..min(m, 15) whose bytes have their bit in renc.bloom (the
;              filter of the tokens of 3..15 bytes; a false bit only
;              reaches further), and where m > 15 also i + the longest
;              token of 16+ bytes that starts with bytes i..i+15
;              (renc.reach16, fingerprinted as reach4; log R52: with m
;              itself, 8 MB of multilingual's long chunks left 611 KB in
;              pieces over 15 bytes for o200k, with reach16 243 KB),
; (the last two looked up only where renc.f2, a bit per two bytes, says a
; token of 3+ bytes starts with bytes i, i+1: 42 % of multilingual's long
; chunks' positions), and a cut goes before every p > 0 that no start
; before it reaches past.
; Most of multilingual text's long chunks (Cyrillic, CJK, Greek words of 16
; to 128 bytes) cut into pieces of 2-4 bytes that are tokens; english's
; long chunks (runs of spaces, of '-', long words) rarely cut (log R29).
;-----------------------------------------------------------------------------
%include "encode_rank.inc"

extern rk_merge
extern rk_sub_a
extern rk_sub_b
extern mask_tab
extern ct_idmask

section .text

;-----------------------------------------------------------------------------
; rk_split: rbx = a thread state, rsi = a chunk of CT_MAX_LEN + 1 ..
; LT_MAX_LEN bytes (PAD readable after it), rdx = its length, rcx = out
; (room for rdx ids; past the ids written, out may be overwritten up to
; rts.outlim).  rax = the ids written, or ASMBPE_ENOMEM.  Keeps rbx, rbp,
; r12-r15; clobbers the other registers and ymm0-ymm11 (as rk_sub_a).
; Without RF_SPLIT, or when nothing cuts, it is rk_merge.  Each piece, in
; order: one byte, its id; two, renc.bp; three, renc.t3 (RF_WHOLE) or
; rk_merge; 4..CT_MAX_LEN, the thread's chunk table (probed one piece at a
; time, nothing prefetched), else with RF_RANKS rk_sub_a / rk_sub_b (then
; put into the chunk table where its probe ended: a later record of rk_doc's
; batch that missed there may overwrite it, which only loses the entry) and
; without it rk_merge; longer, rk_merge.
;-----------------------------------------------------------------------------
%define sp_p    r12     ; the chunk
%define sp_n    r13     ; its length
%define sp_out  r14     ; out
%define sp_k    r15     ; ids written
%define sp_enc  rbp     ; the encoder
; the stack: [rsp] the pieces' starts (u8, LT_MAX_LEN + 1 of them, the
; chunk's end after the last), [rsp + SP_NPIECE] how many pieces, [rsp +
; SP_NPIECE + 8] the piece being encoded (kept across rk_merge)
%define SP_NPIECE   (LT_MAX_LEN + 8)
%define SP_RBX      (LT_MAX_LEN + 24)       ; rbx while the cuts are found
%define SP_AT       (LT_MAX_LEN + 32)       ; (the bytes at i, while rolling)
%define SP_M        (LT_MAX_LEN + 40)       ; (m, while rolling)
%define SP_FRAME    (LT_MAX_LEN + 48)       ; (rsp stays 16-byte aligned at
                                            ; calls: 5 pushes + this)
PROC rk_split
    mov         rax, [rbx + rts.enc]
    test        qword [rax + renc.flags], RF_SPLIT
    jz          rk_merge                        ; (a tail call)
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    sub         rsp, SP_FRAME
    mov         sp_p, rsi
    mov         sp_n, rdx
    mov         sp_out, rcx
    mov         sp_enc, rax

    ;---- the cuts: starts of pieces into [rsp]
    mov         r8, [sp_enc + renc.bp]
    mov         r9, [sp_enc + renc.t3]
    mov         r10, [sp_enc + renc.reach4]
    mov         [rsp + SP_RBX], rbx
    mov         rbx, [sp_enc + renc.f2]         ; (the thread state: below)
    xor         ecx, ecx                        ; i
    xor         edi, edi                        ; the furthest reach so far
    xor         r15d, r15d                      ; pieces
.reach:
    cmp         rdi, rcx                        ; nothing reaches past i:
    ja          .reached                        ; a piece starts here
    mov         [rsp + r15], cl
    inc         r15d
.reached:
    lea         rdx, [rcx + 1]                  ; i + 1: the byte itself
    lea         rax, [rcx + 2]
    cmp         rax, sp_n
    ja          .reach_next                     ; (the last byte)
    movzx       esi, word [sp_p + rcx]
    cmp         dword [r8 + rsi * 8], NO_PRIO   ; a 2-byte token?
    cmovne      rdx, rax
    lea         rax, [rcx + 3]
    cmp         rax, sp_n
    ja          .reach_next
    bt          [rbx], rsi                      ; no token of 3+ bytes starts
    jnc         .reach_next                     ; with these two
    mov         esi, [sp_p + rcx]
    and         esi, 0x00FFFFFF
    T3_FIND     r9, rsi, esi, r11, r11d, .no3   ; a 3-byte token?
    mov         rdx, rax
.no3:
    lea         rax, [rcx + 4]
    cmp         rax, sp_n
    ja          .reach_next
    mov         esi, [sp_p + rcx]               ; the longest token of 4+
    mov         r11d, esi                       ; bytes starting so
    imul        r11d, r11d, R4_K
    shr         r11d, 32 - R4_BITS              ; (its home)
    imul        esi, esi, R4_K2
    and         esi, R4_FP                      ; (its fingerprint)
.r4_probe:
    mov         eax, [r10 + r11 * 4]
    test        eax, eax
    jz          .reach_next                     ; none
    xor         eax, esi
    cmp         eax, 255
    jbe         .r4_hit
    inc         r11d
    and         r11d, (1 << R4_BITS) - 1
    jmp         .r4_probe
.r4_hit:                                        ; eax = m, the longest
    cmp         eax, 4                          ; (4: the 4 bytes are it)
    jbe         .r4_bound
    cmp         qword [sp_enc + renc.bloom], 0  ; RF_RANKS: the longest of
    je          .r4_bound                       ; 4..min(m, 15) bytes with its
    cmp         eax, CT_MAX_LEN                 ; bit in the filter of tokens
    jbe         .roll_from                      ; (the seed's: a false bit
    cmp         qword [sp_enc + renc.reach16], 0 ; only reaches further); for
    je          .r4_bound                       ; m over 15, then also the
.roll_from:                                     ; longest token over 15 bytes
    mov         [rsp + SP_M], eax               ; with bytes i..i+15 first
    mov         r8, [sp_enc + renc.bloom]       ; (renc.reach16; without it,
    mov         r10, sp_n                       ; m as it is)
    sub         r10, rcx
    cmp         eax, CT_MAX_LEN
    mov         r9d, CT_MAX_LEN
    cmova       eax, r9d
    cmp         r10, rax
    cmova       r10, rax                        ; min(m, 15, n - i)
    mov         r9d, ROLL_K
    xor         r11d, r11d                      ; the rolled hash of
    xor         esi, esi                        ; bytes i .. i + rsi
    lea         rax, [sp_p + rcx]
    mov         [rsp + SP_AT], rax
.roll:
    mov         rax, [rsp + SP_AT]
    movzx       eax, byte [rax + rsi]
    lea         r11d, [r11 + rax + 1]
    imul        r11d, r9d
    inc         rsi
    cmp         rsi, 4
    jb          .roll_next
    mov         eax, r11d
    shr         eax, 32 - BLOOM_BITS
    bt          [r8], rax
    jnc         .roll_next
    lea         rdx, [rcx + rsi]                ; (above what bp and t3 gave)
.roll_next:
    cmp         rsi, r10
    jb          .roll
    cmp         dword [rsp + SP_M], CT_MAX_LEN
    jbe         .rolled
    lea         rax, [rcx + CT_MAX_LEN + 1]     ; m over 15: 16 bytes left?
    cmp         rax, sp_n
    ja          .rolled
    mov         rax, [rsp + SP_AT]
    mov         r8, [sp_enc + renc.reach16]
    R16_FIND    rax, r8, .rolled                ; (none: no token over 15
    add         rax, rcx                        ; bytes starts with these)
    cmp         rax, rdx
    cmova       rdx, rax
.rolled:
    mov         r8, [sp_enc + renc.bp]
    mov         r9, [sp_enc + renc.t3]
    mov         r10, [sp_enc + renc.reach4]
    jmp         .reach_next
.r4_bound:
    add         rax, rcx
    cmp         rax, rdx
    cmova       rdx, rax
.reach_next:
    cmp         rdx, rdi
    cmova       rdi, rdx
    inc         rcx
    cmp         rcx, sp_n
    jb          .reach
    mov         rbx, [rsp + SP_RBX]
    cmp         r15d, 1
    je          .whole                          ; nothing cut
    mov         [rsp + r15], r13b               ; (sp_n: the end)
    mov         [rsp + SP_NPIECE], r15

    ;---- each piece in turn
    xor         sp_k, sp_k
    xor         r11d, r11d                      ; piece j (kept on the stack
.piece:                                         ; across calls)
    mov         [rsp + SP_NPIECE + 8], r11
    movzx       esi, byte [rsp + r11]
    movzx       edx, byte [rsp + r11 + 1]
    sub         edx, esi                        ; its length
    add         rsi, sp_p                       ; its bytes
    lea         rcx, [sp_out + sp_k * 4]        ; its ids go here
    cmp         edx, 1
    je          .one_byte
    cmp         edx, 2
    je          .two_bytes
    cmp         edx, 3
    je          .three_bytes
    cmp         edx, CT_MAX_LEN
    ja          .merge
    push        rsi                             ; (a chunk table key of up
    push        rdx                             ; to 15 bytes)
    CT_KEY      rsi, rdx, edx
    KEY_HASH    xmm0, rcx
    and         rcx, [rbx + rts.ctmask]
    shl         rcx, CT_SHIFT
    add         rcx, [rbx + rts.ct]
    CT_PROBE    .ct_hit, .ct_miss
.ct_miss:                                       ; rcx = the empty entry
    pop         rdx
    pop         rsi
    test        qword [sp_enc + renc.flags], RF_RANKS
    jz          .ct_merge
    ; RF_RANKS: merged from its substrings' ids (rk_sub_a / _b: their
    ; lookups overlap, where rk_merge's pair lookups come one merge after
    ; another), then put into the chunk table where its probe ended, so
    ; that the next long chunk with this piece finds it
    push        rcx                             ; [rsp + 24]: the entry
    push        rsi                             ; [rsp + 16]: the piece
    push        rdx                             ; [rsp + 8]: its length
    push        rdx                             ; (alignment)
    lea         rdi, [rbx + rts.ws1]
    call        rk_sub_a
    mov         rsi, [rsp + 16]
    mov         rdx, [rsp + 8]
    lea         rcx, [sp_out + sp_k * 4]
    lea         rdi, [rbx + rts.ws1]
    call        rk_sub_b
    mov         rcx, [rsp + 24]
    mov         rsi, [rsp + 16]
    mov         rdx, [rsp + 8]
    add         rsp, 32
    cmp         rax, CT_MAX_TOK                 ; (5..15 ids: not kept)
    ja          .sub_done
    cmp         qword [rbx + rts.reset], 0      ; (the table is full: rk_doc
    jne         .sub_done                       ; changes it after its batch)
    mov         r8, [rbx + rts.ctfill]
    cmp         r8, [rbx + rts.ctcap]
    jae         .ct_full
    inc         r8
    mov         [rbx + rts.ctfill], r8
    mov         r8, rax
    CT_KEY      rsi, rdx, edx
    vmovdqu     [rcx + ctent.key], xmm0
    lea         rdx, [sp_out + sp_k * 4]        ; its ids
    CT_IDS      rcx, rdx, r8
    mov         rax, r8
.sub_done:
    add         sp_k, rax
    jmp         .piece_next
.ct_full:
    mov         qword [rbx + rts.reset], 1
    jmp         .sub_done
.ct_merge:
    lea         rcx, [sp_out + sp_k * 4]
.merge:
    call        rk_merge
    test        rax, rax
    js          .ret                            ; (ENOMEM)
    add         sp_k, rax
    jmp         .piece_next
.ct_hit:
    add         rsp, 16
    vmovdqu     xmm1, [rcx + ctent.ids]
    vmovd       eax, xmm1
    shr         eax, CT_NSHIFT                  ; how many
    lea         rdx, [sp_out + sp_k * 4]
    add         sp_k, rax
    cmp         eax, CT_MAX_TOK
    ja          .hit_arena
    vpand       xmm1, xmm1, [rel ct_idmask]
    sub         rsp, 16                         ; (one at a time: out's room
    vmovdqu     [rsp], xmm1                     ; may end right after them)
    xor         ecx, ecx
.hit_id:
    mov         esi, [rsp + rcx * 4]
    mov         [rdx + rcx * 4], esi
    inc         ecx
    cmp         ecx, eax
    jb          .hit_id
    add         rsp, 16
    jmp         .piece_next
.hit_arena:                                     ; 5..15 ids, in the arena
    vpextrd     esi, xmm1, 1
    mov         rcx, [rbx + rts.arena]
    lea         rsi, [rcx + rsi * 4]
.arena_id:
    mov         ecx, [rsi]
    mov         [rdx], ecx
    add         rsi, 4
    add         rdx, 4
    dec         eax
    jnz         .arena_id
    jmp         .piece_next
.two_bytes:                                     ; the pair of its bytes: one
    movzx       eax, word [rsi]                 ; token or two (exact: a
    mov         r8, [sp_enc + renc.bp]          ; 2-byte token is always
    mov         r8, [r8 + rax * 8]              ; merged from its bytes)
    cmp         r8d, NO_PRIO
    je          .two_ids
    shr         r8, 32
    mov         [rcx], r8d
    inc         sp_k
    jmp         .piece_next
.two_ids:
    movzx       r8d, al
    mov         r8d, [sp_enc + renc.byteid + r8 * 4]
    mov         [rcx], r8d
    movzx       eax, ah
    mov         eax, [sp_enc + renc.byteid + rax * 4]
    mov         [rcx + 4], eax
    add         sp_k, 2
    jmp         .piece_next
.three_bytes:                                   ; a 3-byte token (with the
    test        qword [sp_enc + renc.flags], RF_WHOLE   ; whole-chunk rule: the
    jz          .merge                          ; vocabulary is regular), or
    mov         eax, [rsi]                      ; merged
    and         eax, 0x00FFFFFF
    mov         r8, [sp_enc + renc.t3]
    T3_FIND     r8, rax, eax, r9, r9d, .merge
    mov         [rcx], eax
    inc         sp_k
    jmp         .piece_next
.one_byte:
    movzx       eax, byte [rsi]
    mov         eax, [sp_enc + renc.byteid + rax * 4]
    mov         [rcx], eax
    inc         sp_k
.piece_next:
    mov         r11, [rsp + SP_NPIECE + 8]
    inc         r11
    cmp         r11, [rsp + SP_NPIECE]
    jb          .piece
    mov         rax, sp_k
    jmp         .ret
.whole:
    mov         rsi, sp_p
    mov         rdx, sp_n
    mov         rcx, sp_out
    call        rk_merge
.ret:
    add         rsp, SP_FRAME
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret
ENDPROC

;-----------------------------------------------------------------------------
; rk_reach_build (asmbpe_renc_new, RF_SPLIT): r14 = the encoder, its token
; bytes and offsets copied.  Maps and fills renc.reach4, renc.reach16,
; renc.t3 and renc.f2.
; eax = 0, or ASMBPE_ENOMEM.  Clobbers rax, rcx, rdx, rsi, rdi, r8-r11.
;-----------------------------------------------------------------------------
PROC rk_reach_build
    SAVE        r12, r13, rbx, rbp, r15
    xor         r12d, r12d                      ; entries filled in t3
    xor         r13d, r13d                      ; ... in reach4
    xor         r15d, r15d                      ; ... in reach16
    mov         edi, 4 << R4_BITS
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [r14 + renc.reach4], rax
    mov         edi, 8 << T3_BITS
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [r14 + renc.t3], rax
    mov         edi, 65536 / 8
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [r14 + renc.f2], rax
    mov         edi, 4 << R16_BITS
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [r14 + renc.reach16], rax
    mov         r8, [r14 + renc.tokoff]
    mov         r9, [r14 + renc.tokbytes]       ; (PAD after the bytes)
    mov         r10, [r14 + renc.reach4]
    mov         r11, [r14 + renc.t3]
    xor         ecx, ecx
.token:
    cmp         rcx, [r14 + renc.ntok]
    jae         .done
    mov         rsi, [r8 + rcx * 8]
    mov         rdx, [r8 + rcx * 8 + 8]
    sub         rdx, rsi                        ; its length
    mov         eax, [r9 + rsi]
    cmp         rdx, 3
    jb          .next
    movzx       edi, ax                         ; its first two bytes
    mov         rsi, [r14 + renc.f2]
    bts         [rsi], rdi
    cmp         rdx, 3
    ja          .four
    and         eax, 0x00FFFFFF                 ; {bytes | T3_USED, id}
    mov         edi, eax
    or          edi, T3_USED
    shl         rcx, 32
    or          rdi, rcx
    shr         rcx, 32
    T3_HASH     eax
.t3_probe:
    cmp         qword [r11 + rax * 8], 0
    je          .t3_put
    inc         eax
    and         eax, (1 << T3_BITS) - 1
    jmp         .t3_probe
.t3_put:
    mov         [r11 + rax * 8], rdi
    inc         r12
    cmp         r12, (3 << T3_BITS) / 4
    jae         .too_many
    jmp         .next
.four:                                          ; the longest with these 4
    mov         edi, 255                        ; bytes first (longer than
    cmp         rdx, rdi                        ; 255: 255, past any chunk
    cmova       rdx, rdi                        ; cut)
    cmp         rdx, CT_MAX_LEN                 ; over 15 bytes: the longest
    jbe         .r16_done                       ; with these 16 bytes first
    cmp         r15, (3 << R16_BITS) / 4        ; (too many: reach16 is
    jae         .r16_done                       ; dropped at the end)
    mov         rsi, [r8 + rcx * 8]
    add         rsi, r9
    R16_HASH    rsi, rdi, edi, ebx
    mov         rsi, [r14 + renc.reach16]
.r16_probe:
    mov         ebp, [rsi + rdi * 4]
    test        ebp, ebp
    jz          .r16_put
    xor         ebp, ebx
    cmp         ebp, 255
    jbe         .r16_seen
    inc         edi
    and         edi, (1 << R16_BITS) - 1
    jmp         .r16_probe
.r16_put:
    inc         r15
    jmp         .r16_store
.r16_seen:                                      ; (ebp: its length so far)
    cmp         edx, ebp
    jbe         .r16_done
.r16_store:
    or          ebx, edx
    mov         [rsi + rdi * 4], ebx
.r16_done:
    mov         esi, eax
    imul        esi, esi, R4_K2
    and         esi, R4_FP                      ; its fingerprint
    imul        eax, eax, R4_K
    shr         eax, 32 - R4_BITS               ; its home
.r4_probe:
    mov         edi, [r10 + rax * 4]
    test        edi, edi
    jz          .r4_put
    xor         edi, esi
    cmp         edi, 255
    jbe         .r4_seen
    inc         eax
    and         eax, (1 << R4_BITS) - 1
    jmp         .r4_probe
.r4_seen:                                       ; (edi: its length so far)
    cmp         edx, edi
    jbe         .next
.r4_put:
    or          esi, edx
    cmp         dword [r10 + rax * 4], 0
    jne         .r4_store
    inc         r13
    cmp         r13, (3 << R4_BITS) / 4
    jae         .too_many
.r4_store:
    mov         [r10 + rax * 4], esi
.next:
    inc         rcx
    jmp         .token
.too_many:
    and         qword [r14 + renc.flags], ~RF_SPLIT
    mov         r15d, (3 << R16_BITS) / 4       ; (reach16 dropped too: not
.done:                                          ; filled, and rk_chunk reads it)
    cmp         r15, (3 << R16_BITS) / 4        ; too many prefixes of tokens
    jb          .built                          ; over 15 bytes for reach16:
    mov         rdi, [r14 + renc.reach16]       ; none (rk_split then takes
    mov         esi, 4 << R16_BITS              ; reach4's m for them)
    call        asmbpe_unmap
    mov         qword [r14 + renc.reach16], 0
.built:
    xor         eax, eax
    RESTORE
.enomem:
    mov         eax, ASMBPE_ENOMEM
    RESTORE
ENDPROC
