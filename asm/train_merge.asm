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
    mov         ecx, edx
    shr         ecx, 16                         ; left
    mov         [rdi + tctx.a], rcx
    movzx       ecx, dx
    mov         [rdi + tctx.b], rcx                ; right
    shl         ecx, 16
    or          ecx, [rdi + tctx.a]                ; left | right << 16
    mov         rdx, [rdi + tctx.merges]
    mov         [rdx + rax * 4], ecx
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
    mov         [rdi + tctx.remain], rsi           ; all of the pair's count to find
    lea         rcx, [rax + 256]
    mov         [rdi + tctx.t], rcx
    inc         rax
    mov         [r8 + ST_MERGES * 8], rax
    ret
ENDPROC

; choose: rdi = ctx.  Takes the best pair from the heap (lazy deletion: a
; stale top is re-pushed with its real count when lower, dropped when
; higher) and records it, or sets tctx.done.  Keeps rdi.
PROC choose
    SAVE        rbx, r12, r13
    mov         rbx, rdi
    mov         r8, [rbx + tctx.stats]
    mov         rax, [r8 + ST_MERGES * 8]
    cmp         rax, [rbx + tctx.nmerges]
    jae         .done
.top:
    cmp         qword [rbx + tctx.hn], 0
    je          .done
    mov         rax, [rbx + tctx.h]
    mov         r12, [rax + hent.count]
    mov         r13, [rax + hent.pair]
    mov         rdi, rbx
    mov         esi, r13d
    call        pt_get
    cmp         rax, r12
    jne         .stale
    cmp         rax, [rbx + tctx.mincount]
    jb          .done                           ; (min_count >= 1: also 0)
    mov         rdi, rbx
    call        tr_heap_pop
    mov         rdi, rbx
    mov         rsi, r12
    mov         rdx, r13
    call        record_merge
    jmp         .ret
.stale:
    push        rax
    push        rax
    mov         rdi, rbx
    call        tr_heap_pop
    pop         rax
    pop         rsi
    cmp         rsi, r12
    jae         .top                            ; higher: a fresher entry exists
    test        rsi, rsi
    jz          .top                            ; gone
    mov         rdi, rbx
    mov         rdx, r13
    call        tr_heap_push
    jmp         .top
.done:
    mov         qword [rbx + tctx.done], 1
.ret:
    mov         rdi, rbx
    RESTORE
ENDPROC

;=============================================================================
; coordinate (thread 0 between merges): apply every thread's deltas to the
; pair table, push the pairs whose count went up, choose the next merge,
; compact the words when at most half of W is still in use.
;=============================================================================
; PT_PREFETCH pair, tmp: prefetch the pair-table slot where pt_add starts
; probing for the pair (a register holding it, zero-extended).  Needs r12 =
; ctx; clobbers both.
%macro PT_PREFETCH 2
    mov         %2, PAIR_HASH_K
    imul        %1, %2
    shr         %1, 32
    and         %1, [r12 + tctx.ptmask]
    shl         %1, 4
    add         %1, [r12 + tctx.pt]
    prefetcht0  [%1]
%endmacro

static coordinate:function
coordinate:
    SAVE        rbx, r12, r13, r14, r15
    mov         r12, rdi
    RDTSC64
    mov         r15, rax
    cmp         qword [r12 + tctx.nth], 1          ; go solo?
    jbe         .solo_done
    cmp         qword [r12 + tctx.solo], 0
    jne         .solo_done
    xor         eax, eax                        ; chunks this merge scanned
    xor         ecx, ecx
.sum_chunks:
    mov         rdx, [r12 + tctx.dm + rcx * 8]
    add         rax, [rdx + dmap.chunks]
    mov         qword [rdx + dmap.chunks], 0
    inc         rcx
    cmp         rcx, [r12 + tctx.nth]
    jb          .sum_chunks
    cmp         rax, SOLO_CHUNKS
    jb          .cheap
    mov         qword [r12 + tctx.cheap], 0
    jmp         .solo_done
.cheap:
    inc         qword [r12 + tctx.cheap]
    cmp         qword [r12 + tctx.cheap], SOLO_RUN
    jb          .solo_done
    mov         qword [r12 + tctx.solo], 1
    mov         rax, [r12 + tctx.stats]
    mov         rcx, [rax + ST_MERGES * 8]
    mov         [rax + ST_SOLO_MERGE * 8], rcx
.solo_done:
    mov         rax, [r12 + tctx.stats]            ; the merge just scanned
    mov         rax, [rax + ST_MERGES * 8]
    dec         rax
    mov         [r12 + tctx.pmm], rax
    xor         r13d, r13d                      ; thread
.thread:
    cmp         r13, [r12 + tctx.nth]
    jae         .applied
    mov         rbx, [r12 + tctx.dm + r13 * 8]
    mov         rax, [rbx + dmap.status]
    test        rax, rax
    jz          .status_ok
    mov         [r12 + tctx.status], rax
.status_ok:
    mov         rax, [rbx + dmap.dead]
    add         [r12 + tctx.dead], rax
    mov         qword [rbx + dmap.dead], 0
    mov         rcx, [r12 + tctx.pm]               ; per-merge records
    test        rcx, rcx
    jz          .no_record
    mov         rax, [r12 + tctx.pmm]
    lea         rax, [rax + rax * 2]
    lea         rcx, [rcx + rax * 8]
    mov         rax, [rbx + dmap.mwords]
    add         [rcx + 8], rax
    mov         rax, [rbx + dmap.repl]
    add         [rcx + 16], rax
.no_record:
    mov         qword [rbx + dmap.mwords], 0
    mov         qword [rbx + dmap.repl], 0
    xor         r14d, r14d                      ; prefetch the first
.warm:                                          ; APPLY_AHEAD slots (the loop
    cmp         r14, APPLY_AHEAD                ; prefetches the rest ahead)
    jae         .warmed
    cmp         r14, [rbx + dmap.used]
    jae         .warmed
    mov         rax, [rbx + dmap.list]
    mov         eax, [rax + r14 * 4]
    shl         rax, 4
    add         rax, [rbx + dmap.slots]
    mov         eax, [rax + pslot.key]
    PT_PREFETCH rax, rdx
    inc         r14
    jmp         .warm
.warmed:
    xor         r14d, r14d
.entry:
    cmp         r14, [rbx + dmap.used]
    jae         .thread_done
    lea         rcx, [r14 + APPLY_AHEAD]        ; prefetch the pair-table slot
    cmp         rcx, [rbx + dmap.used]            ; of the delta APPLY_AHEAD on
    jae         .prefetched                     ; (the table is far larger than
    mov         rax, [rbx + dmap.list]            ; the caches)
    mov         eax, [rax + rcx * 4]
    shl         rax, 4
    add         rax, [rbx + dmap.slots]
    mov         eax, [rax + pslot.key]
    PT_PREFETCH rax, rdx
.prefetched:
    mov         rax, [rbx + dmap.list]
    mov         eax, [rax + r14 * 4]
    shl         rax, 4
    add         rax, [rbx + dmap.slots]
    mov         rdx, [rax + pslot.val]
    test        rdx, rdx
    jz          .next_entry
    mov         esi, [rax + pslot.key]
    push        rdx
    push        rsi
    mov         rdi, r12
    call        pt_add                          ; rax = new count
    pop         rdx                             ; P
    pop         rcx                             ; delta
    test        rcx, rcx
    jle         .next_entry
    mov         rdi, r12
    mov         rsi, rax
    call        tr_heap_push
.next_entry:
    inc         r14
    jmp         .entry
.thread_done:
    call        dm_clear
    inc         r13
    jmp         .thread
.applied:
    RDTSC64
    mov         rcx, rax
    sub         rax, r15
    mov         r15, rcx
    mov         rdx, [r12 + tctx.stats]
    add         [rdx + ST_CYC_APPLY * 8], rax
    cmp         qword [r12 + tctx.status], 0
    jne         .stop
    mov         rdi, r12
    call        choose
    mov         dword [r12 + tctx.nextseg], 0      ; segments for the next merge
    RDTSC64
    sub         rax, r15
    mov         rdx, [r12 + tctx.stats]
    add         [rdx + ST_CYC_HEAP * 8], rax
    cmp         qword [r12 + tctx.done], 0
    jne         .ret
    mov         rax, [r12 + tctx.dead]             ; compact when half of W is
    shl         rax, 1                          ; of no use any more
    cmp         rax, [r12 + tctx.wlen]
    jbe         .ret
    RDTSC64
    mov         r15, rax
    mov         rdi, r12
    call        compact
    RDTSC64
    sub         rax, r15
    mov         rdx, [r12 + tctx.stats]
    add         [rdx + ST_CYC_COMPACT * 8], rax
    jmp         .ret
.stop:
    mov         qword [r12 + tctx.done], 1
.ret:
    cmp         qword [r12 + tctx.pm], 0           ; the merge's cycles, chosen
    je          .no_cycles                      ; to next chosen
    RDTSC64
    mov         rcx, rax
    sub         rax, [r12 + tctx.tlast]
    mov         [r12 + tctx.tlast], rcx
    mov         rcx, [r12 + tctx.pmm]
    lea         rcx, [rcx + rcx * 2]
    shl         rcx, 3
    add         rcx, [r12 + tctx.pm]
    mov         [rcx], rax
.no_cycles:
    RESTORE

;=============================================================================
; worker(ctx, tid): the merge loop of every thread.  Barrier 1: the merge is
; chosen (or tctx.done).  Scan and rewrite this thread's words.  Barrier 2: all
; scans done; thread 0 coordinates while the others wait at barrier 1.
; Once tctx.solo is set (see train.inc), the other threads leave at barrier 1
; and thread 0 scans all of W and coordinates, merge after merge.
;=============================================================================
PROC worker
    SAVE        rbx, r12, r13
    mov         r12, rdi
    mov         r13, rsi
    mov         rbx, [r12 + tctx.dm + r13 * 8]
.round:
    lea         rdi, [r12 + tctx.bar]
    call        asmbpe_barrier_wait
    cmp         qword [r12 + tctx.done], 0
    jne         .exit
    cmp         qword [r12 + tctx.solo], 0
    jne         .solo
.claim:                                         ; next segment, any thread
    mov         eax, 1
    lock xadd   [r12 + tctx.nextseg], eax
    cmp         eax, [r12 + tctx.nseg]
    jae         .scanned
    mov         rdi, r12
    mov         rsi, rbx
    mov         rdx, [r12 + tctx.seg + rax * 8]
    mov         rcx, [r12 + tctx.seg + rax * 8 + 8]
    call        scan_segment
    jmp         .claim
.scanned:
    lea         rdi, [r12 + tctx.bar]
    call        asmbpe_barrier_wait
    test        r13, r13
    jnz         .round
    mov         rdi, r12
    call        coordinate
    jmp         .round
.solo:
    test        r13, r13
    jnz         .exit
.solo_merge:
    mov         rdi, r12
    mov         rsi, rbx
    xor         edx, edx
    mov         rcx, [r12 + tctx.nw]
    call        scan_segment
    mov         rdi, r12
    call        coordinate
    cmp         qword [r12 + tctx.done], 0
    je          .solo_merge
.exit:
    RESTORE
ENDPROC
