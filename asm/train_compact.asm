;-----------------------------------------------------------------------------
; train_compact.asm — BPE training: the layout of W between merges.  segments
; cuts the words into the runs the threads claim (tctx.seg); compact drops
; the dead positions rewrites left (coordinate, train_merge.asm, calls it when
; half of W is dead) and then redoes the segments and the chunk filters;
; bloom_build builds the chunk filters and the chunk -> word index (tctx.cw)
; that scan_segment (train_scan.asm) reads.  asmbpe_train calls segments and
; bloom_build once W is laid out.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "train.inc"

section .text

;=============================================================================
; layout helpers: segments and compaction
;=============================================================================

; segments: rdi = ctx.  Splits the words into tctx.nseg runs of about equal
; positions: SEGS_PER_THREAD per thread (at most MAX_THREADS), claimed by
; the threads one at a time each merge so uneven rewrite work evens out.
; Keeps rdi.  Clobbers rax, rcx, rdx, rsi, r8-r11.
PROC segments
    mov         r8, [rdi + tctx.nth]
    cmp         r8, 1
    je          .nseg
    shl         r8, 3                           ; x SEGS_PER_THREAD
    mov         eax, MAX_THREADS
    cmp         r8, rax
    cmova       r8, rax
.nseg:
    mov         [rdi + tctx.nseg], r8d
    mov         r9, [rdi + tctx.nw]
    mov         r10, [rdi + tctx.ws]
    mov         qword [rdi + tctx.seg], 0
    mov         [rdi + tctx.seg + r8 * 8], r9
    mov         r11d, 1
.each:
    cmp         r11, r8
    jae         .ret
    mov         rax, [rdi + tctx.wlen]
    mul         r11
    div         r8                              ; bound
    mov         rsi, rax
    xor         eax, eax                        ; first k with WS[k] >= bound
    mov         rcx, r9
.bs:
    cmp         rax, rcx
    jae         .have
    lea         rdx, [rax + rcx]
    shr         rdx, 1
    cmp         [r10 + rdx * 8], rsi
    jae         .left
    lea         rax, [rdx + 1]
    jmp         .bs
.left:
    mov         rcx, rdx
    jmp         .bs
.have:
    mov         [rdi + tctx.seg + r11 * 8], rax
    inc         r11
    jmp         .each
.ret:
    ret
ENDPROC

; compact: rdi = ctx.  Drops the SEP padding left by rewrites and the words
; down to one token (they have no pairs), moving the rest to the front.
; Keeps rdi.
PROC compact
    SAVE        rbx, r12
    mov         rbx, rdi
    mov         r8, [rbx + tctx.w]
    mov         r9, [rbx + tctx.ws]
    mov         r10, [rbx + tctx.wc]
    xor         r11d, r11d                      ; k (read)
    xor         r12d, r12d                      ; words kept
    mov         ecx, 1                          ; write position (W[0] = SEP)
.word:
    cmp         r11, [rbx + tctx.nw]
    jae         .done
    mov         rsi, [r9 + r11 * 8]             ; s
    mov         rdx, rsi
.len:
    cmp         word [r8 + rdx * 2], SEP
    je          .have_len
    inc         rdx
    jmp         .len
.have_len:
    sub         rdx, rsi                        ; len
    cmp         rdx, 2
    jb          .skip
    mov         [r9 + r12 * 8], rcx
    mov         rax, [r10 + r11 * 8]
    mov         [r10 + r12 * 8], rax
    inc         r12
.move:                                          ; forward copy: write <= read
    movzx       eax, word [r8 + rsi * 2]
    mov         [r8 + rcx * 2], ax
    inc         rsi
    inc         rcx
    dec         rdx
    jnz         .move
    mov         word [r8 + rcx * 2], SEP
    inc         rcx
.skip:
    inc         r11
    jmp         .word
.done:
    mov         [rbx + tctx.wlen], rcx
    mov         [rbx + tctx.nw], r12
    mov         qword [rbx + tctx.dead], 0
    mov         edx, W_TAIL                     ; SEP tail after the last word
.tail:
    mov         word [r8 + rcx * 2], SEP
    inc         rcx
    dec         edx
    jnz         .tail
    mov         rdi, rbx
    call        segments
    call        bloom_build
    mov         rax, [rbx + tctx.stats]
    inc         qword [rax + ST_COMPACTIONS * 8]
    mov         rdi, rbx
    RESTORE
ENDPROC

;=============================================================================
; bloom_build: rdi = ctx.  Recomputes the chunk filters from W: clears them,
; then sets bit chunk(p) in the bitmap of bucket W[p] & FILT_MASK for every
; token, and in the bitmap of PAIR_BUCKET(W[p], W[p+1]) for every pair; then
; the chunk -> word index tctx.cw.  Keeps rdi.  Clobbers rax, rcx, rdx, rsi, r8-r11.
;=============================================================================
PROC bloom_build
    SAVE        rdi
    mov         rsi, rdi
    mov         rcx, [rsi + tctx.blbytes]
    shr         rcx, 3                          ; qwords
    mov         rdi, [rsi + tctx.bloom]
    xor         eax, eax
    rep stosq
    mov         r8, [rsi + tctx.w]
    mov         rdi, [rsi + tctx.bloom]
    mov         r10, [rsi + tctx.blstride]
    xor         ecx, ecx
.pos:
    cmp         rcx, [rsi + tctx.wlen]
    jae         .done
    movzx       eax, word [r8 + rcx * 2]
    cmp         eax, SEP
    je          .next
    mov         rdx, rcx
    shr         rdx, CHUNK_SHIFT                ; chunk
    mov         r9, rdx
    shr         r9, 6
    shl         r9, 3                           ; its qword in a bitmap
    mov         r11d, 1
    shlx        r11, r11, rdx                   ; its bit (count mod 64)
    mov         edx, eax
    and         eax, FILT_MASK
    imul        rax, r10                        ; the token's bucket bitmap
    add         rax, r9
    or          [rdi + rax], r11
    movzx       eax, word [r8 + rcx * 2 + 2]    ; the pair starting here
    cmp         eax, SEP
    je          .next
    shl         edx, 16
    or          edx, eax
    PAIR_BUCKET edx
    imul        rdx, r10
    add         rdx, r9
    or          [rdi + rdx], r11
.next:
    inc         rcx
    jmp         .pos
.done:                                          ; tctx.cw[c]: the last word k with
    mov         r8, [rsi + tctx.ws]                ; WS[k] <= c << CHUNK_SHIFT
    mov         r9, [rsi + tctx.nw]
    mov         r10, [rsi + tctx.cw]
    mov         rcx, [rsi + tctx.wlen]
    shr         rcx, CHUNK_SHIFT
    inc         rcx                             ; the chunks of [0, WLEN)
    xor         edx, edx                        ; c
    xor         eax, eax                        ; k
.cw_chunk:
    cmp         rdx, rcx
    jae         .cw_done
    mov         r11, rdx
    shl         r11, CHUNK_SHIFT                ; the chunk's first position
.cw_word:
    lea         rdi, [rax + 1]
    cmp         rdi, r9
    jae         .cw_have
    cmp         [r8 + rdi * 8], r11
    ja          .cw_have
    mov         rax, rdi
    jmp         .cw_word
.cw_have:
    mov         [r10 + rdx * 4], eax
    inc         rdx
    jmp         .cw_chunk
.cw_done:
    RESTORE
ENDPROC
