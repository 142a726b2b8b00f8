;-----------------------------------------------------------------------------
; train.asm — BPE training (SPEC §4) over the words counted by count.asm:
; layout as u16 runs separated by SEP, an exact pair table, a max-heap with
; lazy deletion, and the merge loop: every thread scans its share of the
; words with vpcmpeqw for the chosen pair, rewrites each word it hits in
; place (left to right, non-overlapping) and collects the exact pair-count
; changes in its own delta map; thread 0 then applies the deltas, pushes
; pairs whose count went up, and takes the next pair from the heap.
; naive mode recounts every pair for every merge; verify recounts at the end.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "wordtab.inc"
%include "train.inc"

%define ASMBPE_EVERIFY  -5

%macro RDTSC64 0                        ; rax = time stamp counter (clobbers rdx)
    rdtsc
    shl         rdx, 32
    or          rax, rdx
%endmacro

section .text

;=============================================================================
; pair table: slots {u32 key, u32 pad, u64 count}; key EMPTY_KEY = free
;=============================================================================

; pt_fill_empty: rdi = slots, rsi = nslots.  Clobbers rax, rcx, rdi.
pt_fill_empty:
    mov         rcx, rsi
    add         rcx, rcx                        ; qwords
    mov         rax, -1
    rep stosq
    ret

; pt_lookup: rdi = ctx, esi = P -> rax = its slot, or the free slot where it
; would go.  Clobbers rcx, rdx, r8.
pt_lookup:
    mov         eax, esi
    mov         rdx, PAIR_HASH_K
    imul        rax, rdx
    shr         rax, 32
    mov         r8, [rdi + X_PTMASK]
    mov         rcx, [rdi + X_PT]
.probe:
    and         rax, r8
    mov         rdx, rax
    shl         rdx, 4
    add         rdx, rcx
    cmp         [rdx + PS_KEY], esi
    je          .found
    cmp         dword [rdx + PS_KEY], EMPTY_KEY
    je          .found
    inc         rax
    jmp         .probe
.found:
    mov         rax, rdx
    ret

; pt_get: rdi = ctx, esi = P -> rax = count (0 when absent).
; Clobbers rcx, rdx, r8.
pt_get:
    call        pt_lookup
    cmp         [rax + PS_KEY], esi
    jne         .absent
    mov         rax, [rax + PS_VAL]
    ret
.absent:
    xor         eax, eax
    ret

; pt_add: rdi = ctx, esi = P, rdx = delta -> rax = the new count.  Inserts
; the pair if absent; grows the table past half full (on failure sets
; X_STATUS).  Clobbers rcx, rdx, r8-r11.
pt_add:
    mov         r9, rdx
    call        pt_lookup
    cmp         [rax + PS_KEY], esi
    je          .have
    mov         [rax + PS_KEY], esi
    mov         [rax + PS_VAL], r9
    mov         r9, [rax + PS_VAL]
    mov         rax, [rdi + X_PTUSED]
    inc         rax
    mov         [rdi + X_PTUSED], rax
    add         rax, rax
    cmp         rax, [rdi + X_PTMASK]
    jbe         .new_done
    push        r9
    push        rsi
    call        pt_grow
    pop         rsi
    pop         r9
.new_done:
    mov         rax, r9
    ret
.have:
    add         [rax + PS_VAL], r9
    mov         rax, [rax + PS_VAL]
    ret

; pt_alloc: rdi = ctx, rsi = nslots (power of two).  eax = 0 or ENOMEM.
pt_alloc:
    SAVE        rbx, r12, r13
    mov         rbx, rdi
    mov         r12, rsi
    mov         rdi, rsi
    shl         rdi, 4
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [rbx + X_PT], rax
    lea         rcx, [r12 - 1]
    mov         [rbx + X_PTMASK], rcx
    mov         qword [rbx + X_PTUSED], 0
    mov         rdi, rax
    mov         rsi, r12
    call        pt_fill_empty
    xor         eax, eax
    jmp         .ret
.enomem:
    mov         eax, ASMBPE_ENOMEM
.ret:
    RESTORE

; pt_free: rdi = ctx
pt_free:
    SAVE        rbx
    mov         rbx, rdi
    mov         rdi, [rbx + X_PT]
    mov         rsi, [rbx + X_PTMASK]
    inc         rsi
    shl         rsi, 4
    call        asmbpe_unmap
    mov         qword [rbx + X_PT], 0
    RESTORE

; pt_grow: rdi = ctx.  Rehashes the pairs whose count is not 0 into a new
; table, twice the size unless at most a quarter of the slots held such
; pairs.  Keeps rdi.
%define GROW_AHEAD  16      ; old slots between a new-slot prefetch and its use
pt_grow:
    SAVE        rbx, r12, r13, r14, r15, rdi
    mov         rbx, rdi
    mov         r12, [rbx + X_PT]               ; old slots
    mov         r13, [rbx + X_PTMASK]
    inc         r13                             ; old nslots
    xor         ecx, ecx                        ; live pairs (count > 0): the
    mov         r15, r13                        ; others are dropped (absent
    shl         r15, 4                          ; reads as 0; they come back
    add         r15, r12                        ; as new pairs if ever needed)
    mov         r14, r12
.live:
    cmp         r14, r15
    jae         .counted
    cmp         dword [r14 + PS_KEY], EMPTY_KEY
    je          .live_next
    cmp         qword [r14 + PS_VAL], 0
    je          .live_next
    inc         rcx
.live_next:
    add         r14, PSLOT
    jmp         .live
.counted:
    mov         rsi, r13                        ; the same size when at most a
    shl         rcx, 2                          ; quarter is live, else twice
    cmp         rcx, r13
    jb          .sized
    add         rsi, rsi
.sized:
    call        pt_alloc
    test        eax, eax
    jnz         .fail
    mov         r14, r12
    mov         r15, r13
    shl         r15, 4
    add         r15, r12                        ; end of old slots
.each:
    cmp         r14, r15
    jae         .done
    lea         rax, [r14 + GROW_AHEAD * PSLOT] ; prefetch the new slot of the
    cmp         rax, r15                        ; pair GROW_AHEAD slots on
    jae         .prefetched
    mov         eax, [rax + PS_KEY]
    mov         rdx, PAIR_HASH_K
    imul        rax, rdx
    shr         rax, 32
    and         rax, [rbx + X_PTMASK]
    shl         rax, 4
    add         rax, [rbx + X_PT]
    prefetcht0  [rax]
.prefetched:
    mov         esi, [r14 + PS_KEY]
    cmp         esi, EMPTY_KEY
    je          .next
    cmp         qword [r14 + PS_VAL], 0
    je          .next
    mov         rdi, rbx
    call        pt_lookup
    mov         [rax + PS_KEY], esi
    mov         rcx, [r14 + PS_VAL]
    mov         [rax + PS_VAL], rcx
    inc         qword [rbx + X_PTUSED]
.next:
    add         r14, PSLOT
    jmp         .each
.done:
    mov         rdi, r12
    mov         rsi, r13
    shl         rsi, 4
    call        asmbpe_unmap
    jmp         .ret
.fail:                                          ; keep the old table
    mov         [rbx + X_PT], r12
    lea         rcx, [r13 - 1]
    mov         [rbx + X_PTMASK], rcx
    mov         qword [rbx + X_STATUS], ASMBPE_ENOMEM
.ret:
    RESTORE

;=============================================================================
; heap: entries {u64 count, u64 P}; the best is the highest count, then the
; smallest P.  BETTER x, y (regs: counts cx, cy, pairs px, py): CF-free test,
; jumps to %5 when x is better than y.
;=============================================================================
%macro JBETTER 5
    cmp         %1, %2
    ja          %5
    jb          %%no
    cmp         %3, %4
    jb          %5
%%no:
%endmacro

; heap_push: rdi = ctx, rsi = count, rdx = P.  Clobbers rax, rcx, r8-r11.
heap_push:
    mov         rax, [rdi + X_HN]
    cmp         rax, [rdi + X_HCAP]
    jb          .room
    push        rsi
    push        rdx
    push        rdi
    mov         rsi, [rdi + X_HCAP]
    shl         rsi, 4                          ; old bytes
    lea         rdx, [rsi * 2]
    mov         rdi, [rdi + X_H]
    call        asmbpe_remap
    pop         rdi
    pop         rdx
    pop         rsi
    test        rax, rax
    jz          .enomem
    mov         [rdi + X_H], rax
    shl         qword [rdi + X_HCAP], 1
    mov         rax, [rdi + X_HN]
.room:
    mov         r8, [rdi + X_H]
    lea         rcx, [rax + 1]
    mov         [rdi + X_HN], rcx
.up:                                            ; rax = hole
    test        rax, rax
    jz          .place
    lea         r9, [rax - 1]
    shr         r9, 1                           ; parent
    mov         r10, r9
    shl         r10, 4
    mov         r11, [r8 + r10 + HE_COUNT]
    mov         rcx, [r8 + r10 + HE_PAIR]
    JBETTER     rsi, r11, rdx, rcx, .move_up
    jmp         .place
.move_up:
    mov         r10, rax
    shl         r10, 4
    mov         [r8 + r10 + HE_COUNT], r11
    mov         [r8 + r10 + HE_PAIR], rcx
    mov         rax, r9
    jmp         .up
.place:
    shl         rax, 4
    mov         [r8 + rax + HE_COUNT], rsi
    mov         [r8 + rax + HE_PAIR], rdx
    ret
.enomem:
    mov         qword [rdi + X_STATUS], ASMBPE_ENOMEM
    ret

; heap_pop: rdi = ctx (HN > 0).  Removes the top.  Clobbers rax, rcx, rdx,
; rsi, r8-r11.
heap_pop:
    mov         r8, [rdi + X_H]
    mov         r9, [rdi + X_HN]
    dec         r9
    mov         [rdi + X_HN], r9
    mov         rax, r9
    shl         rax, 4
    mov         rsi, [r8 + rax + HE_COUNT]      ; the last entry sinks from 0
    mov         rdx, [r8 + rax + HE_PAIR]
    xor         eax, eax                        ; hole
.down:
    lea         r10, [rax * 2 + 1]              ; left child
    cmp         r10, r9
    jae         .place
    mov         r11, r10
    shl         r11, 4
    lea         rcx, [r10 + 1]
    cmp         rcx, r9
    jae         .one_child
    mov         rcx, [r8 + r11 + HE_COUNT + HENT]
    push        rax
    mov         rax, [r8 + r11 + HE_PAIR + HENT]
    JBETTER     rcx, [r8 + r11 + HE_COUNT], rax, [r8 + r11 + HE_PAIR], .right
    pop         rax
    jmp         .one_child
.right:
    pop         rax
    inc         r10
    add         r11, HENT
.one_child:                                     ; r10 = best child, r11 = its offset
    mov         rcx, [r8 + r11 + HE_COUNT]
    push        rax
    mov         rax, [r8 + r11 + HE_PAIR]
    JBETTER     rcx, rsi, rax, rdx, .move_down
    pop         rax
    jmp         .place
.move_down:
    mov         rcx, rax                        ; child's pair
    pop         rax
    push        rdx
    mov         rdx, rax
    shl         rdx, 4
    mov         [r8 + rdx + HE_PAIR], rcx
    mov         rcx, [r8 + r11 + HE_COUNT]
    mov         [r8 + rdx + HE_COUNT], rcx
    pop         rdx
    mov         rax, r10
    jmp         .down
.place:
    shl         rax, 4
    mov         [r8 + rax + HE_COUNT], rsi
    mov         [r8 + rax + HE_PAIR], rdx
    ret

;=============================================================================
; delta maps (one per thread): slots {u32 key, u32 pad, i64 delta}, and the
; list of slot indices in use so clearing costs only what was used.
;=============================================================================

; dm_alloc: -> rax = map or 0.
dm_alloc:
    SAVE        rbx
    mov         edi, 4096
    call        asmbpe_map
    test        rax, rax
    jz          .ret
    mov         rbx, rax
    mov         edi, DM_INIT * PSLOT
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [rbx + DM_SLOTS], rax
    mov         qword [rbx + DM_MASK], DM_INIT - 1
    mov         rdi, rax
    mov         esi, DM_INIT
    call        pt_fill_empty
    mov         edi, DM_INIT * 4
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [rbx + DM_LIST], rax
    mov         rax, rbx
.ret:
    RESTORE
.fail:
    mov         rdi, rbx
    call        dm_free
    xor         eax, eax
    RESTORE

; dm_free: rdi = map (or 0)
dm_free:
    test        rdi, rdi
    jz          .ret
    push        rbx
    mov         rbx, rdi
    mov         rsi, [rbx + DM_MASK]
    inc         rsi
    push        rsi
    shl         rsi, 4
    mov         rdi, [rbx + DM_SLOTS]
    call        asmbpe_unmap
    pop         rsi
    shl         rsi, 2
    mov         rdi, [rbx + DM_LIST]
    call        asmbpe_unmap
    mov         rdi, rbx
    mov         esi, 4096
    call        asmbpe_unmap
    pop         rbx
.ret:
    ret

; dm_add: rbx = map, esi = P, rdx = delta.  Clobbers rax, rcx, r8, r9.
dm_add:
    mov         eax, esi
    mov         rcx, PAIR_HASH_K
    imul        rax, rcx
    shr         rax, 32
    mov         r8, [rbx + DM_SLOTS]
.probe:
    and         rax, [rbx + DM_MASK]
    mov         rcx, rax
    shl         rcx, 4
    cmp         [r8 + rcx + PS_KEY], esi
    je          .add
    cmp         dword [r8 + rcx + PS_KEY], EMPTY_KEY
    je          .new
    inc         rax
    jmp         .probe
.add:
    add         [r8 + rcx + PS_VAL], rdx
    ret
.new:
    mov         r9, [rbx + DM_USED]
    cmp         r9, [rbx + DM_MASK]
    jae         .ret                            ; full after a failed grow: the
                                                ; run fails with DM_STATUS set
    mov         [r8 + rcx + PS_KEY], esi
    mov         [r8 + rcx + PS_VAL], rdx
    mov         rcx, [rbx + DM_LIST]
    mov         [rcx + r9 * 4], eax
    inc         r9
    mov         [rbx + DM_USED], r9
    add         r9, r9
    cmp         r9, [rbx + DM_MASK]
    jbe         .ret
    jmp         dm_grow                         ; tail call
.ret:
    ret

; dm_grow: rbx = map.  Doubles slots and list.  Keeps rsi, rdx, rdi, r10-r15.
dm_grow:
    SAVE        rsi, rdx, rdi, r10, r11, r12, r13, r14
    mov         r12, [rbx + DM_MASK]
    inc         r12                             ; old nslots
    lea         rdi, [r12 * 2]
    shl         rdi, 4
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         r13, rax                        ; new slots
    mov         rdi, rax
    lea         rsi, [r12 * 2]
    call        pt_fill_empty
    lea         rdi, [r12 * 8]                  ; new list: 2 x nslots x 4
    call        asmbpe_map
    test        rax, rax
    jz          .fail_slots
    mov         r14, rax                        ; new list
    mov         r10, [rbx + DM_SLOTS]
    lea         r11, [r12 * 2 - 1]              ; new mask
    xor         r9d, r9d                        ; i over the old list
.each:
    cmp         r9, [rbx + DM_USED]
    jae         .swap
    mov         rcx, [rbx + DM_LIST]
    mov         ecx, [rcx + r9 * 4]
    shl         rcx, 4
    mov         esi, [r10 + rcx + PS_KEY]
    mov         rdx, [r10 + rcx + PS_VAL]
    mov         eax, esi
    mov         rdi, PAIR_HASH_K
    imul        rax, rdi
    shr         rax, 32
.probe:
    and         rax, r11
    mov         rdi, rax
    shl         rdi, 4
    cmp         dword [r13 + rdi + PS_KEY], EMPTY_KEY
    je          .put
    inc         rax
    jmp         .probe
.put:
    mov         [r13 + rdi + PS_KEY], esi
    mov         [r13 + rdi + PS_VAL], rdx
    mov         [r14 + r9 * 4], eax
    inc         r9
    jmp         .each
.swap:                                          ; header first: syscalls clobber r11
    mov         rdi, [rbx + DM_SLOTS]
    mov         r10, [rbx + DM_LIST]
    mov         [rbx + DM_SLOTS], r13
    mov         [rbx + DM_LIST], r14
    mov         [rbx + DM_MASK], r11
    mov         rsi, r12
    shl         rsi, 4
    call        asmbpe_unmap
    mov         rdi, r10
    lea         rsi, [r12 * 4]
    call        asmbpe_unmap
    jmp         .ret
.fail_slots:
    mov         rdi, r13
    lea         rsi, [r12 * 2]
    shl         rsi, 4
    call        asmbpe_unmap
.fail:
    mov         qword [rbx + DM_STATUS], ASMBPE_ENOMEM
.ret:
    RESTORE

; dm_clear: rbx = map.  Frees the used slots.  Clobbers rax, rcx, rdx, r8.
dm_clear:
    mov         r8, [rbx + DM_SLOTS]
    mov         rdx, [rbx + DM_LIST]
    mov         rcx, [rbx + DM_USED]
.each:
    test        rcx, rcx
    jz          .done
    dec         rcx
    mov         eax, [rdx + rcx * 4]
    shl         rax, 4
    mov         dword [r8 + rax + PS_KEY], EMPTY_KEY
    jmp         .each
.done:
    mov         qword [rbx + DM_USED], 0
    ret

;=============================================================================
; scan_segment(ctx, dm, klo, khi): finds every word in [klo, khi) holding the
; pair (X_A, X_B) with the vpcmpeqw scan, rewrites it in place into X_T left
; to right, non-overlapping, pads its tail with SEP, and adds -count for each
; pair of the old word and +count for each pair of the new one to dm.
;=============================================================================
%define SC_C        0       ; count of the word being rewritten
%define SC_S        8       ; its start
%define SC_E        16      ; its end (the SEP after it)
%define SC_KHI      24
%define SC_CEND     32      ; end of the current chunk's scan
%define SC_T0       40
%define SC_FA       48      ; bucket bitmap of a
%define SC_FB       56      ; bucket bitmap of b
%define SC_FT       64      ; bucket bitmap of the new token
%define SC_FP       72      ; pair-bucket bitmap of (a, b)
%define SC_PFC      80      ; first chunk the prefetch walk has not looked at
%define SC_FRAME    88      ; 6 pushes + 88: calls aligned
%define PF_DIST     4       ; candidate chunks prefetched ahead of the scan
%define PF_SPAN     16      ; filter qwords one prefetch step looks at, at most

; SET_CHUNK_BIT bitmap, chunk, tmp: queues "set bit `chunk` of the bitmap"
; in this thread's DM_MARKS (rbx = delta map) and prefetches its line for
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
    prefetchw   [%1]
    shl         %1, 6
    and         %2, 63
    or          %1, %2
    mov         %3, [rbx + DM_NMARKS]
    mov         [rbx + DM_MARKS + %3 * 8], %1
    inc         %3
    mov         [rbx + DM_NMARKS], %3
    cmp         %3, MARK_BATCH
    jb          %%queued
    call        flush_marks
%%queued:
%endmacro

; flush_marks: rbx = delta map, r12 = ctx.  Sets the queued filter bits:
; read first, as most are set already; a locked OR when others may be
; writing the same qword (chunks span threads' segments), a plain one when
; thread 0 runs alone.  Empties the queue.  Clobbers rax, rcx, rdx.
flush_marks:
    push        r8
    push        r9
    push        r10
    mov         r8, [rbx + DM_NMARKS]
    xor         r9d, r9d
    mov         r10d, 1
    cmp         qword [r12 + X_NTH], 1
    je          .plain
    cmp         qword [r12 + X_SOLO], 0
    jne         .plain
.locked:
    cmp         r9, r8
    jae         .done
    mov         rcx, [rbx + DM_MARKS + r9 * 8]
    inc         r9
    shlx        rdx, r10, rcx                   ; (shlx takes the count mod 64)
    shr         rcx, 6
    test        [rcx], rdx
    jnz         .locked
    lock or     [rcx], rdx
    jmp         .locked
.plain:
    cmp         r9, r8
    jae         .done
    mov         rcx, [rbx + DM_MARKS + r9 * 8]
    inc         r9
    shlx        rdx, r10, rcx
    shr         rcx, 6
    or          [rcx], rdx
    jmp         .plain
.done:
    mov         qword [rbx + DM_NMARKS], 0
    pop         r10
    pop         r9
    pop         r8
    ret

; MARK_PAIR: ecx = a pair P, rax = the position where it starts.  Sets that
; chunk's bit in the bitmap of P's pair bucket.  Needs r12 = ctx; clobbers
; rax, rcx, rdx.
%macro MARK_PAIR 0
    PAIR_BUCKET ecx
    imul        rcx, [r12 + X_BLSTRIDE]
    add         rcx, [r12 + X_BLOOM]
    shr         rax, CHUNK_SHIFT
    SET_CHUNK_BIT rcx, rax, rdx
%endmacro

; FILT_HITS dst, fa, fb, q, tmp1, tmp2, fp: dst = bit c of qword q set for each
; chunk c holding a (bitmap fa) with b in c or in c + 1 (bitmap fb) and a pair
; of (a, b)'s bucket starting in c (bitmap fp); reads fb[q + 1].
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

scan_segment:
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, SC_FRAME
    mov         r12, rdi
    mov         rbx, rsi
    mov         rbp, rdx                        ; klo: word holding the cursor
    mov         [rsp + SC_KHI], rcx
    RDTSC64
    mov         [rsp + SC_T0], rax
    mov         qword [rsp + SC_PFC], 0
    mov         rcx, [rsp + SC_KHI]
    cmp         rbp, rcx
    jae         .done
    mov         rdx, [r12 + X_WS]
    mov         r14, [rdx + rbp * 8]            ; cursor: first word's start
    mov         r15, [r12 + X_WLEN]
    cmp         rcx, [r12 + X_NW]
    jae         .have_end
    mov         r15, [rdx + rcx * 8]
    dec         r15                             ; the SEP before word khi
.have_end:
    mov         r13, [r12 + X_W]
    mov         rdx, [r12 + X_BLSTRIDE]         ; the bucket bitmaps of a, b, t
    mov         rax, [r12 + X_A]
    and         eax, FILT_MASK
    imul        rax, rdx
    add         rax, [r12 + X_BLOOM]
    mov         [rsp + SC_FA], rax
    mov         rax, [r12 + X_B]
    and         eax, FILT_MASK
    imul        rax, rdx
    add         rax, [r12 + X_BLOOM]
    mov         [rsp + SC_FB], rax
    mov         rax, [r12 + X_T]
    and         eax, FILT_MASK
    imul        rax, rdx
    add         rax, [r12 + X_BLOOM]
    mov         [rsp + SC_FT], rax
    mov         eax, [r12 + X_A]
    shl         eax, 16
    or          eax, [r12 + X_B]
    PAIR_BUCKET eax
    imul        rax, [r12 + X_BLSTRIDE]
    add         rax, [r12 + X_BLOOM]
    mov         [rsp + SC_FP], rax
.load_pair:
    vpbroadcastw ymm14, [r12 + X_A]
    vpbroadcastw ymm15, [r12 + X_B]
.scan:                                          ; next chunk of W worth a scan
    cmp         r14, r15
    jae         .done
    mov         rax, [r12 + X_REMAIN]           ; every occurrence found (by
    sub         rax, [rbx + DM_FOUND]           ; any thread, this one's not
    jle         .done                           ; yet published too): stop
    mov         rax, r14
    shr         rax, CHUNK_SHIFT                ; c: the cursor's chunk
    mov         r8, [rsp + SC_FA]
    mov         r9, [rsp + SC_FB]
    mov         r11, [rsp + SC_FP]
    mov         rcx, rax
    shr         rcx, 6                          ; q: its filter qword
    FILT_HITS   rdx, r8, r9, rcx, rsi, r10, r11
    shrx        rdx, rdx, rax                   ; chunks c.. of qword q
    test        rdx, rdx
    jnz         .chunk_found
.next_qword:                                    ; the filters 4 qwords (256
    inc         rcx                             ; chunks) per round, as
.vq:                                            ; FILT_HITS does one
    mov         rdx, rcx
    shl         rdx, 6 + CHUNK_SHIFT
    cmp         rdx, r15                        ; past the segment: done
    jae         .done
    vmovdqu     ymm4, [r9 + rcx * 8]            ; b's chunks q..q+3
    vmovdqu     ymm5, [r9 + rcx * 8 + 8]        ; and q+1..q+4
    vpsrlq      ymm6, ymm4, 1
    vpsllq      ymm5, ymm5, 63
    vpor        ymm4, ymm4, ymm6
    vpor        ymm4, ymm4, ymm5
    vpand       ymm4, ymm4, [r8 + rcx * 8]
    vpand       ymm4, ymm4, [r11 + rcx * 8]
    vptest      ymm4, ymm4
    jnz         .vq_hit
    add         rcx, 4
    jmp         .vq
.vq_hit:                                        ; which of the 4 (hits past
    mov         rax, rcx                        ; the segment end stop the
    shl         rax, 6                          ; scan at .chunk_found)
    FILT_HITS   rdx, r8, r9, rcx, rsi, r10, r11
    test        rdx, rdx
    jnz         .chunk_found
    inc         rcx
    jmp         .vq_hit
.chunk_found:
    inc         qword [rbx + DM_CHUNKS]
    tzcnt       rdx, rdx
    add         rax, rdx                        ; the chunk to scan
    mov         rsi, rax
    shl         rax, CHUNK_SHIFT
    cmp         rax, r14
    cmova       r14, rax
    cmp         r14, r15
    jae         .done
    add         rax, 1 << CHUNK_SHIFT
    cmp         rax, r15
    cmova       rax, r15
    mov         [rsp + SC_CEND], rax            ; end of this chunk's scan
    mov         rax, [r12 + X_CW]               ; (prefetched) the chunk's
    mov         eax, [rax + rsi * 4]            ; first word: its start and
    mov         rdx, [r12 + X_WS]               ; count, which a hit here
    prefetcht0  [rdx + rax * 8]                 ; will read
    mov         rdx, [r12 + X_WC]
    prefetcht0  [rdx + rax * 8]
    inc         rsi                             ; keep PF_DIST candidates
    cmp         [rsp + SC_PFC], rsi             ; ahead: start over past
    jae         .pf_one                         ; this chunk, or take one
    mov         [rsp + SC_PFC], rsi             ; more step
%rep PF_DIST - 1
    call        .pf_next
%endrep
.pf_one:
    call        .pf_next
.vec:                                           ; 32 positions per round
    cmp         r14, [rsp + SC_CEND]
    jae         .scan
    vmovdqu     ymm0, [r13 + r14 * 2]
    vmovdqu     ymm1, [r13 + r14 * 2 + 2]
    vmovdqu     ymm2, [r13 + r14 * 2 + 32]
    vmovdqu     ymm3, [r13 + r14 * 2 + 34]
    vpcmpeqw    ymm0, ymm0, ymm14               ; w[i] == a
    vpcmpeqw    ymm1, ymm1, ymm15               ; w[i+1] == b
    vpcmpeqw    ymm2, ymm2, ymm14
    vpcmpeqw    ymm3, ymm3, ymm15
    vpand       ymm0, ymm0, ymm1
    vpand       ymm2, ymm2, ymm3
    vpor        ymm1, ymm0, ymm2
    vptest      ymm1, ymm1
    jnz         .hit
    add         r14, 32
    jmp         .vec
.hit:
    vpmovmskb   eax, ymm0
    vpmovmskb   ecx, ymm2
    shl         rcx, 32
    or          rax, rcx
    tzcnt       rax, rax
    shr         eax, 1
    add         rax, r14                        ; p
    cmp         rax, r15
    jae         .done
    mov         rdx, [r12 + X_WS]               ; last word k with WS[k] <= p:
    mov         rcx, [rsp + SC_KHI]             ; gallop from the cursor's word,
    mov         r8, rax                         ; or from the last word that
    shr         r8, CHUNK_SHIFT                 ; starts before p's chunk when
    mov         r9, [r12 + X_CW]                ; that is further on (both are
    mov         r8d, [r9 + r8 * 4]              ; <= p's word, < khi), then
    cmp         r8, rbp                         ; bisect the last step
    cmova       rbp, r8
    mov         r8d, 1
.gallop:
    lea         r9, [rbp + r8]
    cmp         r9, rcx
    jae         .bsearch
    cmp         [rdx + r9 * 8], rax
    ja          .gallop_done
    mov         rbp, r9
    add         r8, r8
    jmp         .gallop
.gallop_done:
    mov         rcx, r9
.bsearch:
    lea         r8, [rbp + 1]
    cmp         r8, rcx
    jae         .found
    lea         r8, [rbp + rcx]
    shr         r8, 1
    cmp         [rdx + r8 * 8], rax
    ja          .go_left
    mov         rbp, r8
    jmp         .bsearch
.go_left:
    mov         rcx, r8
    jmp         .bsearch
.found:
    vzeroupper                                  ; calls ahead
    mov         rsi, [rdx + rbp * 8]            ; s
    mov         [rsp + SC_S], rsi
    mov         rdx, [r12 + X_WC]
    mov         rcx, [rdx + rbp * 8]
    mov         [rsp + SC_C], rcx
    mov         rax, rsi
.find_end:
    cmp         word [r13 + rax * 2], SEP
    je          .have_e
    inc         rax
    jmp         .find_end
.have_e:
    mov         [rsp + SC_E], rax
    ; occurrences of (a, b) in the old word, overlapping as counted:
    ; remaining -= count x occurrences
    mov         r10, [rsp + SC_S]
    xor         r11d, r11d
    movzx       r8d, word [r12 + X_A]
    movzx       r9d, word [r12 + X_B]
.occ:
    lea         rax, [r10 + 1]
    cmp         rax, [rsp + SC_E]
    jae         .occ_done
    cmp         [r13 + r10 * 2], r8w
    jne         .occ_next
    cmp         [r13 + r10 * 2 + 2], r9w
    jne         .occ_next
    inc         r11
.occ_next:
    inc         r10
    jmp         .occ
.occ_done:
    mov         rax, [rsp + SC_C]
    imul        rax, r11
    add         [rbx + DM_FOUND], rax
    inc         qword [rbx + DM_NFOUND]
    test        qword [rbx + DM_NFOUND], FOUND_BATCH - 1
    jnz         .unpublished
    call        publish_found
.unpublished:

    ; rewrite in place, left to right, with the exact local deltas of each
    ; replacement of (a, b) at old position r by t at new position w:
    ;   prev p (new) : (p, a) -c, (p, t) +c;  (a, b) -c;
    ;   next n (old) : (b, n) -c, (t, n) +c
    ; (dm_add keeps r10, r11, rdi, rsi, rdx)
    mov         r10, [rsp + SC_S]               ; read
    mov         r11, r10                        ; write
    xor         edi, edi                        ; replacements
.rw:
    cmp         r10, [rsp + SC_E]
    jae         .rw_done
    movzx       eax, word [r13 + r10 * 2]
    cmp         ax, [r12 + X_A]
    jne         .copy
    movzx       ecx, word [r13 + r10 * 2 + 2]   ; (SEP at the end: never b)
    cmp         cx, [r12 + X_B]
    jne         .copy
    cmp         r11, [rsp + SC_S]
    jbe         .no_prev
    movzx       esi, word [r13 + r11 * 2 - 2]   ; (p, a) -c
    shl         esi, 16
    or          esi, [r12 + X_A]
    mov         rdx, [rsp + SC_C]
    neg         rdx
    call        dm_add
    movzx       esi, word [r13 + r11 * 2 - 2]   ; (p, t) +c
    shl         esi, 16
    or          esi, [r12 + X_T]
    mov         rdx, [rsp + SC_C]
    call        dm_add
.no_prev:
    mov         esi, [r12 + X_A]                ; (a, b) -c
    shl         esi, 16
    or          esi, [r12 + X_B]
    mov         rdx, [rsp + SC_C]
    neg         rdx
    call        dm_add
    lea         rax, [r10 + 2]
    cmp         rax, [rsp + SC_E]
    jae         .no_next
    mov         esi, [r12 + X_B]                ; (b, n) -c
    shl         esi, 16
    movzx       eax, word [r13 + r10 * 2 + 4]
    or          esi, eax
    mov         rdx, [rsp + SC_C]
    neg         rdx
    call        dm_add
    mov         esi, [r12 + X_T]                ; (t, n) +c
    shl         esi, 16
    movzx       eax, word [r13 + r10 * 2 + 4]
    or          esi, eax
    mov         rdx, [rsp + SC_C]
    call        dm_add
.no_next:
    mov         eax, [r12 + X_T]
    mov         [r13 + r11 * 2], ax
    mov         rcx, [rsp + SC_FT]              ; t is now in this chunk
    mov         rax, r11
    shr         rax, CHUNK_SHIFT
    SET_CHUNK_BIT rcx, rax, rdx
    cmp         r11, [rsp + SC_S]               ; and so are the pairs
    jbe         .no_prev_pair                   ; (prev, t) and (t, next)
    movzx       ecx, word [r13 + r11 * 2 - 2]   ; (prev: final; next: the
    shl         ecx, 16                         ; old one, final unless it
    or          ecx, [r12 + X_T]                ; is merged too, and then
    lea         rax, [r11 - 1]                  ; its own (prev, t) counts)
    MARK_PAIR
.no_prev_pair:
    lea         rax, [r10 + 2]
    cmp         rax, [rsp + SC_E]
    jae         .no_next_pair
    mov         ecx, [r12 + X_T]
    shl         ecx, 16
    movzx       eax, word [r13 + r10 * 2 + 4]
    or          ecx, eax
    mov         rax, r11
    MARK_PAIR
.no_next_pair:
    add         r10, 2
    inc         r11
    inc         edi
    jmp         .rw
.copy:
    mov         [r13 + r11 * 2], ax
    inc         r10
    inc         r11
    jmp         .rw
.rw_done:
    mov         rax, [rsp + SC_S]               ; a word across a chunk
    shr         rax, CHUNK_SHIFT                ; boundary: its tokens may
    mov         rcx, [rsp + SC_E]               ; have moved to the chunk
    dec         rcx                             ; before: mark them all
    shr         rcx, CHUNK_SHIFT
    cmp         rax, rcx
    je          .marked
    mov         r10, [rsp + SC_S]               ; its pairs too
.mark_pairs:
    lea         rax, [r10 + 1]
    cmp         rax, r11
    jae         .pairs_marked
    movzx       ecx, word [r13 + r10 * 2]
    shl         ecx, 16
    movzx       eax, word [r13 + r10 * 2 + 2]
    or          ecx, eax
    mov         rax, r10
    MARK_PAIR
    inc         r10
    jmp         .mark_pairs
.pairs_marked:
    mov         r10, [rsp + SC_S]
.mark:
    cmp         r10, r11
    jae         .marked
    movzx       ecx, word [r13 + r10 * 2]
    and         ecx, FILT_MASK
    imul        rcx, [r12 + X_BLSTRIDE]
    add         rcx, [r12 + X_BLOOM]
    mov         rax, r10
    shr         rax, CHUNK_SHIFT
    SET_CHUNK_BIT rcx, rax, rdx
    inc         r10
    jmp         .mark
.marked:
    add         [rbx + DM_REPL], rdi
    add         [rbx + DM_DEAD], rdi            ; each replacement frees a slot
    inc         qword [rbx + DM_WORDS]
    inc         qword [rbx + DM_MWORDS]
    mov         rax, r11
    sub         rax, [rsp + SC_S]
    cmp         rax, 1
    jne         .fill
    add         qword [rbx + DM_DEAD], 2        ; one token left: word and SEP
.fill:
    cmp         r11, [rsp + SC_E]
    jae         .word_done
    mov         word [r13 + r11 * 2], SEP
    inc         r11
    jmp         .fill
.word_done:
    mov         r14, [rsp + SC_E]
    jmp         .load_pair
; .pf_next: the next chunk the filters let through, from SC_PFC on (at most
; PF_SPAN filter qwords): prefetch its W lines and its X_CW entry, move
; SC_PFC past it (past what was looked at when none).  Keeps rbx, rbp,
; r12-r15; clobbers rax, rcx, rdx, rsi, rdi, r8-r11.
.pf_next:
    mov         rax, [rsp + 8 + SC_PFC]
    mov         rdx, rax
    shl         rdx, CHUNK_SHIFT
    cmp         rdx, r15
    jae         .pf_ret                         ; past the segment
    mov         r8, [rsp + 8 + SC_FA]
    mov         r9, [rsp + 8 + SC_FB]
    mov         r11, [rsp + 8 + SC_FP]
    mov         rcx, rax
    shr         rcx, 6
    FILT_HITS   rdx, r8, r9, rcx, rsi, rdi, r11
    shrx        rdx, rdx, rax
    test        rdx, rdx
    jnz         .pf_found
    and         rax, ~63
    mov         r10d, PF_SPAN
.pf_q:
    add         rax, 64
    inc         rcx
    dec         r10d
    jz          .pf_stop
    mov         rdx, rax
    shl         rdx, CHUNK_SHIFT
    cmp         rdx, r15
    jae         .pf_stop
    FILT_HITS   rdx, r8, r9, rcx, rsi, rdi, r11
    test        rdx, rdx
    jz          .pf_q
.pf_found:
    tzcnt       rdx, rdx
    add         rax, rdx                        ; the chunk
    mov         rdx, rax
    shl         rdx, CHUNK_SHIFT + 1            ; its W bytes
    prefetcht0  [r13 + rdx]
    prefetcht0  [r13 + rdx + 64]
    mov         rdx, [r12 + X_CW]
    prefetcht0  [rdx + rax * 4]
    inc         rax
.pf_stop:
    mov         [rsp + 8 + SC_PFC], rax
.pf_ret:
    ret

.done:
    vzeroupper
    call        flush_marks
    call        publish_found
    RDTSC64
    sub         rax, [rsp + SC_T0]
    add         [rbx + DM_CYC], rax
    add         rsp, SC_FRAME
    RESTORE

; publish_found: rbx = delta map, r12 = ctx.  X_REMAIN -= DM_FOUND (locked),
; DM_FOUND = 0.  Clobbers rax.
publish_found:
    xor         eax, eax
    xchg        rax, [rbx + DM_FOUND]           ; (its own line: no other writer)
    lock sub    [r12 + X_REMAIN], rax
    ret

;=============================================================================
; choosing and recording merges (thread 0)
;=============================================================================

; record_merge: rdi = ctx, rsi = count, rdx = P.  Writes merge m, sets X_A,
; X_B, X_T, counts it, checks the count did not go up.  Clobbers rax-rdx, r8.
record_merge:
    mov         r8, [rdi + X_STATS]
    mov         rax, [r8 + ST_MERGES * 8]       ; m
    mov         ecx, edx
    shr         ecx, 16                         ; left
    mov         [rdi + X_A], rcx
    movzx       ecx, dx
    mov         [rdi + X_B], rcx                ; right
    shl         ecx, 16
    or          ecx, [rdi + X_A]                ; left | right << 16
    mov         rdx, [rdi + X_MERGES]
    mov         [rdx + rax * 4], ecx
    mov         rdx, [rdi + X_COUNTS]
    mov         [rdx + rax * 8], rsi
    test        rax, rax
    jz          .counted
    cmp         rsi, [rdx + rax * 8 - 8]
    jbe         .counted
    cmp         qword [r8 + ST_VERIFY_MERGE * 8], -1
    jne         .counted
    mov         [r8 + ST_VERIFY_MERGE * 8], rax ; the winning count went up
.counted:
    mov         [rdi + X_REMAIN], rsi           ; all of the pair's count to find
    lea         rcx, [rax + 256]
    mov         [rdi + X_T], rcx
    inc         rax
    mov         [r8 + ST_MERGES * 8], rax
    ret

; choose: rdi = ctx.  Takes the best pair from the heap (lazy deletion: a
; stale top is re-pushed with its real count when lower, dropped when
; higher) and records it, or sets X_DONE.  Keeps rdi.
choose:
    SAVE        rbx, r12, r13
    mov         rbx, rdi
    mov         r8, [rbx + X_STATS]
    mov         rax, [r8 + ST_MERGES * 8]
    cmp         rax, [rbx + X_NMERGES]
    jae         .done
.top:
    cmp         qword [rbx + X_HN], 0
    je          .done
    mov         rax, [rbx + X_H]
    mov         r12, [rax + HE_COUNT]
    mov         r13, [rax + HE_PAIR]
    mov         rdi, rbx
    mov         esi, r13d
    call        pt_get
    cmp         rax, r12
    jne         .stale
    cmp         rax, [rbx + X_MINCOUNT]
    jb          .done                           ; (min_count >= 1: also 0)
    mov         rdi, rbx
    call        heap_pop
    mov         rdi, rbx
    mov         rsi, r12
    mov         rdx, r13
    call        record_merge
    jmp         .ret
.stale:
    push        rax
    push        rax
    mov         rdi, rbx
    call        heap_pop
    pop         rax
    pop         rsi
    cmp         rsi, r12
    jae         .top                            ; higher: a fresher entry exists
    test        rsi, rsi
    jz          .top                            ; gone
    mov         rdi, rbx
    mov         rdx, r13
    call        heap_push
    jmp         .top
.done:
    mov         qword [rbx + X_DONE], 1
.ret:
    mov         rdi, rbx
    RESTORE

;=============================================================================
; layout helpers: segments and compaction
;=============================================================================

; segments: rdi = ctx.  Splits the words into X_NSEG runs of about equal
; positions: SEGS_PER_THREAD per thread (at most MAX_THREADS), claimed by
; the threads one at a time each merge so uneven rewrite work evens out.
; Keeps rdi.  Clobbers rax, rcx, rdx, rsi, r8-r11.
segments:
    mov         r8, [rdi + X_NTH]
    cmp         r8, 1
    je          .nseg
    shl         r8, 3                           ; x SEGS_PER_THREAD
    mov         eax, MAX_THREADS
    cmp         r8, rax
    cmova       r8, rax
.nseg:
    mov         [rdi + X_NSEG], r8d
    mov         r9, [rdi + X_NW]
    mov         r10, [rdi + X_WS]
    mov         qword [rdi + X_SEG], 0
    mov         [rdi + X_SEG + r8 * 8], r9
    mov         r11d, 1
.each:
    cmp         r11, r8
    jae         .ret
    mov         rax, [rdi + X_WLEN]
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
    mov         [rdi + X_SEG + r11 * 8], rax
    inc         r11
    jmp         .each
.ret:
    ret

; compact: rdi = ctx.  Drops the SEP padding left by rewrites and the words
; down to one token (they have no pairs), moving the rest to the front.
; Keeps rdi.
compact:
    SAVE        rbx, r12
    mov         rbx, rdi
    mov         r8, [rbx + X_W]
    mov         r9, [rbx + X_WS]
    mov         r10, [rbx + X_WC]
    xor         r11d, r11d                      ; k (read)
    xor         r12d, r12d                      ; words kept
    mov         ecx, 1                          ; write position (W[0] = SEP)
.word:
    cmp         r11, [rbx + X_NW]
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
    mov         [rbx + X_WLEN], rcx
    mov         [rbx + X_NW], r12
    mov         qword [rbx + X_DEAD], 0
    mov         edx, W_TAIL                     ; SEP tail after the last word
.tail:
    mov         word [r8 + rcx * 2], SEP
    inc         rcx
    dec         edx
    jnz         .tail
    mov         rdi, rbx
    call        segments
    call        bloom_build
    mov         rax, [rbx + X_STATS]
    inc         qword [rax + ST_COMPACTIONS * 8]
    mov         rdi, rbx
    RESTORE

;=============================================================================
; bloom_build: rdi = ctx.  Recomputes the chunk filters from W: clears them,
; then sets bit chunk(p) in the bitmap of bucket W[p] & FILT_MASK for every
; token, and in the bitmap of PAIR_BUCKET(W[p], W[p+1]) for every pair; then
; the chunk -> word index X_CW.  Keeps rdi.  Clobbers rax, rcx, rdx, rsi, r8-r11.
;=============================================================================
bloom_build:
    SAVE        rdi
    mov         rsi, rdi
    mov         rcx, [rsi + X_BLBYTES]
    shr         rcx, 3                          ; qwords
    mov         rdi, [rsi + X_BLOOM]
    xor         eax, eax
    rep stosq
    mov         r8, [rsi + X_W]
    mov         rdi, [rsi + X_BLOOM]
    mov         r10, [rsi + X_BLSTRIDE]
    xor         ecx, ecx
.pos:
    cmp         rcx, [rsi + X_WLEN]
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
.done:                                          ; X_CW[c]: the last word k with
    mov         r8, [rsi + X_WS]                ; WS[k] <= c << CHUNK_SHIFT
    mov         r9, [rsi + X_NW]
    mov         r10, [rsi + X_CW]
    mov         rcx, [rsi + X_WLEN]
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
    and         %1, [r12 + X_PTMASK]
    shl         %1, 4
    add         %1, [r12 + X_PT]
    prefetcht0  [%1]
%endmacro

coordinate:
    SAVE        rbx, r12, r13, r14, r15
    mov         r12, rdi
    RDTSC64
    mov         r15, rax
    cmp         qword [r12 + X_NTH], 1          ; go solo?
    jbe         .solo_done
    cmp         qword [r12 + X_SOLO], 0
    jne         .solo_done
    xor         eax, eax                        ; chunks this merge scanned
    xor         ecx, ecx
.sum_chunks:
    mov         rdx, [r12 + X_DM + rcx * 8]
    add         rax, [rdx + DM_CHUNKS]
    mov         qword [rdx + DM_CHUNKS], 0
    inc         rcx
    cmp         rcx, [r12 + X_NTH]
    jb          .sum_chunks
    cmp         rax, SOLO_CHUNKS
    jb          .cheap
    mov         qword [r12 + X_CHEAP], 0
    jmp         .solo_done
.cheap:
    inc         qword [r12 + X_CHEAP]
    cmp         qword [r12 + X_CHEAP], SOLO_RUN
    jb          .solo_done
    mov         qword [r12 + X_SOLO], 1
    mov         rax, [r12 + X_STATS]
    mov         rcx, [rax + ST_MERGES * 8]
    mov         [rax + ST_SOLO_MERGE * 8], rcx
.solo_done:
    mov         rax, [r12 + X_STATS]            ; the merge just scanned
    mov         rax, [rax + ST_MERGES * 8]
    dec         rax
    mov         [r12 + X_PMM], rax
    xor         r13d, r13d                      ; thread
.thread:
    cmp         r13, [r12 + X_NTH]
    jae         .applied
    mov         rbx, [r12 + X_DM + r13 * 8]
    mov         rax, [rbx + DM_STATUS]
    test        rax, rax
    jz          .status_ok
    mov         [r12 + X_STATUS], rax
.status_ok:
    mov         rax, [rbx + DM_DEAD]
    add         [r12 + X_DEAD], rax
    mov         qword [rbx + DM_DEAD], 0
    mov         rcx, [r12 + X_PM]               ; per-merge records
    test        rcx, rcx
    jz          .no_record
    mov         rax, [r12 + X_PMM]
    lea         rax, [rax + rax * 2]
    lea         rcx, [rcx + rax * 8]
    mov         rax, [rbx + DM_MWORDS]
    add         [rcx + 8], rax
    mov         rax, [rbx + DM_REPL]
    add         [rcx + 16], rax
.no_record:
    mov         qword [rbx + DM_MWORDS], 0
    mov         qword [rbx + DM_REPL], 0
    xor         r14d, r14d                      ; prefetch the first
.warm:                                          ; APPLY_AHEAD slots (the loop
    cmp         r14, APPLY_AHEAD                ; prefetches the rest ahead)
    jae         .warmed
    cmp         r14, [rbx + DM_USED]
    jae         .warmed
    mov         rax, [rbx + DM_LIST]
    mov         eax, [rax + r14 * 4]
    shl         rax, 4
    add         rax, [rbx + DM_SLOTS]
    mov         eax, [rax + PS_KEY]
    PT_PREFETCH rax, rdx
    inc         r14
    jmp         .warm
.warmed:
    xor         r14d, r14d
.entry:
    cmp         r14, [rbx + DM_USED]
    jae         .thread_done
    lea         rcx, [r14 + APPLY_AHEAD]        ; prefetch the pair-table slot
    cmp         rcx, [rbx + DM_USED]            ; of the delta APPLY_AHEAD on
    jae         .prefetched                     ; (the table is far larger than
    mov         rax, [rbx + DM_LIST]            ; the caches)
    mov         eax, [rax + rcx * 4]
    shl         rax, 4
    add         rax, [rbx + DM_SLOTS]
    mov         eax, [rax + PS_KEY]
    PT_PREFETCH rax, rdx
.prefetched:
    mov         rax, [rbx + DM_LIST]
    mov         eax, [rax + r14 * 4]
    shl         rax, 4
    add         rax, [rbx + DM_SLOTS]
    mov         rdx, [rax + PS_VAL]
    test        rdx, rdx
    jz          .next_entry
    mov         esi, [rax + PS_KEY]
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
    call        heap_push
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
    mov         rdx, [r12 + X_STATS]
    add         [rdx + ST_CYC_APPLY * 8], rax
    cmp         qword [r12 + X_STATUS], 0
    jne         .stop
    mov         rdi, r12
    call        choose
    mov         dword [r12 + X_NEXTSEG], 0      ; segments for the next merge
    RDTSC64
    sub         rax, r15
    mov         rdx, [r12 + X_STATS]
    add         [rdx + ST_CYC_HEAP * 8], rax
    cmp         qword [r12 + X_DONE], 0
    jne         .ret
    mov         rax, [r12 + X_DEAD]             ; compact when half of W is
    shl         rax, 1                          ; of no use any more
    cmp         rax, [r12 + X_WLEN]
    jbe         .ret
    RDTSC64
    mov         r15, rax
    mov         rdi, r12
    call        compact
    RDTSC64
    sub         rax, r15
    mov         rdx, [r12 + X_STATS]
    add         [rdx + ST_CYC_COMPACT * 8], rax
    jmp         .ret
.stop:
    mov         qword [r12 + X_DONE], 1
.ret:
    cmp         qword [r12 + X_PM], 0           ; the merge's cycles, chosen
    je          .no_cycles                      ; to next chosen
    RDTSC64
    mov         rcx, rax
    sub         rax, [r12 + X_TLAST]
    mov         [r12 + X_TLAST], rcx
    mov         rcx, [r12 + X_PMM]
    lea         rcx, [rcx + rcx * 2]
    shl         rcx, 3
    add         rcx, [r12 + X_PM]
    mov         [rcx], rax
.no_cycles:
    RESTORE

;=============================================================================
; worker(ctx, tid): the merge loop of every thread.  Barrier 1: the merge is
; chosen (or X_DONE).  Scan and rewrite this thread's words.  Barrier 2: all
; scans done; thread 0 coordinates while the others wait at barrier 1.
; Once X_SOLO is set (see train.inc), the other threads leave at barrier 1
; and thread 0 scans all of W and coordinates, merge after merge.
;=============================================================================
worker:
    SAVE        rbx, r12, r13
    mov         r12, rdi
    mov         r13, rsi
    mov         rbx, [r12 + X_DM + r13 * 8]
.round:
    lea         rdi, [r12 + X_BAR]
    call        asmbpe_barrier_wait
    cmp         qword [r12 + X_DONE], 0
    jne         .exit
    cmp         qword [r12 + X_SOLO], 0
    jne         .solo
.claim:                                         ; next segment, any thread
    mov         eax, 1
    lock xadd   [r12 + X_NEXTSEG], eax
    cmp         eax, [r12 + X_NSEG]
    jae         .scanned
    mov         rdi, r12
    mov         rsi, rbx
    mov         rdx, [r12 + X_SEG + rax * 8]
    mov         rcx, [r12 + X_SEG + rax * 8 + 8]
    call        scan_segment
    jmp         .claim
.scanned:
    lea         rdi, [r12 + X_BAR]
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
    mov         rcx, [r12 + X_NW]
    call        scan_segment
    mov         rdi, r12
    call        coordinate
    cmp         qword [r12 + X_DONE], 0
    je          .solo_merge
.exit:
    RESTORE

;=============================================================================
; count_all_pairs: rdi = ctx.  Adds count(word) for every adjacent pair of
; every word to the pair table.  Keeps rdi.
;=============================================================================
count_all_pairs:
    SAVE        rbx, r12, r13, r14, r15
    mov         rbx, rdi
    xor         r12d, r12d                      ; k
.word:
    cmp         r12, [rbx + X_NW]
    jae         .ret
    mov         rax, [rbx + X_WS]
    mov         r13, [rax + r12 * 8]            ; i
    mov         rax, [rbx + X_WC]
    mov         r14, [rax + r12 * 8]            ; count
    mov         r15, [rbx + X_W]
.pair:
    movzx       eax, word [r15 + r13 * 2 + 2]
    cmp         eax, SEP
    je          .next_word
    movzx       esi, word [r15 + r13 * 2]
    shl         esi, 16
    or          esi, eax
    mov         rdi, rbx
    mov         rdx, r14
    call        pt_add
    inc         r13
    jmp         .pair
.next_word:
    inc         r12
    jmp         .word
.ret:
    mov         rdi, rbx
    RESTORE

;=============================================================================
; naive_loop: rdi = ctx (one thread).  For every merge: recount every pair
; from scratch, take the best (highest count, then smallest pair), rewrite.
;=============================================================================
naive_loop:
    SAVE        rbx, r12, r13, r14, r15
    mov         rbx, rdi
.merge:
    mov         r8, [rbx + X_STATS]
    mov         rax, [r8 + ST_MERGES * 8]
    cmp         rax, [rbx + X_NMERGES]
    jae         .ret
    mov         rdi, [rbx + X_PT]               ; clear the table
    mov         rsi, [rbx + X_PTMASK]
    inc         rsi
    call        pt_fill_empty
    mov         qword [rbx + X_PTUSED], 0
    mov         rdi, rbx
    call        count_all_pairs
    cmp         qword [rbx + X_STATUS], 0
    jne         .ret
    mov         r8, [rbx + X_PT]                ; best slot
    mov         r9, [rbx + X_PTMASK]
    inc         r9
    shl         r9, 4
    add         r9, r8
    xor         r12d, r12d                      ; best count
    mov         r13d, EMPTY_KEY                 ; best pair
.slot:
    cmp         r8, r9
    jae         .chosen
    mov         eax, [r8 + PS_KEY]
    cmp         eax, EMPTY_KEY
    je          .next_slot
    mov         rcx, [r8 + PS_VAL]
    JBETTER     rcx, r12, rax, r13, .better
    jmp         .next_slot
.better:
    mov         r12, rcx
    mov         r13, rax
.next_slot:
    add         r8, PSLOT
    jmp         .slot
.chosen:
    test        r12, r12
    jz          .ret
    cmp         r12, [rbx + X_MINCOUNT]
    jb          .ret
    mov         rdi, rbx
    mov         rsi, r12
    mov         rdx, r13
    call        record_merge
    mov         rdi, rbx
    mov         rsi, [rbx + X_DM]
    xor         edx, edx
    mov         rcx, [rbx + X_NW]
    call        scan_segment
    push        rbx
    mov         rbx, [rbx + X_DM]               ; deltas unused here
    call        dm_clear
    mov         rax, [rbx + DM_STATUS]
    mov         qword [rbx + DM_REPL], 0
    pop         rbx
    test        rax, rax
    jz          .merge
    mov         [rbx + X_STATUS], rax
.ret:
    RESTORE

;=============================================================================
; verify: rdi = ctx.  Recounts every pair into a fresh table and compares it
; with the kept one both ways; the first disagreement goes to the stats.
;=============================================================================
verify:
    SAVE        rbx, r12, r13, r14, r15
    mov         rbx, rdi
    mov         r12, [rbx + X_PT]               ; kept table
    mov         r13, [rbx + X_PTMASK]
    mov         r14, [rbx + X_PTUSED]
    mov         rdi, rbx
    lea         rsi, [r13 + 1]
    call        pt_alloc
    test        eax, eax
    jnz         .enomem
    mov         rdi, rbx
    call        count_all_pairs                 ; into the fresh table
    ; kept -> fresh
    mov         r15, r12
.kept:
    mov         rax, r13
    inc         rax
    shl         rax, 4
    add         rax, r12
    cmp         r15, rax
    jae         .fresh
    mov         esi, [r15 + PS_KEY]
    cmp         esi, EMPTY_KEY
    je          .kept_next
    mov         rdi, rbx
    call        pt_get
    cmp         rax, [r15 + PS_VAL]
    je          .kept_next
    mov         rdx, [r15 + PS_VAL]
    call        .report                         ; esi = P, rdx = kept, rax = true
.kept_next:
    add         r15, PSLOT
    jmp         .kept
.fresh:                                         ; fresh -> kept (swap tables)
    mov         r15, [rbx + X_PT]
    push        qword [rbx + X_PTMASK]
    push        r15
    mov         [rbx + X_PT], r12
    mov         [rbx + X_PTMASK], r13
.fresh_slot:
    mov         rax, [rsp + 8]
    inc         rax
    shl         rax, 4
    add         rax, [rsp]
    cmp         r15, rax
    jae         .compared
    mov         esi, [r15 + PS_KEY]
    cmp         esi, EMPTY_KEY
    je          .fresh_next
    mov         rdi, rbx
    call        pt_get                          ; kept count
    cmp         rax, [r15 + PS_VAL]
    je          .fresh_next
    mov         rdx, rax
    mov         rax, [r15 + PS_VAL]
    call        .report
.fresh_next:
    add         r15, PSLOT
    jmp         .fresh_slot
.compared:
    pop         rdi                             ; free the fresh table
    pop         rsi
    inc         rsi
    shl         rsi, 4
    call        asmbpe_unmap
    mov         [rbx + X_PTUSED], r14
    jmp         .ret
.enomem:
    mov         [rbx + X_PT], r12
    mov         [rbx + X_PTMASK], r13
    mov         qword [rbx + X_STATUS], ASMBPE_ENOMEM
.ret:
    RESTORE
.report:                                        ; first disagreement only
    mov         r8, [rbx + X_STATS]
    cmp         qword [r8 + ST_VERIFY_PAIR * 8], -1
    jne         .reported
    mov         ecx, esi
    shr         ecx, 16
    shl         esi, 16
    or          ecx, esi                        ; left | right << 16
    mov         [r8 + ST_VERIFY_PAIR * 8], rcx
    mov         [r8 + ST_VERIFY_KEPT * 8], rdx
    mov         [r8 + ST_VERIFY_TRUE * 8], rax
.reported:
    ret

;-----------------------------------------------------------------------------
; int64_t asmbpe_train(const asmbpe_wordtab *t, uint64_t n_merges,
;                      uint64_t min_count, uint64_t threads, uint64_t flags,
;                      uint32_t *merges, uint64_t *counts, uint64_t *stats)
;
; Learns up to n_merges merges (SPEC §4) from the words of t: merge i joins
; merges[i] = left | right << 16 into token 256 + i, counts[i] its count.
; Stops early when no pair has min_count (0 means 1).  flags: 1 naive (one
; thread, every pair recounted for every merge), 2 verify.  stats: the
; ASMBPE_TS_* entries.  Returns the merges learned; ASMBPE_EVERIFY when
; verify found a disagreement (merges and stats are still written);
; ASMBPE_EINVAL, ASMBPE_ENOMEM, ASMBPE_ETHREAD.
;-----------------------------------------------------------------------------
FUNC asmbpe_train, 8, 15, 0, tab, nmerges, mincount, threads, flags, merges, counts, stats
    STACK_ALLOC 8                               ; aligned calls
    mov         rax, ASMBPE_EINVAL              ; int64_t: sign-extended
    test        threadsq, threadsq
    jz          .ret
    cmp         threadsq, MAX_THREADS
    ja          .ret
    mov         rax, 65535 - 256
    cmp         nmergesq, rax
    ja          .einval
    mov         r12, tabq
    mov         r13, nmergesq
    mov         r14, mincountq
    mov         r15, threadsq
    mov         rbx, flagsq
    mov         rbp, mergesq
    test        ebx, TF_NAIVE
    jz          .threads_ok
    mov         r15d, 1
.threads_ok:
    xor         r8d, r8d                        ; the counting threads' empty
.free_thread_tabs:                              ; tables: not needed here (a
    mov         rdi, [r12 + wtab.thread_tabs + r8 * 8]     ; later count maps
    mov         qword [r12 + wtab.thread_tabs + r8 * 8], 0 ; new ones)
    push        r8
    push        r8
    call        asmbpe_tab_free
    pop         r8
    pop         r8
    inc         r8
    cmp         r8, MAX_THREADS
    jb          .free_thread_tabs
    mov         edi, (X_SIZE + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .enomem0
    mov         rdi, rax                        ; ctx lives in rdi / [rsp]
    mov         [rsp], rax
    mov         [rdi + X_NMERGES], r13
    test        r14, r14
    jnz         .mc
    inc         r14
.mc:
    mov         [rdi + X_MINCOUNT], r14
    mov         [rdi + X_NTH], r15
    mov         [rdi + X_FLAGS], rbx
    mov         [rdi + X_MERGES], rbp
    mov         rax, countsm
    mov         [rdi + X_COUNTS], rax
    mov         rax, statsm
    mov         [rdi + X_STATS], rax
    mov         r8, rax
    mov         rax, [r8 + ST_PER_MERGE * 8]    ; (an input)
    mov         [rdi + X_PM], rax
    xor         eax, eax
    mov         ecx, ST_COUNT
.zero_stats:
    mov         [r8 + rcx * 8 - 8], rax
    dec         ecx
    jnz         .zero_stats
    mov         qword [r8 + ST_VERIFY_MERGE * 8], -1
    mov         qword [r8 + ST_VERIFY_PAIR * 8], -1
    mov         qword [r8 + ST_SOLO_MERGE * 8], -1
    mov         rax, [rdi + X_PM]
    mov         [r8 + ST_PER_MERGE * 8], rax
    mov         [r8 + ST_THREADS * 8], r15
    lea         rdi, [rdi + X_BAR]
    mov         rsi, r15
    call        asmbpe_barrier_init

    ; ---- layout: words of two or more bytes as u16 runs ------------------
    RDTSC64
    push        rax
    push        rax
    mov         rdi, [rsp + 16]
    mov         r8, [r12 + wtab.slots]
    mov         r9, [r12 + wtab.mask]
    inc         r9
    shl         r9, 5
    add         r9, r8
    xor         r10d, r10d                      ; words
    xor         r11d, r11d                      ; tokens
.count_slots:
    cmp         r8, r9
    jae         .counted
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
    mov         [rdi + X_NW], r10
    mov         r8, [rdi + X_STATS]
    mov         [r8 + ST_WORDS * 8], r10
    mov         [r8 + ST_TOKENS * 8], r11
    lea         rax, [r10 + r11 + 1]
    mov         [rdi + X_WLEN], rax
    lea         rdi, [rax * 2 + W_TAIL * 2 + 4095]
    and         rdi, ~4095
    mov         rax, [rsp + 16]
    mov         [rax + X_WBYTES], rdi
    call        asmbpe_map
    mov         rdi, [rsp + 16]
    mov         [rdi + X_W], rax
    test        rax, rax
    jz          .enomem
    mov         rax, [rdi + X_NW]
    lea         rax, [rax * 8 + 4095 + 8]
    and         rax, ~4095
    mov         [rdi + X_NWCAP], rax
    mov         rdi, rax
    call        asmbpe_map
    mov         rdi, [rsp + 16]
    mov         [rdi + X_WS], rax
    test        rax, rax
    jz          .enomem
    mov         rdi, [rdi + X_NWCAP]
    call        asmbpe_map
    mov         rdi, [rsp + 16]
    mov         [rdi + X_WC], rax
    test        rax, rax
    jz          .enomem
    mov         r8, [r12 + wtab.slots]             ; fill
    mov         r9, [r12 + wtab.mask]
    inc         r9
    shl         r9, 5
    add         r9, r8
    mov         r10, [rdi + X_W]
    mov         word [r10], SEP
    mov         ecx, 1                          ; position
    xor         r11d, r11d                      ; k
.fill_slot:
    cmp         r8, r9
    jae         .filled
    mov         rax, [r8 + slot.count]
    test        rax, rax
    jz          .fill_next
    mov         rdx, [r8 + slot.len]
    cmp         rdx, 2
    jb          .fill_next
    mov         rsi, [rdi + X_WC]
    mov         [rsi + r11 * 8], rax
    mov         rsi, [rdi + X_WS]
    mov         [rsi + r11 * 8], rcx
    inc         r11
    mov         rsi, [r8 + slot.key]
    add         rsi, [r12 + wtab.base]
.fill_byte:
    movzx       eax, byte [rsi]
    mov         [r10 + rcx * 2], ax
    inc         rsi
    inc         rcx
    dec         rdx
    jnz         .fill_byte
    mov         word [r10 + rcx * 2], SEP
    inc         rcx
.fill_next:
    add         r8, slot_size
    jmp         .fill_slot
.filled:
    mov         edx, W_TAIL
.fill_tail:
    mov         word [r10 + rcx * 2], SEP
    inc         rcx
    dec         edx
    jnz         .fill_tail
    test        qword [rdi + X_FLAGS], TF_RELEASE
    jz          .keep_words                     ; the caller is done with t:
    push        rdi                             ; its pages go back before
    mov         rdi, r12                        ; the filters, pair table and
    call        asmbpe_wordtab_release          ; heap fault theirs in (the
    pop         rdi                             ; kernel hands the same,
.keep_words:                                    ; recently used, pages out)
    mov         rax, [rdi + X_WLEN]             ; chunk filters: per bucket
    shr         rax, CHUNK_SHIFT + 6            ; the qwords of every chunk,
    add         rax, 5                          ; and four more (the scan
    shl         rax, 3                          ; reads q .. q + 4)
    mov         [rdi + X_BLSTRIDE], rax
    imul        rax, rax, FILT_BUCKETS + PAIR_FILT_BUCKETS + 32
    add         rax, 4095                       ; (+ 32 strides: X_CW, u32 for
                                                ; each of stride * 8 chunks)
    and         rax, ~4095
    mov         [rdi + X_BLBYTES], rax
    push        rdi
    mov         rdi, rax
    call        asmbpe_map
    pop         rdi
    mov         [rdi + X_BLOOM], rax
    test        rax, rax
    jz          .enomem_layout
    mov         rcx, [rdi + X_BLSTRIDE]
    imul        rcx, rcx, FILT_BUCKETS + PAIR_FILT_BUCKETS
    add         rax, rcx
    mov         [rdi + X_CW], rax
    call        bloom_build
    RDTSC64
    pop         rdx
    pop         rdx
    sub         rax, rdx
    mov         rdi, [rsp]
    mov         r8, [rdi + X_STATS]
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
    cmp         r13, r15
    jae         .dms_done
    call        dm_alloc
    mov         rdi, [rsp]
    mov         [rdi + X_DM + r13 * 8], rax
    test        rax, rax
    jz          .enomem
    inc         r13
    jmp         .dms
.dms_done:
    mov         rax, [rdi + X_WLEN]             ; the pair table: half as
    lzcnt       rcx, rax                        ; many slots as W has
    mov         esi, 1                          ; positions (rounded up to a
    neg         ecx                             ; power of two): the pairs
    add         ecx, 63                         ; of most inputs fit without
    shlx        rsi, rsi, rcx                   ; growing more than once
    mov         eax, 1 << 16
    cmp         rsi, rax
    cmovb       rsi, rax
    call        pt_alloc
    test        eax, eax
    jnz         .enomem
    mov         rdi, [rsp]
    mov         edi, 4096 * 16
    call        asmbpe_map
    mov         rdi, [rsp]
    mov         [rdi + X_H], rax
    mov         qword [rdi + X_HCAP], 4096
    test        rax, rax
    jz          .enomem
    call        segments
    test        ebx, TF_NAIVE
    jnz         .naive

    RDTSC64                                     ; ---- initial pair counts
    push        rax
    push        rax
    mov         rdi, [rsp + 16]
    call        count_all_pairs
    mov         r8, [rdi + X_STATS]
    mov         rax, [rdi + X_PTUSED]
    mov         [r8 + ST_PAIRS * 8], rax
    mov         r13, [rdi + X_PT]               ; heap of every pair
    mov         r14, [rdi + X_PTMASK]
    inc         r14
    shl         r14, 4
    add         r14, r13
.heap_fill:
    cmp         r13, r14
    jae         .heap_filled
    mov         edx, [r13 + PS_KEY]
    cmp         edx, EMPTY_KEY
    je          .heap_next
    mov         rsi, [r13 + PS_VAL]
    mov         rdi, [rsp + 16]
    call        heap_push
.heap_next:
    add         r13, PSLOT
    jmp         .heap_fill
.heap_filled:
    RDTSC64
    pop         rdx
    pop         rdx
    sub         rax, rdx
    mov         rdi, [rsp]
    mov         r8, [rdi + X_STATS]
    mov         [r8 + ST_CYC_PAIRS * 8], rax
    cmp         qword [rdi + X_STATUS], 0
    jne         .cleanup

    RDTSC64                                     ; ---- the merge loop
    push        rax
    push        rax
    mov         rdi, [rsp + 16]
    call        choose
    mov         dword [rdi + X_NEXTSEG], 0
    RDTSC64
    mov         [rdi + X_TLAST], rax            ; the first merge is chosen
    cmp         qword [rdi + X_DONE], 0
    jne         .loop_done
    lea         rdi, [worker]
    mov         rsi, [rsp + 16]
    mov         rdx, r15
    call        asmbpe_parallel
    mov         rdi, [rsp + 16]
    test        eax, eax
    jz          .loop_done
    movsxd      rax, eax
    mov         [rdi + X_STATUS], rax
.loop_done:
    RDTSC64
    pop         rdx
    pop         rdx
    sub         rax, rdx
    mov         rdi, [rsp]
    mov         r8, [rdi + X_STATS]
    mov         [r8 + ST_CYC_LOOP * 8], rax
    test        ebx, TF_VERIFY
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
    mov         r8, [rdi + X_STATS]
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
    mov         r8, [rdi + X_STATS]
    mov         [r8 + ST_CYC_LOOP * 8], rax
    jmp         .cleanup

.enomem:
    mov         rdi, [rsp]
    mov         qword [rdi + X_STATUS], ASMBPE_ENOMEM
.cleanup:                                       ; rdi = ctx: stats, then free
    mov         rdi, [rsp]
    mov         r8, [rdi + X_STATS]
    xor         r13d, r13d
.sum_threads:
    cmp         r13, r15
    jae         .summed
    mov         rax, [rdi + X_DM + r13 * 8]
    test        rax, rax
    jz          .summed
    mov         rcx, [rax + DM_CYC]
    add         [r8 + ST_CYC_SCAN * 8], rcx
    mov         rcx, [rax + DM_WORDS]
    add         [r8 + ST_REWRITTEN * 8], rcx
    inc         r13
    jmp         .sum_threads
.summed:
    xor         edi, edi
    call        asmbpe_mapped_peak
    mov         rdi, [rsp]
    mov         r8, [rdi + X_STATS]
    mov         [r8 + ST_PEAK_BYTES * 8], rax
    xor         r13d, r13d
.free_dms:
    cmp         r13, r15
    jae         .free_rest
    mov         rdi, [rsp]
    mov         rdi, [rdi + X_DM + r13 * 8]
    call        dm_free
    inc         r13
    jmp         .free_dms
.free_rest:
    mov         rbx, [rsp]
    cmp         qword [rbx + X_PT], 0
    je          .no_pt
    mov         rdi, rbx
    call        pt_free
.no_pt:
    mov         rdi, [rbx + X_H]
    mov         rsi, [rbx + X_HCAP]
    shl         rsi, 4
    call        asmbpe_unmap
    mov         rdi, [rbx + X_W]
    mov         rsi, [rbx + X_WBYTES]
    call        asmbpe_unmap
    mov         rdi, [rbx + X_BLOOM]
    mov         rsi, [rbx + X_BLBYTES]
    call        asmbpe_unmap
    mov         rdi, [rbx + X_WS]
    mov         rsi, [rbx + X_NWCAP]
    call        asmbpe_unmap
    mov         rdi, [rbx + X_WC]
    mov         rsi, [rbx + X_NWCAP]
    call        asmbpe_unmap
    mov         rax, [rbx + X_STATUS]           ; the result
    test        rax, rax
    jnz         .free_ctx
    mov         r8, [rbx + X_STATS]
    mov         rax, [r8 + ST_MERGES * 8]
    test        qword [rbx + X_FLAGS], TF_VERIFY
    jz          .free_ctx                       ; (the stats still tell)
    cmp         qword [r8 + ST_VERIFY_MERGE * 8], -1
    jne         .verify_failed
    cmp         qword [r8 + ST_VERIFY_PAIR * 8], -1
    je          .free_ctx
.verify_failed:
    mov         rax, ASMBPE_EVERIFY
.free_ctx:
    mov         r12, rax
    mov         rdi, rbx
    mov         esi, (X_SIZE + 4095) & ~4095
    call        asmbpe_unmap
    mov         rax, r12
    jmp         .ret
.enomem0:
    mov         rax, ASMBPE_ENOMEM
    jmp         .ret
.einval:
    mov         rax, ASMBPE_EINVAL
.ret:
    STACK_FREE  8
    RET
ENDFUNC
