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

section .text

;-----------------------------------------------------------------------------
; rk_long: rbx = a thread state, rsi = a chunk of more than CT_MAX_LEN bytes
; (PAD readable after it), rdx = its length, rcx = out (room for rdx ids).
; Up to LT_MAX_LEN bytes: looked up in the thread's long-chunk table (by
; the crc of its bytes, then the bytes compared), else encoded (rk_merge)
; and put there; longer ones only encoded.  Out: rax = ids written, or
; ASMBPE_ENOMEM.  Keeps rbx, rbp, r12-r15; clobbers the other registers
; and ymm0-ymm3.
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
    mov         eax, edx                        ; crc32c of the bytes, seeded
    xor         ecx, ecx                        ; with the length, 8 at a
.crc:                                           ; time, the last 1..8 from
    lea         rdx, [rcx + 8]                  ; a qword cut to them
    cmp         rdx, rk_n
    ja          .crc_tail
    crc32       rax, qword [rk_p + rcx]
    mov         rcx, rdx
    cmp         rcx, rk_n
    jb          .crc
    jmp         .crc_done
.crc_tail:
    mov         rdx, [rk_p + rcx]
    mov         r8, rk_n
    sub         r8, rcx
    shl         r8d, 3
    bzhi        rdx, rdx, r8
    crc32       rax, rdx
.crc_done:
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
; Keeps rbx, rbp, r12-r15; clobbers the other registers and xmm0-xmm1.
;-----------------------------------------------------------------------------
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
    ; pass 1: the filter bit of each substring of 3+ bytes (by start i, then
    ; end j; the hash of [i, j + 1) from that of [i, j)): {i, j} of those
    ; whose bit is set into scand
    lea         rdi, [rbx + rts.scand]
    mov         r11, ROLL_K
    xor         r9d, r9d                        ; i
.start:
    lea         rax, [r9 + 3]
    cmp         rax, rk_n
    ja          .filtered
    movzx       eax, byte [rk_p + r9]
    lea         rcx, [rax + 1]
    imul        rcx, r11
    movzx       eax, byte [rk_p + r9 + 1]
    lea         rcx, [rcx + rax + 1]
    imul        rcx, r11
    lea         r8, [r9 + 2]                    ; j: the substring's last byte
.byte_end:
    movzx       eax, byte [rk_p + r8]
    lea         rcx, [rcx + rax + 1]
    imul        rcx, r11                        ; the hash of [i, j + 1)
    inc         r8
    mov         rax, rcx
    shr         rax, 64 - BLOOM_BITS
    mov         edx, eax
    shr         edx, 5
    mov         edx, [r10 + rdx * 4]
    mov         [rdi], r9
    mov         [rdi + 8], r8
    bt          edx, eax
    setc        al
    movzx       eax, al
    shl         eax, 4
    add         rdi, rax                        ; kept when maybe a token
    cmp         r8, rk_n
    jb          .byte_end
    inc         r9
    jmp         .start
.filtered:
    ; pass 1b: each kept substring's key and home entry (prefetched), its
    ; place in srank, into the workspace
    mov         r10, rdi                        ; the candidates' end
    lea         r9, [rbx + rts.scand]
    lea         rdi, [rk_s + 32]
.key:
    cmp         r9, r10
    jae         .keyed
    mov         rsi, [r9]                       ; i
    mov         r8, [r9 + 8]                    ; j
    mov         rax, rsi
    shl         rax, 4
    add         rax, r8
    mov         [rdi + rkrec.free], rax         ; i * 16 + j
    sub         r8, rsi                         ; L
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
    add         r9, 16
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
; Keeps rbx, rbp, r12-r15; clobbers the other registers and ymm0-ymm3.
;-----------------------------------------------------------------------------
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
    ; every id in srank "none" first; substrings of 2 bytes from renc.bp
    vpcmpeqd    ymm0, ymm0, ymm0
    xor         ecx, ecx
.none_all:
    vmovdqu     [rbx + rts.srank + rcx], ymm0
    add         ecx, 32
    cmp         ecx, 1024
    jb          .none_all
    mov         rdi, [rbx + rts.enc]
    mov         rsi, [rdi + renc.bp]
    xor         ecx, ecx
.two:
    movzx       eax, word [rk_p + rcx]
    mov         eax, [rsi + rax * 8]            ; (RF_RANKS: priority = id)
    imul        edx, ecx, 17
    mov         [rbx + rts.srank + rdx * 4 + 8], eax ; [i][i + 2]
    inc         ecx
    lea         eax, [ecx + 2]
    cmp         rax, rk_n
    jbe         .two
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
    ; the parts: r15 = a mask of their starts (bit n set too, the end);
    ; spr[s] = the priority of the pair of the parts starting at s and at
    ; the next start t, srank[s][u] (u the start after t), NO_PRIO for the
    ; last part and for starts that are gone; nothing moves as parts merge
    mov         ecx, 2
    shlx        r15d, ecx, r13d
    dec         r15d                            ; bits 0..n
    xor         ecx, ecx
.init_pr:
    imul        edx, ecx, 17
    mov         eax, [rbx + rts.srank + rdx * 4 + 8] ; [k][k + 2]
    mov         [rbx + rts.spr + rcx * 4], eax
    inc         ecx
    lea         eax, [ecx + 2]
    cmp         rax, rk_n
    jbe         .init_pr
    mov         dword [rbx + rts.spr + rcx * 4], NO_PRIO ; (the last part)
.merge:
    mov         eax, NO_PRIO                    ; the lowest, leftmost
    xor         edi, edi
    xor         esi, esi
    lea         rcx, [rk_n - 1]                 ; (every start that may have
.scan:                                          ; a pair)
    mov         edx, [rbx + rts.spr + rdi * 4]
    cmp         edx, eax
    cmovb       eax, edx
    cmovb       esi, edi
    inc         edi
    cmp         rdi, rcx
    jb          .scan
    cmp         eax, NO_PRIO
    je          .merged
    mov         ecx, -2                         ; the starts after k
    shlx        ecx, ecx, esi
    and         ecx, r15d
    tzcnt       edx, ecx                        ; t: it goes
    btr         r15d, edx
    mov         dword [rbx + rts.spr + rdx * 4], NO_PRIO
    btr         ecx, edx
    tzcnt       r8d, ecx                        ; u: k's next part now
    mov         dword [rbx + rts.spr + rsi * 4], NO_PRIO
    cmp         r8, rk_n
    jae         .left                           ; (k is the last part)
    btr         ecx, r8d
    tzcnt       edx, ecx                        ; w: the part after u
    mov         eax, esi
    shl         eax, 4
    add         eax, edx
    mov         eax, [rbx + rts.srank + rax * 4] ; [k][w]
    mov         [rbx + rts.spr + rsi * 4], eax
.left:
    test        esi, esi                        ; the part before k: p
    jz          .merge
    bzhi        ecx, r15d, esi
    bsr         ecx, ecx
    mov         eax, ecx
    shl         eax, 4
    add         eax, r8d
    mov         eax, [rbx + rts.srank + rax * 4] ; [p][u]
    mov         [rbx + rts.spr + rcx * 4], eax
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
    shl         edx, 4
    add         edx, esi
    mov         eax, [rbx + rts.srank + rdx * 4]
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
