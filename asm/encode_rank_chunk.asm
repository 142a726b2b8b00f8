;-----------------------------------------------------------------------------
; encode_rank_chunk.asm — one chunk: rk_chunk (the cache, a whole token, the
; scan or the heap of merges), rk_merge (the same without the cache),
; asmbpe_renc_chunk
; (the rank encoder: its layouts and macros in encode_rank.inc)
;-----------------------------------------------------------------------------
%include "encode_rank.inc"

extern mask_tab
extern rk_state

; PF_PAIR left, right: the pair cache entry and the pair table slot of the
; pair (left, right) prefetched (RPROBE_TS's lines).  %1, %2: 32-bit
; registers or memory operands (not ecx, edi, r11d).  Needs rbx = the
; thread state, r8 = the slots, r10 = the shift.  Clobbers rcx, rdi, r11.
%macro PF_PAIR 2
    PKEY        %1, %2
    mov         r11, RK_GOLD
    imul        r11, rcx
    mov         rdi, r11
    shr         rdi, 64 - PC_BITS
    shl         edi, 4
    prefetcht0  [rbx + rts.pc + rdi]
    shrx        r11, r11, r10
    prefetcht0  [r8 + r11 * 8]
%endmacro

section .rodata
; rk_iota8: 255, then the bytes 0, 1, 2, ...: rk_chunk's short path reads
; next[] (i + 1) and prev[] (i - 1, 255 for none) from it
align 64
    db          255
rk_iota8:
%assign i 0
%rep RK_SHORT + 32
    db          i
%assign i i + 1
%endrep

section .text

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_chunk(asmbpe_renc *e, const uint8_t *chunk, size_t len,
;                           uint32_t *out)
; The ids of one chunk (len >= 1 bytes, PAD readable after it) into out (room
; for len ids), with thread state 0.  Returns the ids written, or
; ASMBPE_ENOMEM.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_chunk, 4, 15, 1, e, chunk, len, out
    mov         r12, chunkq
    mov         r13, lenq
    mov         r14, outq
    xor         esi, esi
    call        rk_state
    test        rax, rax
    jz          .nomem
    mov         rbx, rax
    lea         rax, [r14 + r13 * 4]
    mov         [rbx + rts.outlim], rax         ; the room's end
    mov         rsi, r12
    mov         rdx, r13
    mov         rcx, r14
    call        rk_chunk
    RET
.nomem:
    mov         rax, ASMBPE_ENOMEM
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; rk_chunk: rbx = a thread state, rsi = the chunk (PAD readable after it),
; rdx = its length (>= 1), rcx = out (room for rdx ids; past the ids
; written, out may be overwritten up to rts.outlim, the end of the whole
; room).  Out: rax = ids written, or ASMBPE_ENOMEM.  Keeps rbx, rbp,
; r12-r15; clobbers the other registers and ymm0-ymm3.
;
; Chunks of 2..RC_MAX_LEN bytes look in the cache first: the bytes loaded
; zero-padded (mask_tab), hashed (crc32c of the two halves xor'ed, seeded
; with the length), the set's two entries compared (32 bytes and the
; length; a hit in way 1 swaps the two).  A miss encodes, moves way 0 to
; way 1 and fills way 0 when the ids fit.
;-----------------------------------------------------------------------------
PROC rk_chunk
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    mov         rk_p, rsi
    mov         rk_n, rdx
    mov         rk_out, rcx
    mov         rdi, [rbx + rts.enc]
    cmp         rk_n, 1
    ja          .multi
    movzx       eax, byte [rk_p]
    mov         eax, [rdi + renc.byteid + rax * 4]
    mov         [rk_out], eax
    mov         eax, 1
    jmp         .ret

.multi:
    cmp         rk_n, RC_MAX_LEN
    ja          .uncached
    CACHE_SET   rk_p, rk_n
    vpcmpeqb    ymm2, ymm0, [rcx + rcent.key]
    vpmovmskb   eax, ymm2
    cmp         eax, -1
    jne         .way1
    cmp         [rcx + rcent.len], r13b
    jne         .way1
.hit:
    movzx       eax, byte [rcx + rcent.ntok]    ; a hit: its ids
    cmp         eax, 1
    jne         .hit_more
    mov         edx, [rcx + rcent.ids]
    mov         [rk_out], edx
    jmp         .ret
.hit_more:
    lea         rdx, [rk_out + 32]
    cmp         rdx, [rbx + rts.outlim]
    ja          .hit_masked
    vmovdqu     ymm2, [rcx + rcent.ids]         ; 8 ids, the ones past ntok
    vmovdqu     [rk_out], ymm2                  ; within the room (scratch)
    jmp         .ret
.hit_masked:
    lea         rdx, [rax * 4]
    lea         rsi, [mask_tab + 64]
    sub         rsi, rdx
    vmovdqu     ymm1, [rsi]                     ; first ntok dwords
    vpmaskmovd  ymm2, ymm1, [rcx + rcent.ids]
    vpmaskmovd  [rk_out], ymm1, ymm2
    jmp         .ret
.way1:
    vpcmpeqb    ymm2, ymm0, [rcx + rcent_size + rcent.key]
    vpmovmskb   eax, ymm2
    cmp         eax, -1
    jne         .cache_miss
    cmp         [rcx + rcent_size + rcent.len], r13b
    jne         .cache_miss
    vmovdqu     ymm0, [rcx]                     ; found: the two swap, way 0
    vmovdqu     ymm1, [rcx + 32]                ; the last used
    vmovdqu     ymm2, [rcx + 64]
    vmovdqu     ymm3, [rcx + 96]
    vmovdqu     [rcx], ymm2
    vmovdqu     [rcx + 32], ymm3
    vmovdqu     [rcx + 64], ymm0
    vmovdqu     [rcx + 96], ymm1
    jmp         .hit
.cache_miss:
    push        rcx                             ; the set
    sub         rsp, 8
    call        .encode                         ; rax = ids (or ENOMEM)
    add         rsp, 8
    pop         rcx
    test        rax, rax
    js          .ret
    cmp         rax, RC_MAX_TOK
    ja          .ret
    vmovdqu     ymm0, [rcx]                     ; way 0 to way 1, the chunk
    vmovdqu     ymm1, [rcx + 32]                ; into way 0 (the least
    vmovdqu     [rcx + 64], ymm0                ; recently used goes)
    vmovdqu     [rcx + 96], ymm1
    lea         rdx, [mask_tab + 64]            ; the key again (ymm0 is
    sub         rdx, rk_n                       ; gone)
    vmovdqu     ymm1, [rdx]
    vpand       ymm0, ymm1, [rk_p]
    vmovdqu     [rcx + rcent.key], ymm0
    mov         [rcx + rcent.len], r13b
    mov         [rcx + rcent.ntok], al
    lea         rdx, [rax * 4]
    lea         rsi, [mask_tab + 64]
    sub         rsi, rdx
    vmovdqu     ymm1, [rsi]
    vpmaskmovd  ymm2, ymm1, [rk_out]            ; (no read past the ids)
    vpmaskmovd  [rcx + rcent.ids], ymm1, ymm2
    jmp         .ret
.uncached:
    call        .encode
.ret:
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret

; .encode: the chunk's ids into out, rax = their count or ASMBPE_ENOMEM
; (a local routine: rdi = the encoder on entry; the named registers as above)
.encode:
    mov         rdi, [rbx + rts.enc]
    test        qword [rdi + renc.flags], RF_WHOLE
    jz          .merge
    cmp         rk_n, CT_MAX_LEN
    ja          .long_token
    CT_KEY      rk_p, rk_n, r13d                ; a token of up to 15 bytes:
    KEY_HASH    xmm0, rcx                       ; in the thread's chunk table
    and         rcx, [rbx + rts.ctmask]         ; (the seed's entries never
    shl         rcx, CT_SHIFT                   ; leave it), one id
    add         rcx, [rbx + rts.ct]
    CT_PROBE    .in_table, .merge
.in_table:
    mov         eax, [rcx + ctent.ids]
    mov         edx, eax
    shr         edx, CT_NSHIFT
    cmp         edx, 1
    jne         .merge
    and         eax, 0x000FFFFF
    mov         [rk_out], eax
    mov         eax, 1
    ret
.long_token:                                    ; a longer token?  Not when
    mov         rdi, [rbx + rts.enc]            ; renc.reach16 says no token
    mov         r8, [rdi + renc.reach16]        ; of 16+ bytes starts with
    test        r8, r8                          ; these 16, or only shorter
    jz          .crc_probe                      ; ones (log R58)
    R16_FIND    rk_p, r8, .merge
    cmp         rax, rk_n
    jb          .merge
.crc_probe:
    CRC_BYTES   rk_p, rk_n, rax
    mov         rdi, [rbx + rts.enc]
    mov         r9, [rdi + renc.wmask]
    mov         r8d, eax
    and         r8, r9
    mov         rdx, [rdi + renc.wslots]
.wprobe:
    mov         r10d, [rdx + r8 * 8]            ; id
    cmp         r10d, NO_PRIO
    je          .merge                          ; not a token
    cmp         eax, [rdx + r8 * 8 + 4]
    jne         .wnext
    mov         rsi, [rdi + renc.tokoff]
    mov         r11, [rsi + r10 * 8]
    mov         rcx, [rsi + r10 * 8 + 8]
    sub         rcx, r11
    cmp         rcx, rk_n
    jne         .wnext
    add         r11, [rdi + renc.tokbytes]      ; compare its bytes, 8 at a
    xor         ecx, ecx                        ; time (both have padding
.wcmp:                                          ; after them)
    mov         rsi, [r11 + rcx]
    xor         rsi, [rk_p + rcx]
    push        rax
    mov         rax, rk_n
    sub         rax, rcx
    cmp         rax, 8
    jae         .wfull
    shl         eax, 3
    bzhi        rsi, rsi, rax
    pop         rax
    test        rsi, rsi
    jnz         .wnext
    jmp         .whole
.wfull:
    pop         rax
    test        rsi, rsi
    jnz         .wnext
    add         rcx, 8
    cmp         rcx, rk_n
    jb          .wcmp
.whole:
    mov         [rk_out], r10d
    mov         eax, 1
    ret
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
    cmp         rax, [rbx + rts.scrbytes]
    jbe         .scratch_ok
    push        rax
    mov         rdi, [rbx + rts.scratch]
    mov         rsi, [rbx + rts.scrbytes]
    test        rdi, rdi
    jz          .no_old
    call        asmbpe_unmap
    mov         qword [rbx + rts.scratch], 0
    mov         qword [rbx + rts.scrbytes], 0
.no_old:
    pop         rdi
    add         rdi, 4095
    and         rdi, ~4095
    push        rdi
    call        asmbpe_map
    pop         rdi
    test        rax, rax
    jz          .nomem
    mov         [rbx + rts.scratch], rax
    mov         [rbx + rts.scrbytes], rdi
.scratch_ok:
    mov         rk_s, [rbx + rts.scratch]
    mov         rdi, [rbx + rts.enc]
    mov         r8, [rdi + renc.slots]
    mov         r9, [rdi + renc.smask]
    mov         r10, [rdi + renc.shift]
    xor         ecx, ecx
.ids:                                           ; id[i] = the byte's id
    movzx       eax, byte [rk_p + rcx]
    mov         eax, [rdi + renc.byteid + rax * 4]
    mov         [rk_s + rcx * 4], eax
    inc         rcx
    cmp         rcx, rk_n
    jb          .ids
    cmp         rk_n, RK_SHORT
    ja          .long

    ;-------------------------------------------------------------------------
    ; short: the parts by their first byte i: id[i] at rk_s, the key and
    ; result[i] of the pair (i, next[i]) SP_STRIDE bytes apart, next[] and
    ; prev[] (u8) after them.  A pair's key is its priority << 7 | i (at
    ; least SP_NONE when there is none: NO_PRIO << 7 | i, or NO_PRIO), so
    ; the lowest key is the lowest priority, leftmost, and says where.  A
    ; part absorbed by its left neighbour keeps its place, its key NO_PRIO,
    ; and leaves the list: nothing moves, and the next merge is a vector
    ; minimum over the same ceil((n - 1) / 8) ymm words every time (keys
    ; n - 1 .. NO_PRIO) (log R53: the arrays shifted down after each merge
    ; and the search for the minimum's place cost a mispredicted loop end
    ; each)
    ;-------------------------------------------------------------------------
%define SP_STRIDE   (4 * (RK_SHORT + 16))
%define SP_PRIO     SP_STRIDE
%define SP_RES      (2 * SP_STRIDE)
%define SP_NEXT     (3 * SP_STRIDE)         ; u8 [RK_SHORT]: the next part
%define SP_PREV     (SP_NEXT + RK_SHORT)    ; u8 [RK_SHORT + 1]: the one before
%define SP_NW       (SP_PREV + RK_SHORT + 32)   ; ymm words of keys to scan
%define SP_KSHIFT   7                       ; key = priority << 7 | i
%define SP_NONE     0x80000000              ; (priorities are below 2^24)
%if RK_SHORT > (1 << SP_KSHIFT)
%error "rk_chunk's short path: RK_SHORT must fit the keys' place bits"
%endif
    xor         edi, edi
    mov         rsi, [rbx + rts.enc]
    mov         rsi, [rsi + renc.bp]
.sinit:                                         ; prio[i] of (id[i], id[i+1]):
    movzx       eax, word [rk_p + rdi]          ; two bytes, from renc.bp
    mov         rax, [rsi + rax * 8]
    mov         edx, eax
    shl         edx, SP_KSHIFT
    or          edx, edi
    mov         [rk_s + SP_PRIO + rdi * 4], edx
    shr         rax, 32
    mov         [rk_s + SP_RES + rdi * 4], eax
    inc         edi
    lea         eax, [edi + 1]
    cmp         rax, rk_n
    jb          .sinit
    vpcmpeqd    ymm0, ymm0, ymm0                ; prio[n - 1 .. n + 15]: none
    vmovdqu     [rk_s + SP_PRIO + rdi * 4], ymm0
    vmovdqu     [rk_s + SP_PRIO + rdi * 4 + 32], ymm0
    lea         eax, [edi + 7]
    shr         eax, 3
    mov         [rk_s + SP_NW], rax
%assign w 0
%rep RK_SHORT / 32
    vmovdqu     ymm0, [rk_iota8 + 1 + w]        ; next[i] = i + 1
    vmovdqu     [rk_s + SP_NEXT + w], ymm0
    vmovdqu     ymm0, [rk_iota8 - 1 + w]        ; prev[i] = i - 1
    vmovdqu     [rk_s + SP_PREV + w], ymm0
%assign w w + 32
%endrep
    mov         rk_m, rk_n                      ; parts
.sloop:                                         ; the lowest priority
    cmp         rk_m, 1
    jbe         .sdone
    mov         rcx, [rk_s + SP_NW]
    vpcmpeqd    ymm0, ymm0, ymm0                ; each lane's lowest key
    vpcmpeqd    ymm1, ymm1, ymm1                ; ... and its second lowest
    xor         edi, edi
.smin:
    vmovdqu     ymm2, [rk_s + SP_PRIO + rdi]
    vpmaxud     ymm3, ymm0, ymm2
    vpminud     ymm1, ymm1, ymm3
    vpminud     ymm0, ymm0, ymm2
    add         edi, 32
    dec         ecx
    jnz         .smin
    vmovdqa     ymm2, ymm0
    vmovdqa     ymm3, ymm1
    HMIN_U32    esi
    cmp         esi, SP_NONE
    jae         .sdone                          ; (no pair left)
    ; the merge after this one as things stand (the second lowest key): the
    ; lines of the two pairs it would look up prefetched, so that they come
    ; while this merge's own lookups are waited for (log R57)
    vpbroadcastd ymm0, xmm0
    vpcmpeqd    ymm1, ymm2, ymm0                ; (the lowest's lane: none)
    vpor        ymm2, ymm2, ymm1
    vpminud     ymm0, ymm2, ymm3
    HMIN_U32    eax
    cmp         eax, SP_NONE
    jae         .snext                          ; (none)
    and         eax, RK_SHORT - 1               ; k2, and what it would make
    mov         edx, [rk_s + SP_RES + rax * 4]
    movzx       edi, byte [rk_s + SP_NEXT + rax]
    movzx       edi, byte [rk_s + SP_NEXT + rdi]    ; the part after k2's next
    cmp         rdi, rk_n
    jae         .snext_left
    PF_PAIR     edx, [rk_s + rdi * 4]
.snext_left:
    test        eax, eax
    jz          .snext
    movzx       edi, byte [rk_s + SP_PREV + rax]
    PF_PAIR     [rk_s + rdi * 4], edx
.snext:
    and         esi, RK_SHORT - 1               ; k
    mov         edx, [rk_s + SP_RES + rsi * 4]  ; merge at k: k absorbs j
    mov         [rk_s + rsi * 4], edx
    movzx       edi, byte [rk_s + SP_NEXT + rsi]            ; j
    mov         dword [rk_s + SP_PRIO + rdi * 4], NO_PRIO   ; (j's pair gone)
    movzx       edi, byte [rk_s + SP_NEXT + rdi]            ; the part after j
    mov         [rk_s + SP_NEXT + rsi], dil
    mov         [rk_s + SP_PREV + rdi], sil
    dec         rk_m
    mov         dword [rk_s + SP_PRIO + rsi * 4], NO_PRIO
    cmp         rdi, rk_n
    jae         .sleft                          ; (none)
    PKEY        [rk_s + rsi * 4], [rk_s + rdi * 4]  ; the pair (k, after j)
    RPROBE_TS
    shl         eax, SP_KSHIFT
    or          eax, esi
    mov         [rk_s + SP_PRIO + rsi * 4], eax
    mov         [rk_s + SP_RES + rsi * 4], edx
.sleft:
    test        rsi, rsi                        ; the pair (before k, k): the
    jz          .sloop                          ; part at 0 is never absorbed
    movzx       edi, byte [rk_s + SP_PREV + rsi]
    PKEY        [rk_s + rdi * 4], [rk_s + rsi * 4]
    RPROBE_TS
    shl         eax, SP_KSHIFT
    or          eax, edi
    mov         [rk_s + SP_PRIO + rdi * 4], eax
    mov         [rk_s + SP_RES + rdi * 4], edx
    jmp         .sloop
.sdone:                                         ; the parts in order
    xor         ecx, ecx
    xor         edi, edi
.scopy:
    mov         eax, [rk_s + rdi * 4]
    mov         [rk_out + rcx * 4], eax
    inc         rcx
    movzx       edi, byte [rk_s + SP_NEXT + rdi]
    cmp         rdi, rk_n
    jb          .scopy
    mov         rax, rk_m
    ret

    ;-------------------------------------------------------------------------
    ; long: id[] at rk_s, then next[] (u32; n: the end), prev[] (u32; ~0:
    ; none), prio[] and result[] of the pair (i, next[i]) (NO_PRIO: none, or
    ; i is gone), then heap[] (r12; r15 entries) of u64 priority << 32 | i
    ;-------------------------------------------------------------------------
.long:
    lea         rax, [rk_s + rk_n * 4]
    mov         [rbx + rts.lnext], rax
    lea         rax, [rax + rk_n * 4]
    mov         [rbx + rts.lprev], rax
    lea         rax, [rax + rk_n * 4]
    mov         [rbx + rts.lprio], rax
    lea         rax, [rax + rk_n * 4]
    mov         [rbx + rts.lres], rax
    lea         r12, [rax + rk_n * 4 + 7]
    and         r12, ~7                         ; the heap
    xor         r15d, r15d
    xor         ecx, ecx
.linit:
    mov         rdx, [rbx + rts.lnext]
    lea         eax, [ecx + 1]
    mov         [rdx + rcx * 4], eax
    mov         rdx, [rbx + rts.lprev]
    lea         eax, [ecx - 1]
    mov         [rdx + rcx * 4], eax
    mov         rdx, [rbx + rts.lprio]
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
    mov         rcx, [rbx + rts.lprio]
    cmp         edx, [rcx + rsi * 4]
    jne         .lpop                           ; stale
    mov         rcx, [rbx + rts.lres]          ; merge (i, j = next[i])
    mov         eax, [rcx + rsi * 4]
    mov         [rk_s + rsi * 4], eax           ; id[i] = the result
    mov         rcx, [rbx + rts.lnext]
    mov         edi, [rcx + rsi * 4]            ; j
    mov         eax, [rcx + rdi * 4]            ; k = next[j]
    mov         [rcx + rsi * 4], eax            ; next[i] = k
    mov         rcx, [rbx + rts.lprio]
    mov         dword [rcx + rdi * 4], NO_PRIO  ; j is gone
    mov         dword [rcx + rsi * 4], NO_PRIO
    cmp         rax, rk_n
    jae         .lleft
    mov         rcx, [rbx + rts.lprev]
    mov         [rcx + rax * 4], esi            ; prev[k] = i
    mov         rdi, rsi
    push        rsi
    call        lk_pair                         ; (i, k)
    pop         rsi
.lleft:
    mov         rcx, [rbx + rts.lprev]
    mov         edi, [rcx + rsi * 4]            ; h = prev[i]
    cmp         edi, NO_PRIO
    je          .lpop
    call        lk_pair                         ; (h, i)
    jmp         .lpop
.ldone:
    xor         ecx, ecx                        ; the list from 0 (never
    xor         eax, eax                        ; merged away: only right
    mov         rdx, [rbx + rts.lnext]         ; ones are)
.lcopy:
    mov         r8d, [rk_s + rcx * 4]
    mov         [rk_out + rax * 4], r8d
    inc         rax
    mov         ecx, [rdx + rcx * 4]
    cmp         rcx, rk_n
    jb          .lcopy
    ret

.nomem:
    mov         rax, ASMBPE_ENOMEM
    ret

ENDPROC

;-----------------------------------------------------------------------------
; rk_merge: rk_chunk without the cache, for a chunk of 2+ bytes that the
; chunk table did not hold: the whole-token tables (RF_WHOLE), then merging.
; In and out as rk_chunk.
;-----------------------------------------------------------------------------
PROC rk_merge
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    mov         rk_p, rsi
    mov         rk_n, rdx
    mov         rk_out, rcx
    call        rk_chunk.encode
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret
ENDPROC


; lk_pair (long path): rdi = i, alive, next[i] < n: prio[i] and result[i]
; of the pair (i, next[i]), pushed onto the heap (r12, r15 entries) when it
; is one.  rbp = the scratch (id[]), rbx = the thread state, r8-r10 the
; pair table.  Keeps rdi; clobbers rax, rcx, rdx, rsi, r11.
lk_pair:
    mov         rcx, [rbx + rts.lnext]
    mov         esi, [rcx + rdi * 4]
    PKEY        [rk_s + rdi * 4], [rk_s + rsi * 4] ; the key
    RPROBE_TS
    mov         rcx, [rbx + rts.lprio]
    mov         [rcx + rdi * 4], eax
    cmp         eax, NO_PRIO
    je          .none
    mov         rcx, [rbx + rts.lres]
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
