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
;   i + 2      when bytes i, i+1 make a token (renc.f2's bit 2w),
;   i + L      for the longest L in 3..lim whose bytes have their bit in
;              renc.bloom (the filter of the tokens of 3..15 bytes; a
;              false bit only reaches further), lim = min(max(m, 3), 15,
;              n - i), m the longest token of 4+ bytes whose first 4
;              bytes hash where bytes i..i+3 do (renc.reach4, u8; a
;              collision only reaches further); and where m > 15, i + the
;              longest token of 16+ bytes that starts with bytes i..i+15
;              (renc.reach16, fingerprinted; log R52: with m itself, 8 MB
;              of multilingual's long chunks left 611 KB in pieces over
;              15 bytes for o200k, with reach16 243 KB),
; (lengths of 3+ only where renc.f2's bit 2w + 1 says a token of 3+ bytes
; starts with bytes i, i+1: 42 % of multilingual's long chunks'
; positions; without a rank file's filter, i + max(m, 3) there), and a
; cut goes before every p > 0 that no start before it reaches past.  The
; reaches are found 8 starts at once, one per dword lane, their filter
; bits gathered length by length (log R59), the cuts then in one loop
; without a branch.
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

section .rodata
align 32
sp_iota:    dd 0, 1, 2, 3, 4, 5, 6, 7           ; a group's starts
sp_r4k:     times 8 dd R4_K
sp_cff:     times 8 dd 0xFF
sp_c3:      times 8 dd 3
sp_c15:     times 8 dd CT_MAX_LEN

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
%define SP_MV       (LT_MAX_LEN + 32)       ; (a group's m, 8 dwords)
%define SP_REACH    (LT_MAX_LEN + 64)       ; (each start's reach, a dword
                                            ; each, LT_MAX_LEN + 8 of them)
%define SP_FRAME    (SP_REACH + 4 * LT_MAX_LEN + 32) ; (rsp stays 16-byte
                                            ; aligned at calls: 5 pushes
                                            ; + this)
%if SP_FRAME % 16
    %error "SP_FRAME: not a multiple of 16"
%endif
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

    ;---- the reach of each start i (how many bytes from i a token that
    ; starts there may cover), 8 starts at once, one per dword lane (log
    ; R59: the scalar loop before mispredicted 1.7 branches a start): the
    ; lane's bytes b0..b3, its renc.f2 bits, its renc.reach4 byte m, then
    ; the filter bit of each length L = 3 .. lim = min(max(m, 3), 15,
    ; n - i) (0 where no token of 3+ bytes starts with b0, b1), into
    ; [rsp + SP_REACH]
    mov         [rsp + SP_RBX], rbx
    mov         r8, [sp_enc + renc.f2]
    mov         r9, [sp_enc + renc.reach4]
    mov         r10, [sp_enc + renc.bloom]      ; (0: no filter)
    mov         eax, ROLL_K
    vmovd       xmm4, eax
    vpbroadcastd ymm4, xmm4                     ; ROLL_K
    vpcmpeqd    ymm5, ymm5, ymm5                ; -1
    vpsrld      ymm6, ymm5, 27                  ; 31
    xor         ecx, ecx                        ; the group's first start
.group:
    lea         rsi, [sp_p + rcx]
    vpmovzxbd   ymm0, [rsi]                     ; b0
    vpsubd      ymm2, ymm0, ymm5
    vpmulld     ymm2, ymm2, ymm4                ; the hash of 1 byte
    vpmovzxbd   ymm1, [rsi + 1]          ; b1
    vpaddd      ymm2, ymm2, ymm1
    vpsubd      ymm2, ymm2, ymm5
    vpmulld     ymm2, ymm2, ymm4                ; ... of 2
    vpslld      ymm1, ymm1, 8
    vpor        ymm7, ymm0, ymm1                ; w = b0 | b1 << 8
    vpmovzxbd   ymm0, [rsi + 2]
    vpslld      ymm0, ymm0, 16
    vpor        ymm8, ymm7, ymm0
    vpmovzxbd   ymm0, [rsi + 3]
    vpslld      ymm0, ymm0, 24
    vpor        ymm8, ymm8, ymm0                ; b0..b3
    vpsrld      ymm0, ymm7, 4                   ; renc.f2's dword of w
    vpcmpeqd    ymm10, ymm10, ymm10
    vpxor       xmm9, xmm9, xmm9
    vpgatherdd  ymm9, [r8 + ymm0 * 4], ymm10
    vpslld      ymm1, ymm7, 28
    vpsrld      ymm1, ymm1, 27                  ; 2 * (w & 15): its bits
    vpsubd      ymm0, ymm6, ymm1
    vpsllvd     ymm3, ymm9, ymm0                ; (a 2-byte token: the sign)
    vpsrld      ymm3, ymm3, 31
    vpsubd      ymm3, ymm3, ymm5                ; the reach: 1, 2 for one
    vpaddd      ymm0, ymm0, ymm5
    vpsllvd     ymm9, ymm9, ymm0                ; the sign: f2, 3+ bytes
    vpmulld     ymm8, ymm8, [sp_r4k]
    vpsrld      ymm8, ymm8, 32 - R4_BITS        ; b0..b3's reach4 byte
    vpcmpeqd    ymm10, ymm10, ymm10
    vpxor       xmm1, xmm1, xmm1
    vpgatherdd  ymm1, [r9 + ymm8 * 1], ymm10
    vpand       ymm1, ymm1, [sp_cff]            ; m (0: no token of 4+)
    mov         rax, sp_n
    sub         rax, rcx
    vmovd       xmm0, eax
    vpbroadcastd ymm0, xmm0
    vpsubd      ymm0, ymm0, [sp_iota]           ; n - i
    vpmaxsd     ymm8, ymm1, [sp_c3]
    vpminsd     ymm8, ymm8, ymm0                ; min(max(m, 3), n - i)
    vpxor       xmm10, xmm10, xmm10
    test        r10, r10
    jz          .no_filter
    vpminsd     ymm8, ymm8, [sp_c15]
    vblendvps   ymm7, ymm10, ymm8, ymm9         ; lim (0 without f2)
    vpsubd      ymm7, ymm7, ymm5                ; lim + 1
    vpcmpgtd    ymm10, ymm1, [sp_c15]           ; the lanes with f2, m over
    vpand       ymm10, ymm10, ymm9              ; 15 and 16 bytes left: the
    vpcmpgtd    ymm11, ymm0, [sp_c15]           ; longest token of 16+
    vpand       ymm10, ymm10, ymm11             ; bytes with their 16 bytes
    vmovmskps   ebx, ymm10                      ; first (below)
    vmovdqu     [rsp + SP_MV], ymm1
    mov         edx, 3                          ; L
    vpsrld      ymm8, ymm5, 30                  ; (3 in each lane)
.len:
    vpcmpgtd    ymm10, ymm7, ymm8               ; the lanes with L <= lim
    vmovmskps   eax, ymm10
    test        eax, eax
    jz          .lens_done
    vpmovzxbd   ymm0, [rsi + rdx - 1]
    vpaddd      ymm2, ymm2, ymm0
    vpsubd      ymm2, ymm2, ymm5
    vpmulld     ymm2, ymm2, ymm4                ; the hash of L bytes
    vpsrld      ymm0, ymm2, 32 - BLOOM_BITS     ; its filter bit
    vpsrld      ymm1, ymm0, 5
    vpxor       xmm9, xmm9, xmm9
    vpgatherdd  ymm9, [r10 + ymm1 * 4], ymm10
    vpandn      ymm0, ymm0, ymm6
    vpsllvd     ymm9, ymm9, ymm0                ; (to the sign)
    vblendvps   ymm3, ymm3, ymm8, ymm9          ; set: the reach is L
    vpsubd      ymm8, ymm8, ymm5
    inc         edx
    jmp         .len
.lens_done:
    vmovdqu     [rsp + SP_REACH + rcx * 4], ymm3
    test        ebx, ebx
    jnz         .r16
.group_next:
    add         rcx, 8
    cmp         rcx, sp_n
    jb          .group
    jmp         .cuts
.no_filter:                                     ; (no rank file: m itself,
    vblendvps   ymm8, ymm10, ymm8, ymm9         ; 3 for the 3 bytes)
    vpmaxsd     ymm3, ymm3, ymm8
    vmovdqu     [rsp + SP_REACH + rcx * 4], ymm3
    jmp         .group_next
.r16:                                           ; a lane of ebx: start i
    tzcnt       edi, ebx
    blsr        ebx, ebx
    mov         rdx, [sp_enc + renc.reach16]
    mov         eax, [rsp + SP_MV + rdi * 4]    ; (without reach16: m)
    add         rdi, rcx                        ; i
    test        rdx, rdx
    jz          .r16_max
    lea         rax, [sp_p + rdi]
    R16_FIND    rax, rdx, .r16_next
.r16_max:
    cmp         eax, [rsp + SP_REACH + rdi * 4]
    jbe         .r16_next
    mov         [rsp + SP_REACH + rdi * 4], eax
.r16_next:
    test        ebx, ebx
    jnz         .r16
    jmp         .group_next

    ;---- the cuts: a piece starts at every i that no start before it
    ; reaches past; their starts into [rsp] (no branch: each i is written
    ; where the next start goes, and counted only when it is one)
.cuts:
    xor         ecx, ecx                        ; i
    xor         edi, edi                        ; the furthest reach so far
    xor         r15d, r15d                      ; pieces
.cut:
    mov         [rsp + r15], cl
    xor         eax, eax
    cmp         rdi, rcx
    setbe       al
    add         r15d, eax
    mov         eax, [rsp + SP_REACH + rcx * 4]
    add         rax, rcx
    cmp         rax, rdi
    cmova       rdi, rax
    inc         rcx
    cmp         rcx, sp_n
    jb          .cut
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
    SAVE        r12, rbx, rbp, r15
    xor         r12d, r12d                      ; entries filled in t3
    xor         r15d, r15d                      ; ... in reach16
    mov         edi, R4_BYTES
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [r14 + renc.reach4], rax
    mov         edi, 8 << T3_BITS
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [r14 + renc.t3], rax
    mov         edi, F2_BYTES
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
    cmp         rdx, 2
    jb          .next
    movzx       edi, ax                         ; its first two bytes w:
    xor         esi, esi                        ; f2's bit 2w (a 2-byte
    cmp         rdx, 2                          ; token), 2w + 1 (one of 3+
    seta        sil                             ; bytes)
    lea         edi, [rsi + rdi * 2]
    mov         rsi, [r14 + renc.f2]
    bts         [rsi], rdi
    cmp         rdx, 3
    jb          .next
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
.r16_done:                                      ; reach4: the longest at
    imul        eax, eax, R4_K                  ; its home
    shr         eax, 32 - R4_BITS
    cmp         dl, [r10 + rax]
    jbe         .next
    mov         [r10 + rax], dl
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
