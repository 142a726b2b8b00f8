;-----------------------------------------------------------------------------
; encode_rank_miss.asm — chunks the chunk table does not hold: rk_long (16..128
; bytes, through the long-chunk table), rk_sub_a / rk_sub_b (a rank file's
; misses merged from their substrings' ids)
; (the rank encoder: its layouts and macros in encode_rank.inc)
;-----------------------------------------------------------------------------
%include "encode_rank.inc"

extern mask_tab
extern asmbpe_remap
extern rk_merge
extern rk_split

section .rodata
align 64
; sub_lane: for each lane s of 0..15, 16 dwords (ymm2 | ymm3 of rk_sub_b):
; all ones in lane s, zero elsewhere; before it a row of zeros (lane -1: no
; lane)
    times 16 dd 0
sub_lane:
%assign s 0
%rep 16
%assign l 0
%rep 16
%if l == s
    dd          0xFFFFFFFF
%else
    dd          0
%endif
%assign l l + 1
%endrep
%assign s s + 1
%endrep

align 32
sub_iota:   dd 0, 1, 2, 3, 4, 5, 6, 7           ; rk_sub_a: the lanes' starts
            dd 8, 9, 10, 11, 12, 13, 14, 15
sub_key:                                        ; rk_sub_b: (i + 1) << 4 | i
%assign i 0
%rep 16
            dd ((i + 1) << 4) | i
%assign i i + 1
%endrep

; sub_pos: for each 8-bit mask, the numbers of its set bits as bytes, in
; order from byte 0 (rk_sub_a's list)
align 64
sub_pos:
%assign m 0
%rep 256
%assign q 0
%assign k 0
%assign bit 0
%rep 8
%if (m >> bit) & 1
%assign q q | (bit << (8 * k))
%assign k k + 1
%endif
%assign bit bit + 1
%endrep
    dq          q
%assign m m + 1
%endrep

section .text

;-----------------------------------------------------------------------------
; rk_long: rbx = a thread state, rsi = a chunk of more than CT_MAX_LEN bytes
; (PAD readable after it), rdx = its length, rcx = out (room for rdx ids),
; eax = LT_CRC of it when it has at most LT_MAX_LEN bytes (rk_doc's pass A
; computes it and prefetches the chunk's home entry by it: log R54).
; Up to LT_MAX_LEN bytes: looked up in the thread's long-chunk table (by
; the crc of its bytes, then the bytes compared), else encoded (rk_split,
; or rk_merge) and put there; longer ones only encoded.  Out: rax = ids
; written, or ASMBPE_ENOMEM.  Keeps rbx, rbp, r12-r15; clobbers the other
; registers and ymm0-ymm11.
;-----------------------------------------------------------------------------
PROC rk_long
    cmp         rdx, LT_MAX_LEN
    ja          rk_merge                        ; (a tail call)
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    mov         rk_p, rsi
    mov         rk_n, rdx
    mov         rk_out, rcx
    mov         r15d, eax                       ; the crc
    mov         rbp, [rbx + rts.lt]
    mov         r8d, eax
    and         r8, [rbx + rts.ltmask]          ; its home entry
.probe:
    mov         rdi, r8
    shl         rdi, 4
    add         rdi, rbp
    movzx       eax, word [rdi + ltent.len]
    test        eax, eax
    jz          .miss
    cmp         eax, r13d
    jne         .next
    cmp         r15d, [rdi + ltent.crc]
    jne         .next
    movzx       r9d, word [rdi + ltent.ntok]    ; compare the bytes, 32 at
    mov         esi, [rdi + ltent.off]          ; a time
    add         rsi, [rbx + rts.ltarena]        ; its ids
    lea         r10, [rsi + r9 * 4]             ; its bytes
    xor         ecx, ecx
.cmp:
    vmovdqu     ymm0, [r10 + rcx]
    vpcmpeqb    ymm0, ymm0, [rk_p + rcx]
    vpmovmskb   eax, ymm0
    not         eax
    mov         rdx, rk_n
    sub         rdx, rcx
    cmp         rdx, 32
    jae         .cmp_full
    bzhi        eax, eax, edx
.cmp_full:
    test        eax, eax
    jnz         .next
    add         rcx, 32
    cmp         rcx, rk_n
    jb          .cmp
    mov         rax, r9                         ; a hit: its ids
    lea         rdx, [r9 * 4 + 28]
    and         rdx, ~31                        ; (whole 32-byte words)
    lea         rcx, [rk_out + rdx]
    cmp         rcx, [rbx + rts.outlim]
    ja          .hit_ids
    xor         ecx, ecx
.hit_words:
    vmovdqu     ymm0, [rsi + rcx]
    vmovdqu     [rk_out + rcx], ymm0
    add         rcx, 32
    cmp         rcx, rdx
    jb          .hit_words
    jmp         .ret
.hit_ids:
    xor         ecx, ecx
.hit_id:
    mov         edx, [rsi + rcx * 4]
    mov         [rk_out + rcx * 4], edx
    inc         rcx
    cmp         rcx, r9
    jb          .hit_id
    jmp         .ret
.next:
    inc         r8
    and         r8, [rbx + rts.ltmask]
    jmp         .probe
.miss:                                          ; rdi = the empty entry
    push        rdi
    sub         rsp, 8
    mov         rsi, rk_p
    mov         rdx, rk_n
    mov         rcx, rk_out
    call        rk_split                        ; (keeps rbp, r12-r15)
    add         rsp, 8
    pop         rdi
    test        rax, rax
    js          .ret
    mov         rcx, [rbx + rts.ltmask]         ; room for it?
    shr         rcx, 3
    lea         rcx, [rcx + rcx * 4]            ; (5/8 of the entries)
    cmp         rcx, [rbx + rts.ltfill]
    jbe         .grow
    mov         rcx, [rbx + rts.ltfill]
    mov         rdx, [rbx + rts.ltpos]
    lea         rsi, [rdx + rax * 4]
    add         rsi, rk_n
    add         rsi, 3
    and         rsi, ~3                         ; the arena's use after it
    lea         r8, [rsi + 64]
    cmp         r8, [rbx + rts.ltacap]
    ja          .grow_arena
    inc         rcx
    mov         [rbx + rts.ltfill], rcx
    mov         [rbx + rts.ltpos], rsi
    mov         [rdi + ltent.crc], r15d
    mov         [rdi + ltent.len], r13w
    mov         [rdi + ltent.ntok], ax
    mov         [rdi + ltent.off], edx
    mov         rsi, [rbx + rts.ltarena]
    add         rsi, rdx                        ; its ids, then its bytes
    xor         ecx, ecx
.put_id:
    mov         edx, [rk_out + rcx * 4]
    mov         [rsi + rcx * 4], edx
    inc         rcx
    cmp         rcx, rax
    jb          .put_id
    lea         rsi, [rsi + rax * 4]
    xor         ecx, ecx
.put_bytes:
    vmovdqu     ymm0, [rk_p + rcx]              ; (PAD after the chunk; the
    vmovdqu     [rsi + rcx], ymm0               ; arena's slack after its
    add         rcx, 32                         ; end)
    cmp         rcx, rk_n
    jb          .put_bytes
    jmp         .ret
.grow:                                          ; the table full: doubled
    push        rax                             ; (its entries put again;
    mov         rcx, [rbx + rts.enc]            ; this chunk is not put)
    test        qword [rcx + renc.flags], RF_NOGROW
    jnz         .reset
    mov         rcx, [rbx + rts.ltmask]
    cmp         rcx, (1 << LT_MAX_BITS) - 1
    jae         .reset
    lea         rdi, [rcx * 2 + 2]
    shl         rdi, 4
    call        asmbpe_map
    test        rax, rax
    jz          .reset
    mov         r14, rax                        ; (out is no longer needed)
    mov         r12, [rbx + rts.ltmask]
    lea         r13, [r12 * 2 + 1]              ; the new mask
    mov         rsi, rbp
    lea         rcx, [r12 + 1]
    shl         rcx, 4
    add         rcx, rbp                        ; the old table's end
.rehash:
    cmp         word [rsi + ltent.len], 0
    je          .rh_next
    mov         edx, [rsi + ltent.crc]
.rh_probe:
    and         rdx, r13
    mov         rax, rdx
    shl         rax, 4
    cmp         word [r14 + rax + ltent.len], 0
    je          .rh_put
    inc         rdx
    jmp         .rh_probe
.rh_put:
    vmovdqu     xmm0, [rsi]
    vmovdqu     [r14 + rax], xmm0
.rh_next:
    add         rsi, 16
    cmp         rsi, rcx
    jb          .rehash
    mov         rdi, rbp
    lea         rsi, [r12 + 1]
    shl         rsi, 4
    call        asmbpe_unmap
    mov         [rbx + rts.lt], r14
    mov         [rbx + rts.ltmask], r13
    pop         rax
    jmp         .ret
.grow_arena:                                    ; the arena full: doubled
    push        rax                             ; (mremap; entries keep
    mov         rsi, [rbx + rts.enc]            ; their offsets)
    test        qword [rsi + renc.flags], RF_NOGROW
    jnz         .reset
    mov         rsi, [rbx + rts.ltacap]
    cmp         rsi, LT_ARENA_MAX
    jae         .reset
    mov         rdi, [rbx + rts.ltarena]
    lea         rdx, [rsi * 2]
    call        asmbpe_remap
    test        rax, rax
    jz          .reset
    mov         [rbx + rts.ltarena], rax
    shl         qword [rbx + rts.ltacap], 1
    pop         rax
    jmp         .ret
.reset:                                         ; at their largest: both
    mov         rdi, [rbx + rts.lt]             ; emptied (this chunk is
    mov         rcx, [rbx + rts.ltmask]         ; not put; rax pushed)
    inc         rcx
    shl         rcx, 4
    xor         eax, eax
    rep stosb
    mov         qword [rbx + rts.ltfill], 0
    mov         qword [rbx + rts.ltpos], 0
    pop         rax
.ret:
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret
ENDPROC

;-----------------------------------------------------------------------------
; rk_sub_a, rk_sub_b: the ids of a chunk of 2..CT_MAX_LEN bytes that is not
; a token (PAD readable after it), only with RF_RANKS: a pair's priority is
; the id of its bytes, so the ids of every substring are looked up in the
; thread's chunk table and the merges (tiktoken's: the lowest, leftmost
; first) then read the matrix rts.srank only.  In two halves, so that the
; lookups of many chunks overlap (rk_doc runs rk_sub_a on each missed chunk
; of a batch, then rk_sub_b on each):
;
; rk_sub_a: rbx = a thread state, rsi = the chunk, rdx = its length, rdi =
; a workspace.  Each substring of 3+ bytes whose filter bit is set (the
; others are no token): its key, home entry (prefetched) and place in
; srank, one rkrec each from workspace + 32, their count at workspace + 0
; (a workspace is 32-byte aligned).  Out: rax = the workspace's end (the
; next one's start).
; Keeps rbx, rbp, r12-r15; clobbers the other registers and ymm0-ymm11.
;-----------------------------------------------------------------------------

; SUB_STEP h, bytes: h (the hashes of 8 starts' substrings, one per dword
; lane) extended by one byte each: lane i's from the byte at bytes + i.
; Needs ymm4 = ROLL_K, ymm5 = -1 in each lane; clobbers ymm0.
%macro SUB_STEP 2
    vpmovzxbd   ymm0, %2
    vpaddd      %1, %1, ymm0
    vpsubd      %1, %1, ymm5                    ; (+ 1)
    vpmulld     %1, %1, ymm4
%endmacro

; SUB_BITS h, out, lanes: out (a 32-bit register) = a bit per dword lane of
; h: its filter bit (r10 = renc.bloom); only the lanes whose dword in %3
; (their starts) is below ymm9's (n - L + 1) are read, the others' bits
; are garbage.  Needs ymm6 = 31 in each lane; clobbers ymm0, ymm1, ymm7,
; ymm8.
%macro SUB_BITS 3
    vpsrld      ymm0, %1, 32 - BLOOM_BITS       ; the bit numbers
    vpsrld      ymm1, ymm0, 5                   ; their dwords
    vpcmpgtd    ymm7, ymm9, %3                  ; (the starts that fit)
    vpgatherdd  ymm8, [r10 + ymm1 * 4], ymm7
    vpandn      ymm0, ymm0, ymm6                ; 31 - bit % 32
    vpsllvd     ymm8, ymm8, ymm0                ; the bit to the sign
    vmovmskps   %2, ymm8
%endmacro

; SUB_APPEND add: the starts of the bits of eax (8 lanes) appended to the
; list at rdi as bytes L << 4 | i (%1 = a 64-bit register: L times 0x10 in
; each byte, plus 8 in each byte for starts 8..15), without a branch.
; Needs r14 = sub_pos; clobbers rax, rdx.
%macro SUB_APPEND 1
    mov         rdx, [r14 + rax * 8]            ; the set lanes' numbers
    add         rdx, %1
    mov         [rdi], rdx
    popcnt      eax, eax
    add         rdi, rax
%endmacro

PROC rk_sub_a
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    mov         rk_p, rsi
    mov         rk_n, rdx
    mov         rk_s, rdi                       ; the workspace
    mov         rax, [rbx + rts.enc]
    mov         r10, [rax + renc.bloom]
    lea         r14, [sub_pos]
    ; pass 1: by length L, the hashes of [i, i + L) for 8 starts i at once
    ; (one per dword lane: ymm2 starts 0..7, ymm3 8..15 while L <= n - 8),
    ; each from that of [i, i + L - 1); for L >= 3 the starts that fit (i +
    ; L <= n) whose filter bit is set, appended to the list rts.sclist
    vpxor       xmm2, xmm2, xmm2
    vpxor       xmm3, xmm3, xmm3
    mov         eax, ROLL_K
    vmovd       xmm4, eax
    vpbroadcastd ymm4, xmm4
    vpcmpeqd    ymm5, ymm5, ymm5                ; -1
    vpsrld      ymm6, ymm5, 27                  ; 31
    SUB_STEP    ymm2, [rk_p]                    ; L = 1, 2
    SUB_STEP    ymm3, [rk_p + 8]
    SUB_STEP    ymm2, [rk_p + 1]
    SUB_STEP    ymm3, [rk_p + 9]
    lea         rdi, [rbx + rts.sclist]
    vmovdqa     ymm10, [sub_iota]               ; starts 0..7
    vmovdqa     ymm11, [sub_iota + 32]          ; 8..15
    lea         eax, [r13 - 2]
    vmovd       xmm9, eax
    vpbroadcastd ymm9, xmm9                     ; n - L + 1 (L = 3)
    mov         r8d, 3                          ; L
    mov         r11, 0x3030303030303030         ; L << 4 in each byte
    mov         r15, 0x0808080808080808
.both:                                          ; L <= n - 8: both halves
    lea         rax, [r8 + 8]
    cmp         rax, rk_n
    ja          .low
    SUB_STEP    ymm2, [rk_p + r8 - 1]
    SUB_STEP    ymm3, [rk_p + r8 + 7]
    SUB_BITS    ymm2, eax, ymm10                ; (every low start fits)
    SUB_APPEND  r11
    SUB_BITS    ymm3, eax, ymm11
    mov         ecx, r13d
    sub         ecx, r8d
    sub         ecx, 7                          ; high starts that fit
    bzhi        eax, eax, ecx
    lea         rcx, [r11 + r15]
    SUB_APPEND  rcx
    inc         r8
    mov         rax, 0x1010101010101010
    add         r11, rax
    vpaddd      ymm9, ymm9, ymm5
    jmp         .both
.low:                                           ; starts 0..7 only
    cmp         r8, rk_n
    ja          .listed
    SUB_STEP    ymm2, [rk_p + r8 - 1]
    SUB_BITS    ymm2, eax, ymm10
    mov         ecx, r13d
    sub         ecx, r8d
    inc         ecx                             ; starts that fit: n - L + 1
    bzhi        eax, eax, ecx
    SUB_APPEND  r11
    inc         r8
    mov         rax, 0x1010101010101010
    add         r11, rax
    vpaddd      ymm9, ymm9, ymm5
    jmp         .low
.listed:
    ; pass 1b: each listed substring's key, home entry (prefetched) and
    ; place in srank (L * 16 + i), into the workspace
    mov         r10, rdi                        ; the list's end
    lea         r9, [rbx + rts.sclist]
    lea         rdi, [rk_s + 32]
.key:
    cmp         r9, r10
    jae         .keyed
    movzx       r8d, byte [r9]
    inc         r9
    mov         [rdi + rkrec.free], r8          ; its place in srank: L * 16 + i
    mov         esi, r8d
    and         esi, 15                         ; i
    shr         r8d, 4                          ; L
    add         rsi, rk_p
    CT_KEY      rsi, r8, r8d
    vmovdqa     [rdi + rkrec.key], xmm0
    KEY_HASH    xmm0, rcx
    and         rcx, [rbx + rts.ctmask]
    shl         rcx, CT_SHIFT
    add         rcx, [rbx + rts.ct]
    mov         [rdi + rkrec.home], rcx
    prefetcht0  [rcx]
    add         rdi, rkrec_size
    jmp         .key
.keyed:
    mov         rax, rdi
    sub         rax, rk_s
    shr         rax, 5                          ; (rkrec_size)
    dec         rax
    mov         [rk_s], rax                     ; the records
    mov         rax, rdi                        ; the end (32-byte aligned)
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret
ENDPROC

;-----------------------------------------------------------------------------
; rk_sub_b: rbx = a thread state, rsi = the chunk, rdx = its length, rcx =
; out (room for rdx ids), rdi = its workspace from rk_sub_a (the table
; unchanged since, but for chunks put in it).  Out: rax = ids written.
; Keeps rbx, rbp, r12-r15; clobbers the other registers and ymm0-ymm7.
;-----------------------------------------------------------------------------
; SUB_LANE lane, key: lane `lane` (a 32-bit register, -1..15; -1: none)
; of ymm2 / ymm3 = key (a 32-bit register).  Needs r9 = sub_lane; clobbers
; rdx, ymm0, ymm1.
%macro SUB_LANE 2
    vmovd       xmm0, %2
    vpbroadcastd ymm0, xmm0
    movsxd      rdx, %1
    shl         rdx, 6
    vmovdqa     ymm1, [r9 + rdx]
    vpblendvb   ymm2, ymm2, ymm0, ymm1
    vmovdqa     ymm1, [r9 + rdx + 32]
    vpblendvb   ymm3, ymm3, ymm0, ymm1
%endmacro

PROC rk_sub_b
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    mov         rk_p, rsi
    mov         rk_n, rdx
    mov         rk_out, rcx
    mov         rk_s, rdi
    ; srank's rows L = 3..15 "none" first; then the pairs of bytes (i, i + 1)
    ; from renc.bp (gathered, 8 at a time: RF_RANKS, priority = id) into
    ; row 2 and as the first keys into ymm2 (starts 0..7) / ymm3 (8..15)
    vpcmpeqd    ymm0, ymm0, ymm0
%assign row 3
%rep CT_MAX_LEN - 2
    vmovdqu     [rbx + rts.srank + row * 64], ymm0
    vmovdqu     [rbx + rts.srank + row * 64 + 32], ymm0
%assign row row + 1
%endrep
    mov         rdi, [rbx + rts.enc]
    mov         rsi, [rdi + renc.bp]
    vpmovzxbd   ymm0, [rk_p]
    vpmovzxbd   ymm1, [rk_p + 1]
    vpslld      ymm1, ymm1, 8
    vpor        ymm0, ymm0, ymm1                ; b[i] | b[i + 1] << 8
    vpcmpeqd    ymm7, ymm7, ymm7
    vpgatherdd  ymm2, [rsi + ymm0 * 8], ymm7
    vpmovzxbd   ymm0, [rk_p + 8]                ; (past the chunk: PAD, and
    vpmovzxbd   ymm1, [rk_p + 9]                ; lanes that are no pair)
    vpslld      ymm1, ymm1, 8
    vpor        ymm0, ymm0, ymm1
    vpcmpeqd    ymm7, ymm7, ymm7
    vpgatherdd  ymm3, [rsi + ymm0 * 8], ymm7
    vmovdqu     [rbx + rts.srank + 2 * 64], ymm2 ; row 2
    vmovdqu     [rbx + rts.srank + 2 * 64 + 32], ymm3
    vpslld      ymm2, ymm2, 8                   ; keys: priority << 8 | (i + 1)
    vpslld      ymm3, ymm3, 8                   ; << 4 | i
    vpor        ymm2, ymm2, [sub_key]
    vpor        ymm3, ymm3, [sub_key + 32]
    vmovdqa     ymm4, [sub_iota]
    vmovdqa     ymm5, [sub_iota + 32]
    lea         eax, [r13 - 2]
    vmovd       xmm0, eax
    vpbroadcastd ymm0, xmm0                     ; the last pair: n - 2
    vpcmpgtd    ymm1, ymm4, ymm0
    vpor        ymm2, ymm2, ymm1                ; (lanes past it: none)
    vpcmpgtd    ymm1, ymm5, ymm0
    vpor        ymm3, ymm3, ymm1
    ; pass 2: each record probed, its id (one-id entries: tokens) into srank
    mov         r8, [rk_s]
    shl         r8, 5
    lea         rdi, [rk_s + 32]
    add         r8, rdi                         ; the records' end
.look:
    cmp         rdi, r8
    jae         .looked
    mov         rcx, [rdi + rkrec.home]
    vmovdqa     xmm0, [rdi + rkrec.key]
    CT_PROBE    .found, .none
.found:
    mov         eax, [rcx + ctent.ids]
    mov         edx, eax
    shr         edx, CT_NSHIFT
    and         eax, 0x000FFFFF
    cmp         edx, 1
    je          .put
.none:
    mov         eax, NO_PRIO
.put:
    mov         rdx, [rdi + rkrec.free]
    mov         [rbx + rts.srank + rdx * 4], eax
    add         rdi, rkrec_size
    jmp         .look
.looked:
    ; the parts: r15 = a mask of their starts (bit n set too, the end); a
    ; lane s of ymm2 (starts 0..7) / ymm3 (8..15) holds the key of the pair
    ; of the parts starting at s and at the next start t: the id of [s, u)
    ; << 8 | t << 4 | s (u the start after t), so the lowest key is the
    ; lowest priority, leftmost, and names both parts; 2^28 or more: no
    ; pair (the last part, starts that are gone).  Each merge: a vector
    ; minimum, then three lanes changed (SUB_LANE); nothing moves
    mov         ecx, 2
    shlx        r15d, ecx, r13d
    dec         r15d                            ; bits 0..n
    lea         r9, [sub_lane]
.merge:
    vpminud     ymm0, ymm2, ymm3
    HMIN_U32    eax                             ; the lowest key
    cmp         eax, 1 << 28
    jae         .merged                         ; (no pair left)
    mov         esi, eax
    and         esi, 15                         ; k
    shr         eax, 4
    and         eax, 15                         ; t: it goes
    mov         ecx, -2                         ; the starts after t
    shlx        ecx, ecx, eax
    and         ecx, r15d
    btr         r15d, eax
    shl         eax, 6
    vpor        ymm2, ymm2, [r9 + rax]          ; (lane t: none)
    vpor        ymm3, ymm3, [r9 + rax + 32]
    imul        edi, esi, 15
    tzcnt       r8d, ecx                        ; u: k's next part now
    blsr        ecx, ecx
    tzcnt       edx, ecx                        ; w: the part after u (32:
    shl         edx, 4                          ; none, u is the end)
    sub         edx, edi                        ; ((w - k) * 16 + k)
    and         edx, 255                        ; (in srank when u is the end)
    mov         eax, [rbx + rts.srank + rdx * 4] ; [k, w)
    shl         eax, 8
    mov         edx, r8d
    shl         edx, 4
    or          edx, esi
    or          eax, edx                        ; its key: ... | u << 4 | k
    mov         edx, -1                         ; (k the last part: none)
    cmp         r8, rk_n
    cmovae      eax, edx
    SUB_LANE    esi, eax
    bzhi        ecx, r15d, esi                  ; the part before k: p, or -1
    lzcnt       ecx, ecx                        ; when k is the first (its
    neg         ecx                             ; lane -1: sub_lane's row
    add         ecx, 31                         ; before lane 0, no lane)
    mov         eax, r8d
    sub         eax, ecx
    shl         eax, 4
    add         eax, ecx
    and         eax, 255
    mov         eax, [rbx + rts.srank + rax * 4] ; [p, u)
    shl         eax, 8
    shl         esi, 4
    or          esi, ecx
    or          eax, esi                        ; its key: ... | k << 4 | p
    SUB_LANE    ecx, eax
    jmp         .merge
.merged:                                        ; each part's id
    mov         rdi, [rbx + rts.enc]
    xor         ecx, ecx                        ; ids
    mov         r9d, r15d
.out:
    tzcnt       edx, r9d                        ; a part's start
    btr         r9d, edx
    tzcnt       esi, r9d                        ; the next one's
    cmp         rsi, rk_n
    ja          .outed
    lea         eax, [edx + 1]
    cmp         eax, esi
    jne         .token
    movzx       eax, byte [rk_p + rdx]          ; one byte
    mov         eax, [rdi + renc.byteid + rax * 4]
    jmp         .emit
.token:
    sub         esi, edx
    shl         esi, 4
    add         esi, edx
    mov         eax, [rbx + rts.srank + rsi * 4] ; [s, t)
.emit:
    mov         [rk_out + rcx * 4], eax
    inc         ecx
    jmp         .out
.outed:
    mov         eax, ecx
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret
ENDPROC
