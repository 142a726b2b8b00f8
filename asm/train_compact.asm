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

; ws_bound: rdi = ctx, rsi = a position -> rax = the first word k with
; WS[k] >= it (NW when none), by bisection.  Clobbers rcx, rdx.
static ws_bound:function
ws_bound:
    push        r8
    mov         r8, [rdi + tctx.ws]
    xor         eax, eax
    mov         rcx, [rdi + tctx.nw]
.bisect:
    cmp         rax, rcx
    jae         .ret
    lea         rdx, [rax + rcx]
    shr         rdx, 1
    cmp         [r8 + rdx * 8], rsi
    jae         .left
    lea         rax, [rdx + 1]
    jmp         .bisect
.left:
    mov         rcx, rdx
    jmp         .bisect
.ret:
    pop         r8
    ret

; segments: rdi = ctx.  Splits the words into tctx.nseg runs of about equal
; positions: SEGS_PER_THREAD per thread (at most MAX_THREADS), claimed by
; the threads one at a time each merge so uneven rewrite work evens out.
; Keeps rdi.  Clobbers rax, rcx, rdx, rsi, r8-r11.
%define sg_ctx  rdi   ; the context
%define sg_nseg r8    ; segments
%define sg_nw   r9    ; words
%define sg_i    r11   ; the segment bound being placed
%define sg_i_d  r11d  ; (32-bit view)
PROC segments
    mov         sg_nseg, [sg_ctx + tctx.nth]
    cmp         sg_nseg, 1
    je          .nseg
    shl         sg_nseg, 3                      ; x SEGS_PER_THREAD
    mov         eax, MAX_THREADS
    cmp         sg_nseg, rax
    cmova       sg_nseg, rax
.nseg:
    mov         [sg_ctx + tctx.nseg], r8d
    mov         sg_nw, [sg_ctx + tctx.nw]
    mov         qword [sg_ctx + tctx.seg], 0
    mov         [sg_ctx + tctx.seg + sg_nseg * 8], sg_nw
    mov         sg_i_d, 1
.each:
    cmp         sg_i, sg_nseg
    jae         .ret
    mov         rax, [sg_ctx + tctx.wlen]
    mul         sg_i
    div         sg_nseg                         ; bound
    mov         rsi, rax
    call        ws_bound                        ; its first word
    mov         [sg_ctx + tctx.seg + sg_i * 8], rax
    inc         sg_i
    jmp         .each
.ret:
    ret
ENDPROC
%undef  sg_ctx
%undef  sg_nseg
%undef  sg_nw
%undef  sg_i
%undef  sg_i_d

; compact: rdi = ctx.  Drops the SEP padding left by rewrites and the words
; down to one token (they have no pairs), moving the rest to the front.
; Keeps rdi.  The u16 build finds each word's end 16 tokens at a time and
; moves it 16 at a time, its last 16 (or its two halves, when shorter) loaded
; before any store: the destination never passes the source, so no store
; reaches a token not yet read (T80).
; MOVE_ENDS insn, ra, rb, n: compact's move of a short word: its first and
; its last n bytes (from rax, and ending at rsi) loaded into ra and rb, then
; stored at rdi and ending at W's new write position, then on to .moved.
%macro MOVE_ENDS 4
    %1          %2, [rax]
    %1          %3, [rsi - %4]
    %1          [rdi], %2
    %1          [cp_w + cp_wpos * TW - %4], %3
    jmp         .moved
%endmacro
%define cp_ctx    rbx   ; the context
%define cp_w      r8    ; W
%define cp_ws     r9    ; word starts
%define cp_wc     r10   ; word counts
%define cp_k      r11   ; word read
%define cp_k_d    r11d  ; (32-bit view)
%define cp_kept   r12   ; words kept (the next word written)
%define cp_kept_d r12d  ; (32-bit view)
%define cp_wpos   rcx   ; write position in W
%define cp_wpos_d ecx   ; (32-bit view)
PROC compact
    SAVE        rbx, r12
    mov         cp_ctx, rdi
    mov         cp_w, [cp_ctx + tctx.w]
    mov         cp_ws, [cp_ctx + tctx.ws]
    mov         cp_wc, [cp_ctx + tctx.wc]
    xor         cp_k_d, cp_k_d                  ; k (read)
    xor         cp_kept_d, cp_kept_d            ; words kept
    mov         cp_wpos_d, 1                    ; write position (W[0] = SEP)
%ifndef TOK32
    mov         eax, SEP
    vmovd       xmm15, eax
    vpbroadcastw ymm15, xmm15
%endif
.word:
    cmp         cp_k, [cp_ctx + tctx.nw]
    jae         .done
    mov         rsi, [cp_ws + cp_k * 8]         ; s
    mov         rdx, rsi
%ifndef TOK32
.len:                                           ; the first SEP from s on (W
    vpcmpeqw    ymm0, ymm15, [cp_w + rdx * TW]  ; ends in W_TAIL of them)
    vpmovmskb   eax, ymm0
    test        eax, eax
    jnz         .len_found
    add         rdx, 16
    jmp         .len
.len_found:
    tzcnt       eax, eax
    shr         eax, 1
    add         rdx, rax
%else
.len:
    cmp         TWORD [cp_w + rdx * TW], SEP
    je          .have_len
    inc         rdx
    jmp         .len
%endif
.have_len:
    sub         rdx, rsi                        ; len
    cmp         rdx, 2
    jb          .skip
    mov         [cp_ws + cp_kept * 8], cp_wpos
    mov         rax, [cp_wc + cp_k * 8]
    mov         [cp_wc + cp_kept * 8], rax
    inc         cp_kept
%ifndef TOK32
    lea         rax, [cp_w + rsi * TW]          ; source
    lea         rdi, [cp_w + cp_wpos * TW]      ; destination (<= source)
    lea         rsi, [rax + rdx * TW]           ; the source's end
    add         cp_wpos, rdx                    ; (the destination's end)
    cmp         rdx, 16
    jb          .move_short
    vmovdqu     ymm1, [rsi - 32]                ; the last 16 tokens, first
.move_16:
    vmovdqu     ymm0, [rax]
    vmovdqu     [rdi], ymm0
    add         rax, 32
    add         rdi, 32
    lea         rdx, [rax + 32]
    cmp         rdx, rsi
    jbe         .move_16
    vmovdqu     [cp_w + cp_wpos * TW - 32], ymm1
    jmp         .moved
.move_short:                                    ; 2..15 tokens: the first and
    cmp         rdx, 8                          ; the last 8, 4 or 2 (they
    jb          .move_4                         ; overlap), both loaded first
    MOVE_ENDS   vmovdqu, xmm0, xmm1, 16
.move_4:
    cmp         rdx, 4
    jb          .move_2
    MOVE_ENDS   mov, rdx, rax, 8
.move_2:
    MOVE_ENDS   mov, edx, eax, 4
.moved:
%else
.move:                                          ; forward copy: write <= read
    LDT         eax, [cp_w + rsi * TW]
    STT         [cp_w + cp_wpos * TW], eax
    inc         rsi
    inc         cp_wpos
    dec         rdx
    jnz         .move
%endif
    mov         TWORD [cp_w + cp_wpos * TW], SEP
    inc         cp_wpos
.skip:
    inc         cp_k
    jmp         .word
.done:
%ifndef TOK32
    vzeroupper
%endif
    mov         [cp_ctx + tctx.wlen], cp_wpos
    mov         [cp_ctx + tctx.nw], cp_kept
    mov         qword [cp_ctx + tctx.dead], 0
    mov         edx, W_TAIL                     ; SEP tail after the last word
.tail:
    mov         TWORD [cp_w + cp_wpos * TW], SEP
    inc         cp_wpos
    dec         edx
    jnz         .tail
    mov         rdi, cp_ctx
    call        segments
    mov         edx, 1                          ; (the old bits cleared; the
    call        bloom_par                       ; filters rebuilt on every
                                                ; thread, T111)
    mov         rax, [cp_ctx + tctx.stats]
    inc         qword [rax + ST_COMPACTIONS * 8]
    mov         rdi, cp_ctx
    RESTORE
ENDPROC
%undef  cp_ctx
%undef  cp_w
%undef  cp_ws
%undef  cp_wc
%undef  cp_k
%undef  cp_k_d
%undef  cp_kept
%undef  cp_kept_d
%undef  cp_wpos
%undef  cp_wpos_d

;=============================================================================
; bloom_build: rdi = ctx, the filters all zero.  Recomputes them from W: sets
; bit chunk(p) in the bitmap of bucket W[p] & FILT_MASK for every
; token, and in the bitmap of PAIR_BUCKET(W[p], W[p+1]) for every pair; then
; the chunk -> word index tctx.cw.  Keeps rdi.  Clobbers rax, rcx, rdx, rsi,
; r8-r11, ymm0-ymm15 (the u16 build's vector loop; vzeroupper after it).
; bloom_par does the same on every thread, each for its range of W.
;=============================================================================
PROC bloom_build
    SAVE        rdi
    xor         edx, edx
    mov         rcx, [rdi + tctx.wlen]
    call        bloom_range
    xor         edx, edx
    mov         rcx, [rdi + tctx.wlen]
    shr         rcx, CHUNK_SHIFT
    inc         rcx                             ; the chunks of [0, WLEN)
    call        cw_range
    RESTORE
ENDPROC

; bloom_par: rdi = ctx, edx = 1 to clear the filters first (after a
; compaction; 0: they are a fresh mapping, all zero, whose untouched pages
; stay unfaulted: the token buckets of ids not made yet).  bloom_build
; on min(tctx.nth, BLOOM_UNIT units of W) threads: thread i sets the bits
; of the positions [lo, hi) of its share of W, cut at multiples of BLOOM_UNIT
; positions (64 chunks: no two threads write the same qword of a bitmap),
; then tctx.cw of the chunks of [lo, hi).  One thread builds it all when the
; threads cannot be started.  Keeps rdi.  Clobbers rax, rcx, rdx, rsi,
; r8-r11, ymm0-ymm15.
%define BLOOM_UNIT  (64 << CHUNK_SHIFT)
PROC bloom_par
    SAVE        rdi, rbx
    sub         rsp, 24                         ; {ctx, threads}, aligned
    mov         rbx, rdi
    test        edx, edx
    jz          .cleared
    mov         rcx, [rbx + tctx.blbytes]
    shr         rcx, 3                          ; qwords
    mov         rdi, [rbx + tctx.bloom]
    xor         eax, eax
    rep stosq
    mov         rdi, rbx
.cleared:
    mov         [rsp], rdi
    mov         rax, [rdi + tctx.wlen]
    add         rax, BLOOM_UNIT - 1
    shr         rax, CHUNK_SHIFT + 6            ; units of W
    mov         rdx, [rdi + tctx.nth]
    cmp         rdx, rax
    cmova       rdx, rax
    mov         [rsp + 8], rdx
    lea         rdi, [bloom_worker]
    mov         rsi, rsp
    call        asmbpe_parallel
    test        eax, eax
    jz          .ret
    mov         rdi, rbx                        ; no threads: this one alone
    call        bloom_build
.ret:
    add         rsp, 24
    RESTORE
ENDPROC

; bloom_worker({ctx, n}, tid): bloom_range and cw_range for tid's share
static bloom_worker:function
bloom_worker:
    SAVE        rbx, r12, r13
    mov         rbx, [rdi]                      ; ctx
    mov         r12, rsi                        ; tid
    mov         r13, [rdi + 8]                  ; n
    mov         rax, [rbx + tctx.wlen]
    add         rax, BLOOM_UNIT - 1
    shr         rax, CHUNK_SHIFT + 6            ; units
    push        rax
    push        rax
    mul         r12
    div         r13
    shl         rax, CHUNK_SHIFT + 6
    mov         r12, rax                        ; lo
    pop         rax
    pop         rax
    inc         rsi                             ; (rsi = tid, kept by mul/div)
    mul         rsi
    div         r13
    shl         rax, CHUNK_SHIFT + 6            ; hi
    mov         r13, rax
    mov         rcx, [rbx + tctx.wlen]
    cmp         r13, rcx
    cmova       r13, rcx
    cmp         r12, r13
    jae         .ret
    mov         rdi, rbx
    mov         rdx, r12
    mov         rcx, r13
    call        bloom_range
    mov         rdx, r12
    shr         rdx, CHUNK_SHIFT
    mov         rcx, r13
    shr         rcx, CHUNK_SHIFT
    cmp         r13, [rbx + tctx.wlen]
    jb          .cw
    inc         rcx                             ; the last: to WLEN's chunk
.cw:
    call        cw_range
.ret:
    RESTORE

; bloom_range: rdi = ctx, rdx = lo, rcx = hi (lo a multiple of 16; hi a
; multiple of BLOOM_UNIT, or WLEN).  The filter bits of the tokens and pairs
; at positions [lo, hi) (up to 15 positions past hi when hi is WLEN: the
; SEP tail).  Keeps rdi.  Clobbers rax, rcx, rdx, rsi, r8-r11, ymm0-ymm15.
%define bb_ctx rsi   ; the context
%define bb_hi  [rsp + 128]  ; hi (the vector loop's 128 bytes below it)
; CHUNK_Q_BIT: the chunk of position rcx: r9 = the byte offset of its qword in
; a bitmap, r11 = its bit there (chunk mod 64).  Clobbers rdx.
%macro CHUNK_Q_BIT 0
    mov         rdx, rcx
    shr         rdx, CHUNK_SHIFT                ; chunk
    mov         r9, rdx
    shr         r9, 6
    shl         r9, 3
    mov         r11d, 1
    shlx        r11, r11, rdx
%endmacro
static bloom_range:function
bloom_range:
    push        rdi
    push        rcx                             ; hi
    sub         rsp, 128
    mov         bb_ctx, rdi
    mov         rcx, rdx
    mov         r8, [bb_ctx + tctx.w]
    mov         rdi, [bb_ctx + tctx.bloom]
    mov         r10, [bb_ctx + tctx.blstride]
%ifndef TOK32
    mov         rax, r10                        ; the offsets below are u32:
    imul        rax, rax, BLOOM_STRIDES         ; scalar past 4 GB of filters
    shr         rax, 32
    jnz         .pos
    ; 16 positions a round (T76): the buckets of their tokens and pairs by
    ; vector (a SEP token, or a pair with a SEP, goes to the trash bitmap
    ; BLOOM_TRASH instead of a branch), the offsets through 128 bytes of
    ; stack, then one OR each; the 16 positions share their chunk's bit
    mov         eax, SEP
    vmovd       xmm15, eax
    vpbroadcastw ymm15, xmm15                   ; SEP in every word
    mov         eax, FILT_MASK
    vmovd       xmm14, eax
    vpbroadcastd ymm14, xmm14
    mov         eax, PAIR_FILT_MUL
    vmovd       xmm13, eax
    vpbroadcastd ymm13, xmm13
    mov         eax, FILT_BUCKETS
    vmovd       xmm12, eax
    vpbroadcastd ymm12, xmm12
    vmovd       xmm11, r10d
    vpbroadcastd ymm11, xmm11                   ; the stride
    vpslld      ymm10, ymm11, 12                ; the trash bitmap's offset
%if BLOOM_TRASH != 1 << 12
%error "BLOOM_TRASH: the shift above"
%endif
.group:
    cmp         rcx, bb_hi
    jae         .groups_done
    CHUNK_Q_BIT
    vmovd       xmm9, r9d
    vpbroadcastd ymm9, xmm9
    vmovdqu     ymm0, [r8 + rcx * 2]            ; a: tokens p .. p + 15
    vmovdqu     ymm1, [r8 + rcx * 2 + 2]        ; b: tokens p + 1 .. p + 16
    vpcmpeqw    ymm2, ymm0, ymm15               ; a is SEP
    vpcmpeqw    ymm3, ymm1, ymm15
    vpor        ymm3, ymm3, ymm2                ; (a, b) holds a SEP
    vpmovzxwd   ymm4, xmm0                      ; tokens 0-7
    vpmovsxwd   ymm5, xmm2
    vpand       ymm4, ymm4, ymm14
    vpmulld     ymm4, ymm4, ymm11
    vpblendvb   ymm4, ymm4, ymm10, ymm5
    vpaddd      ymm4, ymm4, ymm9
    vmovdqu     [rsp], ymm4
    vextracti128 xmm4, ymm0, 1                  ; tokens 8-15
    vextracti128 xmm5, ymm2, 1
    vpmovzxwd   ymm4, xmm4
    vpmovsxwd   ymm5, xmm5
    vpand       ymm4, ymm4, ymm14
    vpmulld     ymm4, ymm4, ymm11
    vpblendvb   ymm4, ymm4, ymm10, ymm5
    vpaddd      ymm4, ymm4, ymm9
    vmovdqu     [rsp + 32], ymm4
%assign bb_half 0
%rep 2                                          ; pairs 0-3, 8-11, then 4-7, 12-15
%if bb_half == 0
    vpunpcklwd  ymm6, ymm1, ymm0                ; b | a << 16: PAIR_FOLD(P)
    vpunpcklwd  ymm7, ymm3, ymm3                ; its mask, as dwords
%else
    vpunpckhwd  ymm6, ymm1, ymm0
    vpunpckhwd  ymm7, ymm3, ymm3
%endif
    vpmulld     ymm6, ymm6, ymm13               ; PAIR_BUCKET: times
    vpsrld      ymm6, ymm6, 32 - PAIR_FILT_BITS ; PAIR_FILT_MUL, the top bits,
                                                ; + FILT_BUCKETS
    vpaddd      ymm6, ymm6, ymm12
    vpmulld     ymm6, ymm6, ymm11
    vpblendvb   ymm6, ymm6, ymm10, ymm7
    vpaddd      ymm6, ymm6, ymm9
    vmovdqu     [rsp + 64 + 32 * bb_half], ymm6
%assign bb_half bb_half + 1
%endrep
%assign bb_k 0
%rep 32
    mov         eax, [rsp + 4 * bb_k]
    or          [rdi + rax], r11
%assign bb_k bb_k + 1
%endrep
    add         rcx, 16
    jmp         .group
.groups_done:
    vzeroupper                                  ; (callers may run SSE code)
    jmp         .done
%endif
.pos:
    cmp         rcx, bb_hi
    jae         .done
    LDT         eax, [r8 + rcx * TW]
    cmp         eax, SEP
    je          .next
    CHUNK_Q_BIT
    mov         edx, eax
    and         eax, FILT_MASK
    imul        rax, r10                        ; the token's bucket bitmap
    add         rax, r9
    or          [rdi + rax], r11
    LDT         eax, [r8 + rcx * TW + TW]       ; the pair starting here
    cmp         eax, SEP
    je          .next
    shl         rdx, PSHIFT
    or          rdx, rax
    PAIR_BUCKET rdx, edx, rax
    imul        rdx, r10
    add         rdx, r9
    or          [rdi + rdx], r11
.next:
    inc         rcx
    jmp         .pos
.done:
    add         rsp, 128
    pop         rcx
    pop         rdi
    ret

; cw_range: rdi = ctx, rdx = the first chunk, rcx = the end chunk.
; tctx.cw[c] for the chunks c of [first, end): the last word k with
; WS[k] <= c << CHUNK_SHIFT (0 when none).  Keeps rdi.  Clobbers rax, rcx,
; rdx, rsi, r8-r11.
static cw_range:function
cw_range:
    push        rcx                             ; the end chunk
    mov         r8, [rdi + tctx.ws]
    mov         r9, [rdi + tctx.nw]
    mov         r10, [rdi + tctx.cw]
    mov         rsi, rdx
    shl         rsi, CHUNK_SHIFT
    inc         rsi                             ; the words with WS <= the
    push        rdx                             ; first chunk's position
    call        ws_bound
    pop         rdx
    test        rax, rax                        ; k: the last of them, or 0
    jz          .cw_first
    dec         rax
.cw_first:
    pop         rcx
.cw_chunk:
    cmp         rdx, rcx
    jae         .cw_done
    mov         r11, rdx
    shl         r11, CHUNK_SHIFT                ; the chunk's first position
.cw_word:
    lea         rsi, [rax + 1]
    cmp         rsi, r9
    jae         .cw_have
    cmp         [r8 + rsi * 8], r11
    ja          .cw_have
    mov         rax, rsi
    jmp         .cw_word
.cw_have:
    mov         [r10 + rdx * 4], eax
    inc         rdx
    jmp         .cw_chunk
.cw_done:
    ret
%undef  bb_ctx
