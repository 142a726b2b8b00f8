;-----------------------------------------------------------------------------
; train_scan.asm — BPE training: the scan and rewrite of one segment of W for
; the chosen merge (scan_segment), run by every thread (worker,
; train_merge.asm) on the segments it claims, and by naive_loop on all of W.
; The chunk filters (built by bloom_build, train_compact.asm) pick the chunks
; worth a vpcmpeqw scan; each word holding (a, b) is rewritten in place, its
; exact pair-count changes go to the thread's delta map (dm_add,
; train_dmap.asm) and the filter bits of its new tokens and pairs are queued
; (SET_CHUNK_BIT) and set by flush_marks.  publish_found keeps tctx.remain,
; the occurrences still to find, so the scans stop once all are found.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "train.inc"

extern dm_add

section .text

;=============================================================================
; scan_segment(ctx, dm, klo, khi): finds every word in [klo, khi) holding the
; pair (tctx.a, tctx.b) with the vpcmpeqw scan, rewrites it in place into tctx.t left
; to right, non-overlapping, pads its tail with SEP, and adds -count for each
; pair of the old word and +count for each pair of the new one to dm.
;=============================================================================
%define PF_DIST     4       ; candidate chunks prefetched ahead of the scan
%define PF_QLEN     8       ; the candidate queue's room (> PF_DIST, a power of 2)
%define PF_SPAN     32      ; filter qwords one walk step looks at, at most (a
                            ; multiple of 8: the walk reads 8 a round)
%define PF_WC_LINES 3       ; lines of word counts prefetched per candidate chunk
; scan_segment's stack frame (below its 6 pushes: calls stay aligned)
struc scan_frame
    .c:         resq 1          ; count of the word being rewritten
    .s:         resq 1          ; its start
    .e:         resq 1          ; its end (the SEP after it)
    .khi:       resq 1          ; the segment's end word
    .cend:      resq 1          ; end of the current chunk's scan
    .t0:        resq 1          ; rdtsc at the start
    .fa:        resq 1          ; bucket bitmap of a
    .fb:        resq 1          ; bucket bitmap of b
    .ft:        resq 1          ; bucket bitmap of the new token
    .fp:        resq 1          ; pair-bucket bitmap of (a, b)
    .pfc:       resq 1          ; first chunk the prefetch walk has not looked at
    .klo:       resq 1          ; the segment's first word
    .s0:        resq 1          ; and its start
    .pfq1:      resq 1          ; the chunk the last .pf_next found (-1: none)
    .pfq2:      resq 1          ; the one the call before found (-1: none)
    .mlo:       resq 1          ; (.rw_done: the first position to mark)
    .lastc:     resq 1          ; the chunk last found, plus one (0: none)
    .tchunk:    resq 1          ; the chunk whose t bit was marked last, plus one
    .abd:       resq 1          ; the counts of the replacements so far: the
                                ; delta of (a, b), added to the map once at .done
    .want:      resq 1          ; (.next_cand: the first chunk a candidate may be)
    .cur:       resq 1          ; (.take: the candidate taken)
    .qhead:     resq 1          ; the candidate queue: chunks the walk found,
    .qtail:     resq 1          ; in order, their lines prefetched; entries
    .qbuf:      resq PF_QLEN    ; qhead .. qtail - 1 (mod PF_QLEN)
endstruc

; SET_CHUNK_BIT bitmap, chunk, tmp (%1 = bitmap: its address, %2 = chunk:
; its index, %3 = tmp: 64-bit registers): queues "set bit `chunk` of the bitmap"
; in this thread's dmap.marks (rbx = delta map) and prefetches its line for
; writing; flush_marks sets the queued bits, every MARK_BATCH marks and at the
; end of each segment.  Setting them at once meant a cache miss (64 MB of
; bitmaps) in the rewrite loop, often followed by a locked write.  A merge's
; own scan never needs the marks it makes (rewritten words hold no (a, b)
; any more), later merges see them after the barrier.
; Clobbers all three (and r8, r9 are kept by flush_marks).
%macro SET_CHUNK_BIT 3
    mov         %3, %2
    shr         %3, 6
    lea         %1, [%1 + %3 * 8]               ; the chunk's qword
    prefetcht0  [%1]
    shl         %1, 6
    and         %2, 63
    or          %1, %2
    mov         %3, [rbx + dmap.nmarks]
    mov         [rbx + dmap.marks + %3 * 8], %1
    inc         %3
    mov         [rbx + dmap.nmarks], %3
    cmp         %3, MARK_BATCH
    jb          %%queued
    call        flush_marks
%%queued:
%endmacro

; flush_marks: rbx = delta map, r12 = ctx.  Sets the queued filter bits:
; read first, as most are set already; a locked OR when others may be
; writing the same qword (chunks span threads' segments), a plain one when
; thread 0 runs alone.  Empties the queue.  Clobbers rax, rcx, rdx.
%define fm_dm    rbx   ; the delta map
%define fm_ctx   r12   ; the context
%define fm_n     r8    ; marks queued
%define fm_i     r9    ; the mark being set
%define fm_i_d   r9d   ; (32-bit view)
%define fm_one   r10   ; 1 (shlx: the bit)
%define fm_one_d r10d  ; (32-bit view)
static flush_marks:function
flush_marks:
    push        fm_n
    push        fm_i
    push        fm_one
    mov         fm_n, [fm_dm + dmap.nmarks]
    xor         fm_i_d, fm_i_d
    mov         fm_one_d, 1
    cmp         qword [fm_ctx + tctx.nth], 1
    je          .plain
    cmp         qword [fm_ctx + tctx.solo], 0
    jne         .plain
.locked:
    cmp         fm_i, fm_n
    jae         .done
    mov         rcx, [fm_dm + dmap.marks + fm_i * 8]
    inc         fm_i
    shlx        rdx, fm_one, rcx                ; (shlx takes the count mod 64)
    shr         rcx, 6
    test        [rcx], rdx
    jnz         .locked
    lock or     [rcx], rdx
    jmp         .locked
.plain:
    cmp         fm_i, fm_n
    jae         .done
    mov         rcx, [fm_dm + dmap.marks + fm_i * 8]
    inc         fm_i
    shlx        rdx, fm_one, rcx
    shr         rcx, 6
    or          [rcx], rdx
    jmp         .plain
.done:
    mov         qword [fm_dm + dmap.nmarks], 0
    pop         fm_one
    pop         fm_i
    pop         fm_n
    ret
%undef  fm_dm
%undef  fm_ctx
%undef  fm_n
%undef  fm_i
%undef  fm_i_d
%undef  fm_one
%undef  fm_one_d

; MARK_PAIR (no parameters): rcx = a pair P, rax = the position where it
; starts.  Sets that
; chunk's bit in the bitmap of P's pair bucket.  Needs r12 = ctx; clobbers
; rax, rcx, rdx.
%macro MARK_PAIR 0
    PAIR_BUCKET rcx, ecx, rdx
    imul        rcx, [r12 + tctx.blstride]
    add         rcx, [r12 + tctx.bloom]
    shr         rax, CHUNK_SHIFT
    SET_CHUNK_BIT rcx, rax, rdx
%endmacro

; FILT_HITS dst, fa, fb, q, tmp1, tmp2, fp: dst = bit c of qword q set for each
; chunk c holding a (bitmap fa) with b in c or in c + 1 (bitmap fb) and a pair
; of (a, b)'s bucket starting in c (bitmap fp); reads fb[q + 1].  %1 = dst,
; %2 = fa, %3 = fb, %4 = q, %5 = tmp1, %6 = tmp2, %7 = fp: 64-bit registers,
; fa / fb / fp the bitmaps' addresses.  Clobbers tmp1, tmp2.
%macro FILT_HITS 7
    mov         %1, [%3 + %4 * 8]
    mov         %6, [%3 + %4 * 8 + 8]
    shl         %6, 63
    mov         %5, %1
    shr         %5, 1
    or          %1, %5
    or          %1, %6
    and         %1, [%2 + %4 * 8]
    and         %1, [%7 + %4 * 8]
%endmacro

; FOUND n (a 64-bit register, kept): dmap.found += the word's count x n
; occurrences of (a, b); published every FOUND_BATCH words.  Needs rbx =
; delta map, r12 = ctx; clobbers rax.
%macro FOUND 1
    mov         rax, [rsp + scan_frame.c]
    imul        rax, %1
    add         [rbx + dmap.found], rax
    inc         qword [rbx + dmap.nfound]
    test        qword [rbx + dmap.nfound], FOUND_BATCH - 1
    jnz         %%unpublished
    call        publish_found
%%unpublished:
%endmacro

%define sc_ctx  r12   ; the context
%define sc_dm   rbx   ; this thread's delta map
%define sc_word rbp   ; the word holding the cursor (from klo on)
%define sc_word_d ebp ; (32-bit view)
%define sc_w    r13   ; W
%define sc_pos  r14   ; the cursor: next position of W to scan
%define sc_end  r15   ; the segment's end position (the SEP before word khi)
%define sc_va   ymm14 ; a in every word
%define sc_vb   ymm15 ; b in every word
PROC scan_segment
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, scan_frame_size
    mov         sc_ctx, rdi
    mov         sc_dm, rsi
    mov         sc_word, rdx                    ; klo: word holding the cursor
    mov         [rsp + scan_frame.khi], rcx
    RDTSC64
    mov         [rsp + scan_frame.t0], rax
    mov         qword [rsp + scan_frame.qhead], 0
    mov         qword [rsp + scan_frame.qtail], 0
    mov         qword [rsp + scan_frame.pfq1], -1
    mov         qword [rsp + scan_frame.pfq2], -1
    mov         qword [rsp + scan_frame.abd], 0
    mov         qword [rsp + scan_frame.lastc], 0
    mov         qword [rsp + scan_frame.tchunk], 0
    mov         rcx, [rsp + scan_frame.khi]
    cmp         sc_word, rcx
    jae         .done
    mov         rdx, [sc_ctx + tctx.ws]
    mov         sc_pos, [rdx + sc_word * 8]     ; cursor: first word's start
    mov         [rsp + scan_frame.klo], sc_word
    mov         [rsp + scan_frame.s0], sc_pos
    mov         rax, sc_pos
    shr         rax, CHUNK_SHIFT
    mov         [rsp + scan_frame.pfc], rax     ; the walk: from s0's chunk
    mov         sc_end, [sc_ctx + tctx.wlen]
    cmp         rcx, [sc_ctx + tctx.nw]
    jae         .have_end
    mov         sc_end, [rdx + rcx * 8]
    dec         sc_end                          ; the SEP before word khi
.have_end:
    mov         sc_w, [sc_ctx + tctx.w]
    mov         rdx, [sc_ctx + tctx.blstride]   ; the bucket bitmaps of a, b, t
    mov         rax, [sc_ctx + tctx.a]
    and         eax, FILT_MASK
    imul        rax, rdx
    add         rax, [sc_ctx + tctx.bloom]
    mov         [rsp + scan_frame.fa], rax
    mov         rax, [sc_ctx + tctx.b]
    and         eax, FILT_MASK
    imul        rax, rdx
    add         rax, [sc_ctx + tctx.bloom]
    mov         [rsp + scan_frame.fb], rax
    mov         rax, [sc_ctx + tctx.t]
    and         eax, FILT_MASK
    imul        rax, rdx
    add         rax, [sc_ctx + tctx.bloom]
    mov         [rsp + scan_frame.ft], rax
    mov         rax, [sc_ctx + tctx.a]
    shl         rax, PSHIFT
    or          rax, [sc_ctx + tctx.b]
    PAIR_BUCKET rax, eax, rsi
    imul        rax, [sc_ctx + tctx.blstride]
    add         rax, [sc_ctx + tctx.bloom]
    mov         [rsp + scan_frame.fp], rax
.load_pair:
    VPBCT       sc_va, [sc_ctx + tctx.a]
    VPBCT       sc_vb, [sc_ctx + tctx.b]
.scan:                                          ; next chunk of W worth a scan
    cmp         sc_pos, sc_end
    jae         .done
    mov         rax, [sc_ctx + tctx.remain]     ; every occurrence found (by
    sub         rax, [sc_dm + dmap.found]       ; any thread, this one's not
    jle         .done                           ; yet published too): stop
    mov         rax, sc_pos
    shr         rax, CHUNK_SHIFT                ; c: the cursor's chunk
    lea         rcx, [rax + 1]
    cmp         rcx, [rsp + scan_frame.lastc]   ; the chunk being scanned (the
    jne         .next_cand                      ; word just rewritten ended in
    cmp         sc_pos, [rsp + scan_frame.cend] ; it): go on with it
    jb          .vec
    mov         rax, rcx                        ; (it is done: from c + 1)
.next_cand:                                     ; the first candidate >= rax:
    mov         rcx, [rsp + scan_frame.qhead]   ; from the queue, dropping
    cmp         rcx, [rsp + scan_frame.qtail]   ; those behind the cursor (a
    je          .walk                           ; rewritten word may span
    and         ecx, PF_QLEN - 1                ; chunks)
    mov         rdx, [rsp + scan_frame.qbuf + rcx * 8]
    inc         qword [rsp + scan_frame.qhead]
    cmp         rdx, rax
    jb          .next_cand
    jmp         .take
.walk:                                          ; none queued: the walk goes
    cmp         [rsp + scan_frame.pfc], rax     ; on from max(pfc, rax) until
    jae         .walk_on                        ; it queues one
    mov         [rsp + scan_frame.pfc], rax
.walk_on:
    mov         rdx, [rsp + scan_frame.pfc]
    shl         rdx, CHUNK_SHIFT
    cmp         rdx, sc_end
    jae         .done                           ; no candidate left
    mov         [rsp + scan_frame.want], rax
    call        .pf_next
    mov         rax, [rsp + scan_frame.want]
    jmp         .next_cand
.take:                                          ; rdx: the candidate chunk
    mov         [rsp + scan_frame.cur], rdx
%rep PF_DIST                                    ; keep PF_DIST more queued
    mov         rcx, [rsp + scan_frame.qtail]   ; (at most PF_DIST steps of
    sub         rcx, [rsp + scan_frame.qhead]   ; the walk here)
    cmp         rcx, PF_DIST
    jae         .queued
    call        .pf_next
%endrep
.queued:
    mov         rax, [rsp + scan_frame.cur]
    lea         rsi, [rax + 1]
    mov         [rsp + scan_frame.lastc], rsi
    inc         qword [sc_dm + dmap.chunks]
    shl         rax, CHUNK_SHIFT
    cmp         rax, sc_pos
    cmova       sc_pos, rax
    cmp         sc_pos, sc_end
    jae         .done
    add         rax, 1 << CHUNK_SHIFT
    cmp         rax, sc_end
    cmova       rax, sc_end
    mov         [rsp + scan_frame.cend], rax    ; end of this chunk's scan
.vec:                                           ; 64 bytes of W per round
    cmp         sc_pos, [rsp + scan_frame.cend]
    jae         .scan
    vmovdqu     ymm0, [sc_w + sc_pos * TW]
    vmovdqu     ymm1, [sc_w + sc_pos * TW + TW]
    vmovdqu     ymm2, [sc_w + sc_pos * TW + 32]
    vmovdqu     ymm3, [sc_w + sc_pos * TW + 32 + TW]
    VPCMPEQT    ymm0, ymm0, sc_va               ; w[i] == a
    VPCMPEQT    ymm1, ymm1, sc_vb               ; w[i+1] == b
    VPCMPEQT    ymm2, ymm2, sc_va
    VPCMPEQT    ymm3, ymm3, sc_vb
    vpand       ymm0, ymm0, ymm1
    vpand       ymm2, ymm2, ymm3
    vpor        ymm1, ymm0, ymm2
    vptest      ymm1, ymm1
    jnz         .hit
    add         sc_pos, 64 / TW
    jmp         .vec
.hit:
    vpmovmskb   eax, ymm0
    vpmovmskb   ecx, ymm2
    shl         rcx, 32
    or          rax, rcx
    tzcnt       rax, rax
    shr         eax, TSH
    add         rax, sc_pos                     ; p
    cmp         rax, sc_end
    jae         .done
    ; p's word, from W alone: k = tctx.cw[p's chunk] (the last word starting
    ; at or before the chunk's first position cs) + the word starts in
    ; (cs, p], a start being a token after a SEP (words hold no SEP; rewrites
    ; pad their tails with SEP, still before the next start).  The chunk's W
    ; lines are in L1: no search of WS (its lines were the scan's worst
    ; misses).  Where the chunk begins in the segment before (cs < s0, the
    ; segment's first start), k = klo + the starts in (s0, p]: positions of
    ; other segments are never counted, as their threads rewrite them now.
    ; Blocks of 64 bytes from lo = max(cs, s0), TW mask bits per position.
    mov         rdi, rax                        ; p
    mov         r8, rax
    and         r8, -(1 << CHUNK_SHIFT)         ; cs
    mov         rcx, [sc_ctx + tctx.cw]
    mov         rdx, rax
    shr         rdx, CHUNK_SHIFT
    mov         sc_word_d, [rcx + rdx * 4]      ; k = tctx.cw[cs >> CHUNK_SHIFT]
    mov         rcx, [rsp + scan_frame.s0]
    cmp         r8, rcx
    jae         .ws_lo
    mov         r8, rcx                         ; lo = s0
    mov         sc_word, [rsp + scan_frame.klo] ; k = klo
.ws_lo:
    mov         rcx, r8
    and         r8, -(64 / TW)                  ; lo's block
    sub         rcx, r8
    inc         rcx
    shl         rcx, TSH                        ; the bits of positions <= lo
    mov         rdx, -1
    bzhi        rdx, rdx, rcx
    not         rdx
    vmovq       xmm6, rdx                       ; (kept: the first block's)
    xor         r9d, r9d                        ; start bits so far
    xor         r10d, r10d                      ; SEP bits of the position
    xor         esi, esi                        ; before the block (none)
    vpcmpeqd    ymm7, ymm7, ymm7                ; SEP in every lane
.ws_block:
    VPCMPEQT    ymm4, ymm7, [sc_w + r8 * TW]
    VPCMPEQT    ymm5, ymm7, [sc_w + r8 * TW + 32]
    vpmovmskb   ecx, ymm4
    vpmovmskb   edx, ymm5
    shl         rdx, 32
    or          rcx, rdx                        ; M: SEP lanes' bits
    mov         rdx, rcx
    shl         rdx, TW
    or          rdx, r10                        ; SEP before each position
    mov         r10, rcx
    shr         r10, 64 - TW                    ; (the next block's carry)
    andn        rdx, rcx, rdx                   ; starts: a token after a SEP
    vmovq       rcx, xmm6
    and         rdx, rcx                        ; after lo
    vpcmpeqd    xmm6, xmm6, xmm6                ; (later blocks: all)
    mov         r11, rdi
    sub         r11, r8                         ; p - the block's first
    cmp         r11, 64 / TW
    jae         .ws_whole
    inc         r11
    shl         r11, TSH
    bzhi        rdx, rdx, r11                   ; at or before p
.ws_whole:
    popcnt      r11, rdx
    add         r9, r11
    test        rdx, rdx
    jz          .ws_next
    bsr         r11, rdx
    shr         r11, TSH
    lea         rsi, [r8 + r11]                 ; the last start so far
.ws_next:
    add         r8, 64 / TW
    cmp         r8, rdi
    jbe         .ws_block
    shr         r9, TSH                         ; the starts in (lo, p]
    add         sc_word, r9                     ; k
    mov         rdx, [sc_ctx + tctx.wc]         ; its count, loaded early
    mov         rcx, [rdx + sc_word * 8]
    mov         [rsp + scan_frame.c], rcx
    test        r9, r9
    jnz         .found                          ; s: the last start, or the
    mov         rdx, [sc_ctx + tctx.ws]         ; word began at or before lo
    mov         rsi, [rdx + sc_word * 8]
.found:
    mov         [rsp + scan_frame.s], rsi
    mov         rax, rsi
.find_end:                                      ; e: its first SEP
    VPCMPEQT    ymm4, ymm7, [sc_w + rax * TW]   ; (W_TAIL SEPs follow the
    vpmovmskb   ecx, ymm4                       ; last word: in bounds)
    test        ecx, ecx
    jnz         .sep_found
    add         rax, 32 / TW
    jmp         .find_end
.sep_found:
    vzeroupper                                  ; calls ahead
    tzcnt       ecx, ecx
    shr         ecx, TSH
    add         rax, rcx
.have_e:
    mov         [rsp + scan_frame.e], rax
    ; occurrences of (a, b) in the old word, overlapping as counted, leave
    ; tctx.remain (FOUND): for a != b they cannot overlap, so they are the
    ; rewrite's replacements, counted after it; for a == b they are counted
    ; here, before the rewrite.
    mov         r8d, [sc_ctx + tctx.a]          ; (ids: a u32 is enough)
    mov         r9d, [sc_ctx + tctx.b]
    cmp         r8d, r9d
    jne         .unpublished
    mov         r10, [rsp + scan_frame.s]
    xor         r11d, r11d
.occ:
    lea         rax, [r10 + 1]
    cmp         rax, [rsp + scan_frame.e]
    jae         .occ_done
    CMPT        [sc_w + r10 * TW], r8d
    jne         .occ_next
    CMPT        [sc_w + r10 * TW + TW], r9d
    jne         .occ_next
    inc         r11
.occ_next:
    inc         r10
    jmp         .occ
.occ_done:
    FOUND       r11
.unpublished:
%define sc_rd     r10   ; the rewrite: position read (the .mark loops: position marked)
%define sc_wr     r11   ; position written
%define sc_nrep   rdi   ; replacements in this word
%define sc_nrep_d edi   ; (32-bit view)

    ; rewrite in place, left to right, with the exact local deltas of each
    ; replacement of (a, b) at old position r by t at new position w:
    ;   prev p (new) : (p, a) -c, (p, t) +c;  (a, b) -c (summed in .abd);
    ;   next n (old) : (b, n) -c, (t, n) +c
    ; (dm_add keeps r10, r11, rdi, rsi, rdx)
    mov         sc_rd, [rsp + scan_frame.s]     ; read
    mov         sc_wr, sc_rd                    ; write
    xor         sc_nrep_d, sc_nrep_d            ; replacements
.rw:
    cmp         sc_rd, [rsp + scan_frame.e]
    jae         .rw_done
    LDT         eax, [sc_w + sc_rd * TW]
    cmp         eax, [sc_ctx + tctx.a]
    jne         .copy
    LDT         ecx, [sc_w + sc_rd * TW + TW]   ; (SEP at the end: never b)
    cmp         ecx, [sc_ctx + tctx.b]
    jne         .copy
    cmp         sc_wr, [rsp + scan_frame.s]
    jbe         .no_prev
    LDT         esi, [sc_w + sc_wr * TW - TW]   ; (p, a) -c
    shl         rsi, PSHIFT
    or          rsi, [sc_ctx + tctx.a]
    mov         rdx, [rsp + scan_frame.c]
    neg         rdx
    call        dm_add
    LDT         esi, [sc_w + sc_wr * TW - TW]   ; (p, t) +c
    shl         rsi, PSHIFT
    or          rsi, [sc_ctx + tctx.t]
    mov         rdx, [rsp + scan_frame.c]
    call        dm_add
.no_prev:
    mov         rdx, [rsp + scan_frame.c]       ; (a, b) -c: summed, one
    add         [rsp + scan_frame.abd], rdx     ; dm_add at .done
    lea         rax, [sc_rd + 2]
    cmp         rax, [rsp + scan_frame.e]
    jae         .no_next
    mov         rsi, [sc_ctx + tctx.b]          ; (b, n) -c
    shl         rsi, PSHIFT
    LDT         eax, [sc_w + sc_rd * TW + 2 * TW]
    or          rsi, rax
    mov         rdx, [rsp + scan_frame.c]
    neg         rdx
    call        dm_add
    mov         rsi, [sc_ctx + tctx.t]          ; (t, n) +c
    shl         rsi, PSHIFT
    LDT         eax, [sc_w + sc_rd * TW + 2 * TW]
    or          rsi, rax
    mov         rdx, [rsp + scan_frame.c]
    call        dm_add
.no_next:
    mov         eax, [sc_ctx + tctx.t]
    STT         [sc_w + sc_wr * TW], eax
    mov         rax, sc_wr                      ; t is now in this chunk
    shr         rax, CHUNK_SHIFT                ; (once per chunk: the
    lea         rcx, [rax + 1]                  ; replacements of one chunk
    cmp         rcx, [rsp + scan_frame.tchunk]  ; mark the same bit)
    je          .t_marked
    mov         [rsp + scan_frame.tchunk], rcx
    mov         rcx, [rsp + scan_frame.ft]
    SET_CHUNK_BIT rcx, rax, rdx
.t_marked:
    cmp         sc_wr, [rsp + scan_frame.s]     ; and so are the pairs
    jbe         .no_prev_pair                   ; (prev, t) and (t, next)
    LDT         ecx, [sc_w + sc_wr * TW - TW]   ; (prev: final; next: the
    shl         rcx, PSHIFT                     ; old one, final unless it
    or          rcx, [sc_ctx + tctx.t]          ; is merged too, and then
    lea         rax, [sc_wr - 1]                ; its own (prev, t) counts)
    MARK_PAIR
.no_prev_pair:
    lea         rax, [sc_rd + 2]
    cmp         rax, [rsp + scan_frame.e]
    jae         .no_next_pair
    mov         rcx, [sc_ctx + tctx.t]
    shl         rcx, PSHIFT
    LDT         eax, [sc_w + sc_rd * TW + 2 * TW]
    or          rcx, rax
    mov         rax, sc_wr
    MARK_PAIR
.no_next_pair:
    add         sc_rd, 2
    inc         sc_wr
    inc         sc_nrep_d
    jmp         .rw
.copy:
    STT         [sc_w + sc_wr * TW], eax
    inc         sc_rd
    inc         sc_wr
    jmp         .rw
.rw_done:
    ; a word across a chunk boundary B: the tokens and pairs that moved from
    ; B on to before it must be marked in the chunk before.  A token or pair
    ; moves back by at most the word's replacements, so those are the ones
    ; now in [B - nrep, B) (the new ones are marked already); a word across
    ; two boundaries or more is marked whole.  Tokens below r9, pairs
    ; starting below r8 (flush_marks keeps both).
    mov         rax, [rsp + scan_frame.s]
    shr         rax, CHUNK_SHIFT
    mov         rcx, [rsp + scan_frame.e]
    dec         rcx
    shr         rcx, CHUNK_SHIFT
    cmp         rax, rcx
    je          .marked                         ; within one chunk
    mov         r9, sc_wr                       ; tokens below min(wr, B)
    mov         rdx, [rsp + scan_frame.s]       ; from max(s, B - nrep)
    inc         rax
    cmp         rax, rcx
    jb          .mark_from                      ; (two boundaries or more)
    shl         rax, CHUNK_SHIFT                ; B
    cmp         r9, rax
    cmova       r9, rax
    mov         rdx, rax
    sub         rdx, sc_nrep                    ; (>= 0: B >= 128 > nrep)
    cmp         rdx, [rsp + scan_frame.s]
    jae         .mark_from
    mov         rdx, [rsp + scan_frame.s]
.mark_from:
    mov         [rsp + scan_frame.mlo], rdx
    lea         r8, [sc_wr - 1]                 ; pairs below min(wr - 1, r9)
    cmp         r8, r9
    cmova       r8, r9
    mov         sc_rd, rdx
.mark_pairs:
    cmp         sc_rd, r8
    jae         .pairs_marked
    LDT         ecx, [sc_w + sc_rd * TW]
    shl         rcx, PSHIFT
    LDT         eax, [sc_w + sc_rd * TW + TW]
    or          rcx, rax
    mov         rax, sc_rd
    MARK_PAIR
    inc         sc_rd
    jmp         .mark_pairs
.pairs_marked:
    mov         sc_rd, [rsp + scan_frame.mlo]
.mark:
    cmp         sc_rd, r9
    jae         .marked
    LDT         ecx, [sc_w + sc_rd * TW]
    and         ecx, FILT_MASK
    imul        rcx, [sc_ctx + tctx.blstride]
    add         rcx, [sc_ctx + tctx.bloom]
    mov         rax, sc_rd
    shr         rax, CHUNK_SHIFT
    SET_CHUNK_BIT rcx, rax, rdx
    inc         sc_rd
    jmp         .mark
.marked:
    mov         eax, [sc_ctx + tctx.a]
    cmp         eax, [sc_ctx + tctx.b]
    je          .counted                        ; (a == b: before the rewrite)
    FOUND       sc_nrep
.counted:
    add         [sc_dm + dmap.repl], sc_nrep
    add         [sc_dm + dmap.dead], sc_nrep    ; each replacement frees a slot
    inc         qword [sc_dm + dmap.words]
    inc         qword [sc_dm + dmap.mwords]
    mov         rax, sc_wr
    sub         rax, [rsp + scan_frame.s]
    cmp         rax, 1
    jne         .fill
    add         qword [sc_dm + dmap.dead], 2    ; one token left: word and SEP
.fill:
    cmp         sc_wr, [rsp + scan_frame.e]
    jae         .word_done
    mov         TWORD [sc_w + sc_wr * TW], SEP
    inc         sc_wr
    jmp         .fill
.word_done:
    mov         sc_pos, [rsp + scan_frame.e]
    jmp         .load_pair
%undef  sc_rd
%undef  sc_wr
%undef  sc_nrep
%undef  sc_nrep_d
; .pf_next: one step of the walk: the next chunk the filters let through,
; from scan_frame.pfc on (at most PF_SPAN filter qwords, 8 a round after the
; first): queue it (the caller keeps the queue short of PF_QLEN), prefetch
; its W lines and its tctx.cw entry, and the word counts of the chunk queued
; before it, and move scan_frame.pfc past it (past what was looked at when
; none; to a chunk at or past the segment's end once the walk is over).
; Keeps rbx, rbp, r12-r15, ymm7, ymm14, ymm15; clobbers rax, rcx, rdx, rsi,
; rdi, r8-r11, ymm4-ymm6, ymm8-ymm10.
.pf_next:
    mov         rax, [rsp + 8 + scan_frame.pfc]
    mov         rdx, rax
    shl         rdx, CHUNK_SHIFT
    cmp         rdx, sc_end
    jae         .pf_ret                         ; past the segment
    mov         r8, [rsp + 8 + scan_frame.fa]
    mov         r9, [rsp + 8 + scan_frame.fb]
    mov         r11, [rsp + 8 + scan_frame.fp]
    mov         rcx, rax
    shr         rcx, 6
    FILT_HITS   rdx, r8, r9, rcx, rsi, rdi, r11
    shrx        rdx, rdx, rax
    test        rdx, rdx
    jnz         .pf_found
    and         rax, ~63
    mov         r10d, PF_SPAN / 8
.pf_v:                                          ; the next 8 qwords (512 chunks),
    add         rax, 64                         ; as FILT_HITS does one
    inc         rcx
    mov         rdx, rax
    shl         rdx, CHUNK_SHIFT
    cmp         rdx, sc_end
    jae         .pf_stop
    dec         r10d
    js          .pf_stop
    vmovdqu     ymm4, [r9 + rcx * 8]            ; b's chunks q..q+3
    vmovdqu     ymm8, [r9 + rcx * 8 + 32]       ; q+4..q+7
    vmovdqu     ymm5, [r9 + rcx * 8 + 8]        ; and q+1..q+4
    vmovdqu     ymm9, [r9 + rcx * 8 + 40]       ; q+5..q+8
    vpsrlq      ymm6, ymm4, 1
    vpsrlq      ymm10, ymm8, 1
    vpsllq      ymm5, ymm5, 63
    vpsllq      ymm9, ymm9, 63
    vpor        ymm4, ymm4, ymm6
    vpor        ymm8, ymm8, ymm10
    vpor        ymm4, ymm4, ymm5
    vpor        ymm8, ymm8, ymm9
    vpand       ymm4, ymm4, [r8 + rcx * 8]
    vpand       ymm8, ymm8, [r8 + rcx * 8 + 32]
    vpand       ymm4, ymm4, [r11 + rcx * 8]
    vpand       ymm8, ymm8, [r11 + rcx * 8 + 32]
    vpor        ymm4, ymm4, ymm8
    vptest      ymm4, ymm4
    jnz         .pf_vhit
    add         rax, 7 * 64
    add         rcx, 7
    jmp         .pf_v
.pf_vhit:                                       ; which of the 8 (a chunk past
    FILT_HITS   rdx, r8, r9, rcx, rsi, rdi, r11 ; the segment's end ends the
    test        rdx, rdx                        ; walk at .pf_found)
    jnz         .pf_found
    add         rax, 64
    inc         rcx
    jmp         .pf_vhit
.pf_found:
    tzcnt       rdx, rdx
    add         rax, rdx                        ; the chunk
    mov         rdx, rax
    shl         rdx, CHUNK_SHIFT + TSH          ; its W bytes
    mov         rcx, rdx
    shr         rcx, TSH
    cmp         rcx, sc_end
    jae         .pf_stop                        ; past the segment: over
    mov         rcx, [rsp + 8 + scan_frame.qtail]
    and         ecx, PF_QLEN - 1
    mov         [rsp + 8 + scan_frame.qbuf + rcx * 8], rax
    inc         qword [rsp + 8 + scan_frame.qtail]
%assign pf_line 0
%rep (TW << CHUNK_SHIFT) / 64                    ; (its 2 or 4 lines)
    prefetcht0  [sc_w + rdx + pf_line]
%assign pf_line pf_line + 64
%endrep
    mov         rdx, [sc_ctx + tctx.cw]
    prefetcht0  [rdx + rax * 4]
    mov         rcx, [rsp + 8 + scan_frame.pfq2]
    mov         rsi, [rsp + 8 + scan_frame.pfq1]
    mov         [rsp + 8 + scan_frame.pfq2], rsi
    mov         [rsp + 8 + scan_frame.pfq1], rax
    test        rcx, rcx                        ; the chunk found two calls
    js          .pf_counted                     ; ago: its tctx.cw entries are
    mov         esi, [rdx + rcx * 4]            ; in by now; prefetch the
    mov         edi, [rdx + rcx * 4 + 4]        ; counts of its words (at most
    mov         rdx, [sc_ctx + tctx.wc]         ; PF_WC_LINES lines), which
    lea         rsi, [rdx + rsi * 8]            ; a hit there reads first
    lea         rdi, [rdx + rdi * 8]
    and         rsi, -64
%rep PF_WC_LINES
    cmp         rsi, rdi
    ja          .pf_counted
    prefetcht0  [rsi]
    add         rsi, 64
%endrep
.pf_counted:
    inc         rax
.pf_stop:
    mov         [rsp + 8 + scan_frame.pfc], rax
.pf_ret:
    ret

.done:
    vzeroupper
    mov         rdx, [rsp + scan_frame.abd]     ; (a, b): minus the counts of
    test        rdx, rdx                        ; all this segment's
    jz          .ab_added                       ; replacements
    neg         rdx
    mov         rsi, [sc_ctx + tctx.a]
    shl         rsi, PSHIFT
    or          rsi, [sc_ctx + tctx.b]
    call        dm_add
.ab_added:
    call        flush_marks
    call        publish_found
    RDTSC64
    sub         rax, [rsp + scan_frame.t0]
    add         [sc_dm + dmap.cyc], rax
    add         rsp, scan_frame_size
    RESTORE
ENDPROC
%undef  sc_ctx
%undef  sc_dm
%undef  sc_word
%undef  sc_word_d
%undef  sc_w
%undef  sc_pos
%undef  sc_end
%undef  sc_va
%undef  sc_vb

; publish_found: rbx = delta map, r12 = ctx.  tctx.remain -= dmap.found (locked),
; dmap.found = 0.  Clobbers rax.
%define pf_dm  rbx   ; the delta map
%define pf_ctx r12   ; the context
static publish_found:function
publish_found:
    xor         eax, eax
    xchg        rax, [pf_dm + dmap.found]       ; (its own line: no other writer)
    lock sub    [pf_ctx + tctx.remain], rax
    ret

%undef  pf_dm
%undef  pf_ctx