;-----------------------------------------------------------------------------
; train_merge.asm — BPE training: the merge loop.  worker runs on every
; thread (asmbpe_parallel, started by asmbpe_train): between two barriers the
; threads scan their segments (scan_segment, train_scan.asm); then thread 0
; runs coordinate: applies the delta maps (train_dmap.asm) to the pair table
; (train_pairs.asm), pushes the pairs whose count went up on the heap
; (train_heap.asm), chooses the next merge (choose, record_merge) and
; compacts W when half of it is dead (train_compact.asm).  naive_loop
; (train_recount.asm) uses record_merge too.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "train.inc"

extern pt_get
extern pt_add
extern tr_heap_push
extern tr_heap_pop
extern tr_heap_fill
extern dm_clear
extern scan_segment
extern compact

section .text

;=============================================================================
; choosing and recording merges (thread 0)
;=============================================================================

; record_merge: rdi = ctx, rsi = count, rdx = P.  Writes merge m, sets tctx.a,
; tctx.b, tctx.t, counts it, checks the count did not go up.  Clobbers rax-rdx, r8.
PROC record_merge
    mov         r8, [rdi + tctx.stats]
    mov         rax, [r8 + ST_MERGES * 8]       ; m
    mov         rcx, rdx
    shr         rcx, PSHIFT                     ; left
    mov         [rdi + tctx.a], rcx
%ifdef TOK32
    mov         ecx, edx
%else
    movzx       ecx, dx
%endif
    mov         [rdi + tctx.b], rcx             ; right
    mov         rdx, [rdi + tctx.merges]
%ifdef TOK32
    shl         rcx, 32
    or          rcx, [rdi + tctx.a]             ; left | right << 32
    mov         [rdx + rax * 8], rcx
%else
    shl         ecx, 16
    or          ecx, [rdi + tctx.a]             ; left | right << 16
    mov         [rdx + rax * 4], ecx
%endif
    mov         rdx, [rdi + tctx.counts]
    mov         [rdx + rax * 8], rsi
    test        rax, rax
    jz          .counted
    cmp         rsi, [rdx + rax * 8 - 8]
    jbe         .counted
    cmp         qword [r8 + ST_VERIFY_MERGE * 8], -1
    jne         .counted
    mov         [r8 + ST_VERIFY_MERGE * 8], rax ; the winning count went up
.counted:
    mov         [rdi + tctx.remain], rsi        ; all of the pair's count to find
    lea         rcx, [rax + 256]
    mov         [rdi + tctx.t], rcx
    inc         rax
    mov         [r8 + ST_MERGES * 8], rax
    ret
ENDPROC

; choose: rdi = ctx.  Takes the best pair from the heap (lazy deletion: a
; stale top is re-pushed with its real count when lower and still at the
; floor, dropped when higher) and records it, or sets tctx.done.  A heap run
; out with its floor above min_count is refilled from half the floor (not
; below min_count: tr_heap_fill).
; Keeps rdi.
%define ch_ctx    rbx   ; the context
%define ch_cnt    r12   ; the top entry's count
%define ch_pair   r13   ; its P
PROC choose
    SAVE        rbx, r12, r13
    mov         ch_ctx, rdi
    mov         r8, [ch_ctx + tctx.stats]
    mov         rax, [r8 + ST_MERGES * 8]
    cmp         rax, [ch_ctx + tctx.nmerges]
    jae         .done
.top:
    cmp         qword [ch_ctx + tctx.hn], 0
    je          .empty
    mov         rax, [ch_ctx + tctx.h]
    mov         ch_cnt, [rax + HEAP_OFF + hent.count]
    mov         ch_pair, [rax + HEAP_OFF + hent.pair]
    mov         rcx, [ch_ctx + tctx.hn]         ; the pair-table slots of the
    cmp         rcx, 5                          ; root's 4 children, one of
    jb          .children_fetched               ; which is the next top (its
%assign ch_k 1                                  ; lookup below then overlaps
%rep 4                                          ; theirs)
    mov         rdx, [rax + HEAP_OFF + ch_k * 16 + hent.pair]
    PAIR_HASH   rdx, edx, rsi
    and         rdx, [ch_ctx + tctx.ptmask]
    shl         rdx, 4
    add         rdx, [ch_ctx + tctx.pt]
    prefetcht0  [rdx]
%assign ch_k ch_k + 1
%endrep
.children_fetched:
    mov         rdi, ch_ctx
    mov         rsi, ch_pair
    call        pt_get
    cmp         rax, ch_cnt
    jne         .stale
    cmp         rax, [ch_ctx + tctx.mincount]
    jb          .done                           ; (min_count >= 1: also 0)
    mov         rdi, ch_ctx
    call        tr_heap_pop
    mov         rdi, ch_ctx
    mov         rsi, ch_cnt
    mov         rdx, ch_pair
    call        record_merge
    jmp         .ret
.stale:
    push        rax
    push        rax
    mov         rdi, ch_ctx
    call        tr_heap_pop
    pop         rax
    pop         rsi
    cmp         rsi, ch_cnt
    jae         .top                            ; higher: a fresher entry exists
    cmp         rsi, [ch_ctx + tctx.hfloor]
    jb          .top                            ; below the floor (or gone)
    mov         rdi, ch_ctx
    mov         rdx, ch_pair
    call        tr_heap_push
    jmp         .top
.empty:                                         ; no pair at the floor or
    mov         rax, [ch_ctx + tctx.hfloor]     ; above: the floor halved (not
    cmp         rax, [ch_ctx + tctx.mincount]   ; below min_count), the pair
    jbe         .done                           ; table's pairs from there
    shr         rax, 1                          ; pushed again (T110: the last
    cmp         rax, [ch_ctx + tctx.mincount]   ; merges rarely go far below
    cmovb       rax, [ch_ctx + tctx.mincount]   ; the first floor)
    mov         [ch_ctx + tctx.hfloor], rax
    mov         rdi, ch_ctx
    call        tr_heap_fill
    jmp         .top
.done:
    mov         qword [ch_ctx + tctx.done], 1
.ret:
    mov         rdi, ch_ctx
    RESTORE
ENDPROC
%undef  ch_ctx
%undef  ch_cnt
%undef  ch_pair

;=============================================================================
; coordinate (thread 0 between merges): apply every thread's deltas to the
; pair table, push the pairs whose count went up, choose the next merge,
; compact the words when at most half of W is still in use.
;=============================================================================
; PT_PREFETCH pair, pair32, tmp (%1 = pair, %2 = its 32-bit view, %3 = tmp):
; prefetch the pair-table slot where pt_add starts
; probing for the pair (a register holding it).  Needs r12 = ctx; clobbers
; %1 and %3.
%macro PT_PREFETCH 3
    PAIR_HASH   %1, %2, %3
    and         %1, [r12 + tctx.ptmask]
    shl         %1, 4
    add         %1, [r12 + tctx.pt]
    prefetcht0  [%1]
%endmacro

%define co_ctx   r12   ; the context
%define co_tsc   r15   ; rdtsc at the start of the phase being timed
%define co_tid   r13   ; the thread whose deltas are applied
%define co_tid_d r13d  ; (32-bit view)
%define co_dm    rbx   ; its delta map (dm_clear reads rbx)
%define co_i     r14   ; the delta being applied (index in its list)
%define co_i_d   r14d  ; (32-bit view)
static coordinate:function
coordinate:
    SAVE        rbx, r12, r13, r14, r15
    mov         co_ctx, rdi
    RDTSC64
    mov         co_tsc, rax
    xor         eax, eax                        ; chunks this merge scanned
    xor         ecx, ecx                        ; (all threads)
.sum_chunks:
    mov         rdx, [co_ctx + tctx.dm + rcx * 8]
    add         rax, [rdx + dmap.chunks]
    mov         qword [rdx + dmap.chunks], 0
    inc         rcx
    cmp         rcx, [co_ctx + tctx.nth]
    jb          .sum_chunks
    mov         rcx, [co_ctx + tctx.pm]         ; per-merge records: the
    test        rcx, rcx                        ; chunks of the merge just
    jz          .chunks_kept                    ; scanned
    mov         rdx, [co_ctx + tctx.stats]
    mov         rdx, [rdx + ST_MERGES * 8]
    shl         rdx, 5
    mov         [rcx + rdx - 32 + 24], rax
.chunks_kept:
    cmp         qword [co_ctx + tctx.nth], 1    ; go solo?
    jbe         .solo_done
    cmp         qword [co_ctx + tctx.solo], 0
    jne         .solo_done
    cmp         rax, SOLO_CHUNKS
    jb          .cheap
    mov         qword [co_ctx + tctx.cheap], 0
    jmp         .solo_done
.cheap:
    inc         qword [co_ctx + tctx.cheap]
    cmp         qword [co_ctx + tctx.cheap], SOLO_RUN
    jb          .solo_done
    mov         qword [co_ctx + tctx.solo], 1
    mov         rax, [co_ctx + tctx.stats]
    mov         rcx, [rax + ST_MERGES * 8]
    mov         [rax + ST_SOLO_MERGE * 8], rcx
.solo_done:
    mov         rax, [co_ctx + tctx.stats]      ; the merge just scanned
    mov         rax, [rax + ST_MERGES * 8]
    dec         rax
    mov         [co_ctx + tctx.pmm], rax
    xor         co_tid_d, co_tid_d              ; thread
.thread:
    cmp         co_tid, [co_ctx + tctx.nth]
    jae         .applied
    mov         co_dm, [co_ctx + tctx.dm + co_tid * 8]
    mov         rax, [co_dm + dmap.status]
    test        rax, rax
    jz          .status_ok
    mov         [co_ctx + tctx.status], rax
.status_ok:
    mov         rax, [co_dm + dmap.dead]
    add         [co_ctx + tctx.dead], rax
    mov         qword [co_dm + dmap.dead], 0
    mov         rcx, [co_ctx + tctx.pm]         ; per-merge records
    test        rcx, rcx
    jz          .no_record
    mov         rax, [co_ctx + tctx.pmm]
    shl         rax, 5
    add         rcx, rax
    mov         rax, [co_dm + dmap.mwords]
    add         [rcx + 8], rax
    mov         rax, [co_dm + dmap.repl]
    add         [rcx + 16], rax
.no_record:
    mov         qword [co_dm + dmap.mwords], 0
    mov         qword [co_dm + dmap.repl], 0
    xor         co_i_d, co_i_d                  ; prefetch the first
.warm:                                          ; APPLY_AHEAD slots (the loop
    cmp         co_i, APPLY_AHEAD               ; prefetches the rest ahead)
    jae         .warmed
    cmp         co_i, [co_dm + dmap.used]
    jae         .warmed
    mov         rax, [co_dm + dmap.list]
    mov         eax, [rax + co_i * 4]
    shl         rax, 4
    add         rax, [co_dm + dmap.slots]
    mov         rax, [rax + pslot.key]
    PT_PREFETCH rax, eax, rdx
    inc         co_i
    jmp         .warm
.warmed:
    xor         co_i_d, co_i_d
.entry:
    cmp         co_i, [co_dm + dmap.used]
    jae         .thread_done
    lea         rcx, [co_i + APPLY_AHEAD]       ; prefetch the pair-table slot
    cmp         rcx, [co_dm + dmap.used]        ; of the delta APPLY_AHEAD on
    jae         .prefetched                     ; (the table is far larger than
    mov         rax, [co_dm + dmap.list]        ; the caches)
    mov         eax, [rax + rcx * 4]
    shl         rax, 4
    add         rax, [co_dm + dmap.slots]
    mov         rax, [rax + pslot.key]
    PT_PREFETCH rax, eax, rdx
.prefetched:
    mov         rax, [co_dm + dmap.list]
    mov         eax, [rax + co_i * 4]
    shl         rax, 4
    add         rax, [co_dm + dmap.slots]
    mov         rdx, [rax + pslot.val]
    test        rdx, rdx
    jz          .next_entry
    mov         rsi, [rax + pslot.key]
    push        rdx
    push        rsi
    mov         rdi, co_ctx
    call        pt_add                          ; rax = new count
    pop         rdx                             ; P
    pop         rcx                             ; delta
    test        rcx, rcx
    jle         .next_entry
    cmp         rax, [co_ctx + tctx.hfloor]     ; below the floor: not kept
    jb          .next_entry
    mov         rdi, co_ctx
    mov         rsi, rax
    call        tr_heap_push
.next_entry:
    inc         co_i
    jmp         .entry
.thread_done:
    call        dm_clear
    inc         co_tid
    jmp         .thread
.applied:
    RDTSC64
    mov         rcx, rax
    sub         rax, co_tsc
    mov         co_tsc, rcx
    mov         rdx, [co_ctx + tctx.stats]
    add         [rdx + ST_CYC_APPLY * 8], rax
    cmp         qword [co_ctx + tctx.status], 0
    jne         .stop
    mov         rdi, co_ctx
    call        choose
    mov         dword [co_ctx + tctx.nextseg], 0   ; segments for the next merge
    RDTSC64
    sub         rax, co_tsc
    mov         rdx, [co_ctx + tctx.stats]
    add         [rdx + ST_CYC_HEAP * 8], rax
    cmp         qword [co_ctx + tctx.done], 0
    jne         .ret
    mov         rax, [co_ctx + tctx.dead]       ; compact when half of W is
    shl         rax, 1                          ; of no use any more
    cmp         rax, [co_ctx + tctx.wlen]
    jbe         .ret
    RDTSC64
    mov         co_tsc, rax
    mov         rdi, co_ctx
    call        compact
    RDTSC64
    sub         rax, co_tsc
    mov         rdx, [co_ctx + tctx.stats]
    add         [rdx + ST_CYC_COMPACT * 8], rax
    jmp         .ret
.stop:
    mov         qword [co_ctx + tctx.done], 1
.ret:
    cmp         qword [co_ctx + tctx.pm], 0     ; the merge's cycles, chosen
    je          .no_cycles                      ; to next chosen
    RDTSC64
    mov         rcx, rax
    sub         rax, [co_ctx + tctx.tlast]
    mov         [co_ctx + tctx.tlast], rcx
    mov         rcx, [co_ctx + tctx.pmm]
    shl         rcx, 5
    add         rcx, [co_ctx + tctx.pm]
    mov         [rcx], rax
.no_cycles:
    RESTORE
%undef  co_ctx
%undef  co_tsc
%undef  co_tid
%undef  co_tid_d
%undef  co_dm
%undef  co_i
%undef  co_i_d

;=============================================================================
; worker(ctx, tid): the merge loop of every thread.  Barrier 1: the merge is
; chosen (or tctx.done).  Scan and rewrite this thread's words.  Barrier 2: all
; scans done; thread 0 coordinates while the others wait at barrier 1.
; Once tctx.solo is set (see train.inc), the other threads leave at barrier 1
; and thread 0 scans all of W and coordinates, merge after merge.
;=============================================================================
%define wk_ctx r12   ; the context
%define wk_tid r13   ; this thread
%define wk_dm  rbx   ; its delta map
PROC worker
    SAVE        rbx, r12, r13
    mov         wk_ctx, rdi
    mov         wk_tid, rsi
    mov         wk_dm, [wk_ctx + tctx.dm + wk_tid * 8]
.round:
    lea         rdi, [wk_ctx + tctx.bar]
    call        asmbpe_barrier_wait
    cmp         qword [wk_ctx + tctx.done], 0
    jne         .exit
    cmp         qword [wk_ctx + tctx.solo], 0
    jne         .solo
.claim:                                         ; next segment, any thread
    mov         eax, 1
    lock xadd   [wk_ctx + tctx.nextseg], eax
    cmp         eax, [wk_ctx + tctx.nseg]
    jae         .scanned
    mov         rdi, wk_ctx
    mov         rsi, wk_dm
    mov         rdx, [wk_ctx + tctx.seg + rax * 8]
    mov         rcx, [wk_ctx + tctx.seg + rax * 8 + 8]
    call        scan_segment
    jmp         .claim
.scanned:
    lea         rdi, [wk_ctx + tctx.bar]
    call        asmbpe_barrier_wait
    test        wk_tid, wk_tid
    jnz         .round
    mov         rdi, wk_ctx
    call        coordinate
    jmp         .round
.solo:
    test        wk_tid, wk_tid
    jnz         .exit
.solo_merge:
    mov         rdi, wk_ctx
    mov         rsi, wk_dm
    xor         edx, edx
    mov         rcx, [wk_ctx + tctx.nw]
    call        scan_segment
    mov         rdi, wk_ctx
    call        coordinate
    cmp         qword [wk_ctx + tctx.done], 0
    je          .solo_merge
.exit:
    RESTORE
ENDPROC
%undef  wk_ctx
%undef  wk_tid
%undef  wk_dm
