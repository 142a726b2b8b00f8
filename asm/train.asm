;-----------------------------------------------------------------------------
; train.asm — BPE training (SPEC §4) over the words counted by count.asm:
; layout as token runs separated by SEP, an exact pair table, a max-heap with
; lazy deletion, and the merge loop: every thread scans its share of the
; words with vpcmpeqw (vpcmpeqd: u32) for the chosen pair, rewrites each word it hits in
; place (left to right, non-overlapping) and collects the exact pair-count
; changes in its own delta map; thread 0 then applies the deltas, pushes
; pairs whose count went up, and takes the next pair from the heap.
; naive mode recounts every pair for every merge; verify recounts at the end.
;
; This file holds the entry point, asmbpe_train: it lays out W, maps the
; context (struc tctx, train.inc) and the tables, runs the loop, and frees
; everything.  The subsystems are in train_*.asm:
;   train_pairs.asm    pair table (pt_*)
;   train_heap.asm     max-heap of candidate pairs (tr_heap_*)
;   train_dmap.asm     per-thread delta maps (dm_*)
;   train_scan.asm     scan and rewrite of a segment (scan_segment)
;   train_layout.asm   W laid out from the word table on every thread
;   train_compact.asm  segments, compaction, chunk filters (bloom_build)
;   train_merge.asm    merge loop: worker, coordinate, choose, record_merge
;   train_recount.asm  count_byte_pairs, count_all_pairs, naive_loop, verify
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "wordtab.inc"
%include "train.inc"

%define ASMBPE_EVERIFY  -5

extern pt_alloc
extern pt_free
extern tr_heap_push
extern tr_heap_fill
extern dm_alloc
extern dm_free
extern segments
extern bloom_par
extern layout_words
extern count_all_pairs
extern count_byte_pairs
extern choose
extern worker
extern naive_loop
extern verify

section .text

;-----------------------------------------------------------------------------
; int64_t asmbpe_train(const asmbpe_wordtab *t, uint64_t n_merges,
;                      uint64_t min_count, uint64_t threads, uint64_t flags,
;                      uint32_t *merges, uint64_t *counts, uint64_t *stats)
;
; Learns up to n_merges merges (SPEC §4) from the words of t: merge i joins
; merges[i] = left | right << 16 into token 256 + i, counts[i] its count.
; asmbpe_train32 (this file assembled with -DTOK32, train.inc) is the same
; with u32 tokens: up to 2^20 - 256 merges, merges a uint64_t * of
; left | right << 32 (a u32 [n][2] array).  Unless flags has TF_WIDE_ONLY
; (8) or naive, it calls asmbpe_train (TF_HANDOFF) for its first
; stats[ST_NARROW] merges (0: 65,279), widens W and the merges in place and
; goes on (.hybrid, at the end).
; Stops early when no pair has min_count (0 means 1).  flags: 1 naive (one
; thread, every pair recounted for every merge), 2 verify, 4 release the
; word table once laid out.  stats: the ASMBPE_TS_* entries.  Returns the
; merges learned; ASMBPE_EVERIFY when verify found a disagreement (merges and
; stats are still written); ASMBPE_EINVAL, ASMBPE_ENOMEM, ASMBPE_ETHREAD.
; Registers: the SysV ABI (rbx, rbp, r12-r15 kept; counts and stats on the
; stack).
;-----------------------------------------------------------------------------
%define at_tab     r12   ; the word table t (until the result is kept there)
%define at_nth     r15   ; threads (1 in naive mode)
%define at_nth_d   r15d  ; (32-bit view)
%define at_flags   rbx   ; flags (until .free_rest: then at_ctx)
%define at_flags_d ebx   ; (32-bit view)
%define at_merges  rbp   ; merges out
; (the context lives in [rsp]; r13 and r14 are each phase's loop registers)
%ifdef TOK32
extern asmbpe_train                             ; the u16 build: the first merges
FUNC asmbpe_train32, 8, 15, 0, tab, nmerges, mincount, threads, flags, merges, counts, stats
%else
FUNC asmbpe_train, 8, 15, 0, tab, nmerges, mincount, threads, flags, merges, counts, stats
%endif
    STACK_ALLOC 8                               ; aligned calls
    mov         rax, ASMBPE_EINVAL              ; int64_t: sign-extended
    test        threadsq, threadsq
    jz          .ret
    cmp         threadsq, MAX_THREADS
    ja          .ret
    mov         rax, TRAIN_MAX_MERGES
    cmp         nmergesq, rax
    ja          .einval
    mov         at_tab, tabq
    mov         r13, nmergesq
    mov         r14, mincountq
    mov         at_nth, threadsq
    mov         at_flags, flagsq
    mov         at_merges, mergesq
%ifdef TOK32
    test        at_flags_d, TF_WIDE_ONLY | TF_NAIVE
    jz          .hybrid                         ; u16 tokens first, then widen
%endif
    test        at_flags_d, TF_NAIVE
    jz          .threads_ok
    mov         at_nth_d, 1
.threads_ok:
    xor         r8d, r8d                        ; the counting threads' empty
.free_thread_tabs:                              ; tables: not needed here (a
    mov         rdi, [at_tab + wtab.thread_tabs + r8 * 8]  ; later count maps
    mov         qword [at_tab + wtab.thread_tabs + r8 * 8], 0 ; new ones)
    push        r8
    push        r8
    call        asmbpe_tab_free
    pop         r8
    pop         r8
    inc         r8
    cmp         r8, MAX_THREADS
    jb          .free_thread_tabs
    mov         edi, (tctx_size + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .enomem0
    mov         rdi, rax                        ; ctx lives in rdi / [rsp]
    mov         [rsp], rax
    mov         [rdi + tctx.nmerges], r13
    test        r14, r14
    jnz         .mc
    inc         r14
.mc:
    mov         [rdi + tctx.mincount], r14
    mov         [rdi + tctx.nth], at_nth
    mov         [rdi + tctx.flags], at_flags
    mov         [rdi + tctx.merges], at_merges
    mov         rax, countsm
    mov         [rdi + tctx.counts], rax
    mov         rax, statsm
    mov         [rdi + tctx.stats], rax
    mov         r8, rax
    mov         rax, [r8 + ST_PER_MERGE * 8]    ; (inputs)
    mov         [rdi + tctx.pm], rax
    mov         rax, [r8 + ST_PT_SLOTS * 8]
    mov         [rdi + tctx.ptfirst], rax
    mov         rax, [r8 + ST_PT_KEEP_DEAD * 8]
    mov         [rdi + tctx.ptkeep], rax
    xor         eax, eax
    mov         ecx, ST_COUNT
.zero_stats:
    mov         [r8 + rcx * 8 - 8], rax
    dec         ecx
    jnz         .zero_stats
    mov         qword [r8 + ST_VERIFY_MERGE * 8], -1
    mov         qword [r8 + ST_VERIFY_PAIR * 8], -1
    mov         qword [r8 + ST_SOLO_MERGE * 8], -1
    mov         rax, [rdi + tctx.pm]
    mov         [r8 + ST_PER_MERGE * 8], rax
    mov         [r8 + ST_THREADS * 8], at_nth
    lea         rdi, [rdi + tctx.bar]
    mov         rsi, at_nth
    call        asmbpe_barrier_init

    ; ---- layout: words of two or more bytes as token runs ----------------
    RDTSC64
    push        rax
    push        rax
    mov         rax, [at_tab + wtab.mask]       ; tctx.lblk: the first
    add         rax, LAYOUT_BLOCK               ; position and word of each
    shr         rax, 14                         ; block of LAYOUT_BLOCK slots
%if LAYOUT_BLOCK != 1 << 14                     ; (train_layout.asm lays the
%error "the blocks: the shift above"            ; blocks out on every thread),
%endif                                          ; then the totals
    mov         rdi, [rsp + 16]
    mov         [rdi + tctx.nblk], rax
    shl         rax, 4
    lea         rdi, [rax + 16]
    call        asmbpe_map
    mov         rdi, [rsp + 16]
    test        rax, rax
    jz          .enomem_layout
    mov         [rdi + tctx.lblk], rax
    mov         rcx, rax                        ; the block's record
    mov         r8, [at_tab + wtab.slots]
    mov         r9, [at_tab + wtab.mask]
    inc         r9
    shl         r9, 5
    add         r9, r8
    xor         r10d, r10d                      ; words
    xor         r11d, r11d                      ; tokens
.count_block:
    lea         rax, [r10 + r11 + 1]            ; (W[0] is a SEP)
    mov         [rcx], rax
    mov         [rcx + 8], r10
    add         rcx, 16
    cmp         r8, r9
    jae         .counted
    lea         rdx, [r8 + LAYOUT_BLOCK * slot_size]
    cmp         rdx, r9
    cmova       rdx, r9                         ; the block's end
.count_slots:
    cmp         r8, rdx
    jae         .count_block
    cmp         qword [r8 + slot.count], 0
    je          .count_next
    mov         rax, [r8 + slot.len]
    cmp         rax, 2
    jb          .count_next
    inc         r10
    add         r11, rax
.count_next:
    add         r8, slot_size
    jmp         .count_slots
.counted:
    mov         [rdi + tctx.nw], r10
    mov         r8, [rdi + tctx.stats]
    mov         [r8 + ST_WORDS * 8], r10
    mov         [r8 + ST_TOKENS * 8], r11
    lea         rax, [r10 + r11 + 1]
    mov         [rdi + tctx.wlen], rax
    lea         rdi, [rax * TW + W_TAIL * TW + 4095]
    test        at_flags_d, TF_HANDOFF          ; (room to widen W in place)
    jz          .w_sized
    lea         rdi, [rax * 4 + W_TAIL * 4 + 4095]
.w_sized:
    and         rdi, ~4095
    mov         rax, [rsp + 16]
    mov         [rax + tctx.wbytes], rdi
    call        asmbpe_map
    mov         rdi, [rsp + 16]
    mov         [rdi + tctx.w], rax
    test        rax, rax
    jz          .enomem_layout
    mov         rax, [rdi + tctx.nw]
    lea         rax, [rax * 8 + 4095 + 8]
    and         rax, ~4095
    mov         [rdi + tctx.nwcap], rax
    mov         rdi, rax
    call        asmbpe_map
    mov         rdi, [rsp + 16]
    mov         [rdi + tctx.ws], rax
    test        rax, rax
    jz          .enomem_layout
    mov         rdi, [rdi + tctx.nwcap]
    call        asmbpe_map
    mov         rdi, [rsp + 16]
    mov         [rdi + tctx.wc], rax
    test        rax, rax
    jz          .enomem_layout
    ; fill W block by block on every thread (train_layout.asm)
    mov         rdi, [rsp + 16]
    mov         r10, [rdi + tctx.w]
    mov         TWORD [r10], SEP
    mov         rsi, at_tab
    call        layout_words
    mov         rdi, [rsp + 16]
    test        eax, eax
    jz          .laid
    movsxd      rax, eax
    mov         [rdi + tctx.status], rax
    pop         rdx
    pop         rdx
    jmp         .cleanup
.laid:
    mov         r10, [rdi + tctx.w]
    mov         rcx, [rdi + tctx.wlen]          ; W's end
.filled:
    mov         edx, W_TAIL
.fill_tail:
    mov         TWORD [r10 + rcx * TW], SEP
    inc         rcx
    dec         edx
    jnz         .fill_tail
    test        qword [rdi + tctx.flags], TF_RELEASE
    jz          .keep_words                     ; the caller is done with t:
    push        rdi                             ; its pages go back before
    mov         rdi, at_tab                     ; the filters, pair table and
    call        asmbpe_wordtab_release          ; heap fault theirs in (the
    pop         rdi                             ; kernel hands the same,
.keep_words:                                    ; recently used, pages out)
    mov         rax, [rdi + tctx.wlen]          ; chunk filters: per bucket
    shr         rax, CHUNK_SHIFT + 6            ; the qwords of every chunk,
    add         rax, 5                          ; and four more (the scan
    shl         rax, 3                          ; reads q .. q + 4)
    mov         [rdi + tctx.blstride], rax
    imul        rax, rax, BLOOM_STRIDES         ; (the buckets, the trash bitmap,
    add         rax, 4095                       ; 32 strides: tctx.cw, u32 for
                                                ; each of stride * 8 chunks)
    and         rax, ~4095
    mov         [rdi + tctx.blbytes], rax
    push        rdi
    mov         rdi, rax
    call        asmbpe_map
    pop         rdi
    mov         [rdi + tctx.bloom], rax
    test        rax, rax
    jz          .enomem_layout
    mov         rcx, [rdi + tctx.blstride]
    imul        rcx, rcx, BLOOM_TRASH + 1
    add         rax, rcx
    mov         [rdi + tctx.cw], rax
    xor         edx, edx                        ; (a fresh mapping: zero)
    call        bloom_par
    RDTSC64
    pop         rdx
    pop         rdx
    sub         rax, rdx
    mov         rdi, [rsp]
    mov         r8, [rdi + tctx.stats]
    mov         [r8 + ST_CYC_LAYOUT * 8], rax
    jmp         .layout_done
.enomem_layout:
    pop         rdx
    pop         rdx
    jmp         .enomem
.layout_done:

    ; ---- delta maps, pair table, heap ------------------------------------
    xor         r13d, r13d
.dms:
    cmp         r13, at_nth
    jae         .dms_done
    call        dm_alloc
    mov         rdi, [rsp]
    mov         [rdi + tctx.dm + r13 * 8], rax
    test        rax, rax
    jz          .enomem
    inc         r13
    jmp         .dms
.dms_done:
    mov         rax, [rdi + tctx.wlen]          ; the pair table: half as
    lzcnt       rcx, rax                        ; many slots as W has
    mov         esi, 1                          ; positions (rounded up to a
    neg         ecx                             ; power of two): the pairs
    add         ecx, 63                         ; of most inputs fit without
    shlx        rsi, rsi, rcx                   ; growing more than once;
    mov         rax, [rdi + tctx.nmerges]       ; and no more than 1 per word
    shl         rax, 3                          ; and 8 per merge asked for
    mov         rdx, [rdi + tctx.nw]            ; (rounded up): what the live
    lea         rax, [rax + rdx]                ; pairs of english, code and
    lzcnt       rcx, rax                        ; multilingual reached at
    neg         ecx                             ; vocab 32768 (half W's
    add         ecx, 64                         ; positions for multilingual
    mov         edx, 1                          ; was 2^24 slots, 256 MB,
    shlx        rdx, rdx, rcx                   ; nearly all empty)
    cmp         rdx, rsi
    cmovb       rsi, rdx
    mov         eax, 1 << 16
    cmp         rsi, rax
    cmovb       rsi, rax
    mov         rax, [rdi + tctx.ptfirst]       ; (a test's first size)
    test        rax, rax
    cmovnz      rsi, rax
    mov         rax, [rdi + tctx.stats]
    mov         [rax + ST_PT_SLOTS * 8], rsi
    call        pt_alloc
    test        eax, eax
    jnz         .enomem
    mov         rdi, [rsp]
    mov         edi, 4096 * 16
    call        asmbpe_map
    mov         rdi, [rsp]
    mov         [rdi + tctx.h], rax
    mov         qword [rdi + tctx.hcap], 4096
    test        rax, rax
    jz          .enomem
    call        segments
    test        at_flags_d, TF_NAIVE
    jnz         .naive

    RDTSC64                                     ; ---- initial pair counts
    push        rax
    push        rax
    mov         rdi, [rsp + 16]
    call        count_byte_pairs
    mov         r8, [rdi + tctx.stats]
    mov         rax, [rdi + tctx.ptused]
    mov         [r8 + ST_PAIRS * 8], rax
    mov         rax, [rdi + tctx.mincount]      ; the heap: every pair counted
    mov         ecx, HEAP_FLOOR                 ; max(HEAP_FLOOR, min_count)
    cmp         rax, rcx                        ; times or more
    cmovb       rax, rcx
    mov         [rdi + tctx.hfloor], rax
    call        tr_heap_fill
.heap_filled:
    RDTSC64
    pop         rdx
    pop         rdx
    sub         rax, rdx
    mov         rdi, [rsp]
    mov         r8, [rdi + tctx.stats]
    mov         [r8 + ST_CYC_PAIRS * 8], rax
    cmp         qword [rdi + tctx.status], 0
    jne         .cleanup

    mov         rdi, [rsp]                      ; ---- the merge loop
    call        .run_loop
    mov         rdi, [rsp]
    mov         r8, [rdi + tctx.stats]
    test        at_flags_d, TF_HANDOFF          ; called by asmbpe_train32: it
    jz          .after_loop                     ; takes the context over
    cmp         qword [rdi + tctx.status], 0
    jne         .cleanup
    mov         [r8 + ST_HANDOFF * 8], rdi
    mov         rax, [r8 + ST_MERGES * 8]
    jmp         .ret
.after_loop:
    test        at_flags_d, TF_VERIFY
    jz          .cleanup
    RDTSC64
    push        rax
    push        rax
    mov         rdi, [rsp + 16]
    call        verify
    RDTSC64
    pop         rdx
    pop         rdx
    sub         rax, rdx
    mov         rdi, [rsp]
    mov         r8, [rdi + tctx.stats]
    mov         [r8 + ST_CYC_VERIFY * 8], rax
    jmp         .cleanup

.naive:
    RDTSC64
    push        rax
    push        rax
    mov         rdi, [rsp + 16]
    call        naive_loop
    RDTSC64
    pop         rdx
    pop         rdx
    sub         rax, rdx
    mov         rdi, [rsp]
    mov         r8, [rdi + tctx.stats]
    mov         [r8 + ST_CYC_LOOP * 8], rax
    jmp         .cleanup

.enomem:
    mov         rdi, [rsp]
    mov         qword [rdi + tctx.status], ASMBPE_ENOMEM
.cleanup:                                       ; rdi = ctx: stats, then free
    mov         rdi, [rsp]
    mov         r8, [rdi + tctx.stats]
    xor         r13d, r13d
.sum_threads:
    cmp         r13, at_nth
    jae         .summed
    mov         rax, [rdi + tctx.dm + r13 * 8]
    test        rax, rax
    jz          .summed
    mov         rcx, [rax + dmap.cyc]
    add         [r8 + ST_CYC_SCAN * 8], rcx
    mov         rcx, [rax + dmap.words]
    add         [r8 + ST_REWRITTEN * 8], rcx
    inc         r13
    jmp         .sum_threads
.summed:
    xor         edi, edi
    call        asmbpe_mapped_peak
    mov         rdi, [rsp]
    mov         r8, [rdi + tctx.stats]
    mov         [r8 + ST_PEAK_BYTES * 8], rax
    xor         r13d, r13d
.free_dms:
    cmp         r13, at_nth
    jae         .free_rest
    mov         rdi, [rsp]
    mov         rdi, [rdi + tctx.dm + r13 * 8]
    call        dm_free
    inc         r13
    jmp         .free_dms
.free_rest:
%define at_ctx     rbx   ; from here on: the context
    mov         at_ctx, [rsp]
    cmp         qword [at_ctx + tctx.pt], 0
    je          .no_pt
    mov         rdi, at_ctx
    call        pt_free
.no_pt:
    mov         rdi, [at_ctx + tctx.h]
    mov         rsi, [at_ctx + tctx.hcap]
    shl         rsi, 4
    call        asmbpe_unmap
    mov         rdi, [at_ctx + tctx.w]
    mov         rsi, [at_ctx + tctx.wbytes]
    call        asmbpe_unmap
    mov         rdi, [at_ctx + tctx.bloom]
    mov         rsi, [at_ctx + tctx.blbytes]
    call        asmbpe_unmap
    mov         rdi, [at_ctx + tctx.ws]
    mov         rsi, [at_ctx + tctx.nwcap]
    call        asmbpe_unmap
    mov         rdi, [at_ctx + tctx.lblk]
    mov         rsi, [at_ctx + tctx.nblk]
    shl         rsi, 4
    add         rsi, 16
    call        asmbpe_unmap
    mov         rdi, [at_ctx + tctx.wc]
    mov         rsi, [at_ctx + tctx.nwcap]
    call        asmbpe_unmap
    mov         rax, [at_ctx + tctx.status]     ; the result
    test        rax, rax
    jnz         .free_ctx
    mov         r8, [at_ctx + tctx.stats]
    mov         rax, [r8 + ST_MERGES * 8]
    test        qword [at_ctx + tctx.flags], TF_VERIFY
    jz          .free_ctx                       ; (the stats still tell)
    cmp         qword [r8 + ST_VERIFY_MERGE * 8], -1
    jne         .verify_failed
    cmp         qword [r8 + ST_VERIFY_PAIR * 8], -1
    je          .free_ctx
.verify_failed:
    mov         rax, ASMBPE_EVERIFY
.free_ctx:
    mov         r12, rax
    mov         rdi, at_ctx
    mov         esi, (tctx_size + 4095) & ~4095
    call        asmbpe_unmap
    mov         rax, r12
    jmp         .ret
.enomem0:
    mov         rax, ASMBPE_ENOMEM
    jmp         .ret

; .run_loop (a local routine; rdi = ctx): chooses the first merge and runs
; the merge loop (worker) on at_nth threads until it is done; its cycles are
; added to stats[ST_CYC_LOOP], a failure to start the threads goes to
; tctx.status.  Keeps rbx, rbp, r12-r15.
.run_loop:
    push        rdi                             ; (calls aligned from here)
    RDTSC64
    push        rax
    push        rax
    mov         rdi, [rsp + 16]
    call        choose
    mov         dword [rdi + tctx.nextseg], 0
    RDTSC64
    mov         [rdi + tctx.tlast], rax         ; the first merge is chosen
    cmp         qword [rdi + tctx.done], 0
    jne         .run_done
    lea         rdi, [worker]
    mov         rsi, [rsp + 16]
    mov         rdx, at_nth
    call        asmbpe_parallel
    mov         rdi, [rsp + 16]
    test        eax, eax
    jz          .run_done
    movsxd      rax, eax
    mov         [rdi + tctx.status], rax
.run_done:
    RDTSC64
    pop         rdx
    pop         rdx
    sub         rax, rdx
    pop         rdi
    mov         r8, [rdi + tctx.stats]
    add         [r8 + ST_CYC_LOOP * 8], rax
    ret
%ifdef TOK32
    ; ---- the first merges on u16 tokens, then W widened in place ------------
    ; asmbpe_train (the u16 build, TF_HANDOFF) lays W out with room for u32
    ; tokens and learns the first n16 merges; the pair keys, the pair table,
    ; the heap, the chunk filters and the delta maps are the same in both
    ; builds (train.inc), so only W's tokens and the merges written so far
    ; change width here, each in place from the end (entry i moves up to
    ; 2i or 4i bytes: past what is still to be read).
.hybrid:
    mov         r8, statsm
    mov         rax, [r8 + ST_NARROW * 8]       ; n16: stats[ST_NARROW], 0 for
    mov         ecx, TRAIN16_MAX_MERGES         ; as many as u16 ids allow, at
    test        rax, rax                        ; most n_merges
    cmovz       rax, rcx
    cmp         rax, rcx
    cmova       rax, rcx
    cmp         rax, r13
    cmova       rax, r13
    mov         r10, countsm
    mov         r11, statsm
    push        r11                             ; (stats, counts: the stack
    push        r10                             ; arguments; rsp stays aligned)
    mov         rdi, at_tab
    mov         rsi, rax
    mov         rdx, r14                        ; min_count
    mov         rcx, at_nth
    mov         r8, at_flags
    or          r8, TF_HANDOFF
    mov         r9, at_merges
    call        asmbpe_train
    add         rsp, 16
    test        rax, rax
    js          .ret                            ; (it cleaned up)
    mov         r8, statsm
    mov         [r8 + ST_NARROW * 8], rax       ; merges learned on u16 tokens
    mov         rdi, [r8 + ST_HANDOFF * 8]
    mov         qword [r8 + ST_HANDOFF * 8], 0
    mov         [rsp], rdi                      ; the context, as below
    RDTSC64
    mov         r14, rax
    mov         rsi, [rdi + tctx.w]             ; W: u16 -> u32, SEP -> SEP
    mov         rcx, [rdi + tctx.wlen]
    add         rcx, W_TAIL
    mov         edx, -1
.widen_w:
    dec         rcx
    movzx       eax, word [rsi + rcx * 2]
    cmp         eax, 0xFFFF
    cmove       eax, edx
    mov         [rsi + rcx * 4], eax
    test        rcx, rcx
    jnz         .widen_w
    mov         rcx, [r8 + ST_MERGES * 8]       ; merges: u32 left | right << 16
.widen_merges:                                  ; -> u64 left | right << 32
    test        rcx, rcx
    jz          .widened
    dec         rcx
    mov         eax, [at_merges + rcx * 4]
    mov         edx, eax
    shr         edx, 16
    movzx       eax, ax
    shl         rdx, 32
    or          rax, rdx
    mov         [at_merges + rcx * 8], rax
    jmp         .widen_merges
.widened:
    mov         [rdi + tctx.merges], at_merges
    mov         [rdi + tctx.nmerges], r13
    mov         [rdi + tctx.flags], at_flags
    mov         qword [rdi + tctx.done], 0
    lea         rdi, [rdi + tctx.bar]           ; (a fresh barrier for the
    mov         rsi, at_nth                     ; new threads)
    call        asmbpe_barrier_init
    RDTSC64                                     ; (the widening counts as loop
    sub         rax, r14                        ; time)
    mov         rdi, [rsp]
    mov         r8, [rdi + tctx.stats]
    add         [r8 + ST_CYC_LOOP * 8], rax
    call        .run_loop
    mov         rdi, [rsp]
    mov         r8, [rdi + tctx.stats]
    jmp         .after_loop
%endif
.einval:
    mov         rax, ASMBPE_EINVAL
.ret:
    STACK_FREE  8
    RET
ENDFUNC
%undef  at_tab
%undef  at_nth
%undef  at_nth_d
%undef  at_flags
%undef  at_merges
%undef  at_flags_d
%undef  at_ctx
