;-----------------------------------------------------------------------------
; count_merge.asm — word counting for training, second half: the threads'
; tables of asmbpe_count_words (count.asm) merged into the persistent table
; t (count_merge).  With one thread, one thread merges them (merge_serial);
; from two on, every thread merges its own at once (T58, below).  Layout:
; count.inc (struc cctx), wordtab.inc (the tables).
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "wordtab.inc"
%define COUNT_MERGE_HERE
%include "count.inc"

extern asmbpe_tab_grow
extern asmbpe_arena_reserve
extern asmbpe_memeq

section .text

;-----------------------------------------------------------------------------
; int64_t count_merge(cctx *ctx)   (rdi; hidden)
; After count_worker: merges every thread's table into t and keeps the
; emptied tables in t for the next call.  The parallel merge when there are
; two or more threads and par_prepare made room, else merge_serial.  Any
; failure goes to cctx.status.  Clobbers the caller-saved registers.
;-----------------------------------------------------------------------------
PROC count_merge
    SAVE        rbx, r12, r13                   ; (calls aligned)
    mov         rbx, rdi
    cmp         qword [rbx + cctx.nthreads], 1
    je          .serial
    call        par_prepare
    test        eax, eax
    jnz         .serial                         ; no room: one thread merges
    lea         rdi, [merge_worker]
    mov         rsi, rbx
    mov         rdx, [rbx + cctx.nthreads]
    call        asmbpe_parallel
    test        eax, eax
    jnz         .not_run
    mov         rdi, rbx
    call        par_finish
    test        eax, eax
    jz          .ret
    movsxd      rax, eax
    mov         [rbx + cctx.status], rax
    jmp         .ret
.not_run:                                       ; no thread ran: one merges
    mov         rdi, [rbx + cctx.list]
    mov         rsi, [rbx + cctx.listbytes]
    call        asmbpe_unmap
    mov         r12, [rbx + cctx.t]             ; (par_prepare added the
    xor         r13d, r13d                      ; counts to t's total: the
.untotal:                                       ; serial merge adds them again)
    cmp         r13, [rbx + cctx.nthreads]
    jae         .serial
    mov         rax, [rbx + cctx.tables + r13 * 8]
    test        rax, rax
    jz          .untotal_next
    mov         rax, [rax + wtab.total]
    sub         [r12 + wtab.total], rax
.untotal_next:
    inc         r13
    jmp         .untotal
.serial:
    mov         rdi, rbx
    call        merge_serial
.ret:
    RESTORE
ENDPROC

; merge_serial: rdi = ctx.  Merges the threads' tables into t one after the
; other (merge_table, asmbpe_tab_insert) and keeps them in t.
merge_serial:
    SAVE        rbx, r12, r13                   ; (calls aligned)
    mov         rbx, rdi
    xor         r13d, r13d
.table:
    cmp         r13, [rbx + cctx.nthreads]
    jae         .ret
    mov         r12, [rbx + cctx.tables + r13 * 8]
    test        r12, r12
    jz          .next
    mov         rdi, rbx
    mov         rsi, r12
    xor         edx, edx
    call        merge_table
    mov         rax, [rbx + cctx.t]
    mov         [rax + wtab.thread_tabs + r13 * 8], r12
.next:
    inc         r13
    jmp         .table
.ret:
    RESTORE

;-----------------------------------------------------------------------------
; The parallel merge (two or more threads, T58): every thread merges its own
; table into t at once (merge_worker).  A new key's slot is claimed with a
; locked cmpxchg of slot.state (0 -> 1) and published by the store of its
; count, after its hash, key and len (x86 keeps stores in order, and loads:
; a thread that reads count != 0 then reads what was written before it); a
; thread that finds a slot claimed but not yet published waits for its count.
; Until asmbpe_count_words copies the new keys' bytes into t's arena after
; the threads are done (par_finish), their slots point into the text (state
; 1).  Before, par_prepare made room in t for every key of every thread's
; table (t at most 15/16 full after; grown back to 3/4 by par_finish) and in
; its arena for all their bytes, so no thread ever grows either.
;-----------------------------------------------------------------------------

; par_insert: rdi = t, rsi = key (in the text), rdx = len, rcx = hash, r8 =
; count -> rax = the slot claimed for the key, new in t, or 0 (t had it: the
; count added).  Clobbers rcx, rdx, rsi, rdi, r8-r11.
%define pi_t     rbx         ; t
%define pi_key   r12         ; the key's bytes
%define pi_len   r13         ; its length
%define pi_len_d r13d        ; (32-bit view)
%define pi_hash  r14         ; its hash
%define pi_count r15         ; the count to add
%define pi_i     rbp         ; the slot probed (index)
par_insert:
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, 8                          ; (calls aligned)
    mov         pi_t, rdi
    mov         pi_key, rsi
    mov         pi_len, rdx
    mov         pi_hash, rcx
    mov         pi_count, r8
    mov         pi_i, rcx
.probe:
    and         pi_i, [pi_t + wtab.mask]
    mov         rdx, pi_i
    shl         rdx, 5
    add         rdx, [pi_t + wtab.slots]        ; the slot
    cmp         qword [rdx + slot.count], 0
    jne         .filled
    cmp         dword [rdx + slot.state], 0
    jne         .wait                           ; claimed, being written
    xor         eax, eax
    mov         ecx, 1
    lock cmpxchg [rdx + slot.state], ecx
    jne         .wait                           ; another thread claimed it first
    mov         [rdx + slot.hash], pi_hash
    mov         [rdx + slot.key], pi_key
    mov         [rdx + slot.len], pi_len_d
    mov         [rdx + slot.count], pi_count    ; published
    mov         rax, rdx
    jmp         .ret
.wait:
    pause
    cmp         qword [rdx + slot.count], 0
    je          .wait
.filled:
    cmp         [rdx + slot.hash], pi_hash
    jne         .next
    cmp         [rdx + slot.len], pi_len_d
    jne         .next
    cmp         pi_len, KEY_IN_HASH             ; (the same bytes: HASH_BYTES)
    jbe         .same
    mov         rsi, [rdx + slot.key]           ; its bytes: in the text (state
    cmp         dword [rdx + slot.state], 0     ; 1), or at this offset of the
    jne         .compare                        ; arena
    add         rsi, [pi_t + wtab.base]
.compare:
    cmp         pi_len, 32
    ja          .memeq
    KEY_EQ32    pi_key, rsi, pi_len_d, eax, ecx ; up to 32 bytes: no call
    jnz         .next
    jmp         .same
.memeq:
    mov         [rsp], rdx
    mov         rdi, pi_key
    mov         rdx, pi_len
    call        asmbpe_memeq
    mov         rdx, [rsp]
    test        eax, eax
    jz          .next
.same:
    lock add    [rdx + slot.count], pi_count
    xor         eax, eax
    jmp         .ret
.next:
    inc         pi_i
    jmp         .probe
.ret:
    add         rsp, 8
    RESTORE
%undef  pi_t
%undef  pi_key
%undef  pi_len
%undef  pi_len_d
%undef  pi_hash
%undef  pi_count
%undef  pi_i

; merge_table: rdi = ctx, rsi = a thread's table, rdx = where to list the
; slots of the keys new in t (the parallel merge: par_insert), or 0 (one
; thread: asmbpe_tab_insert, a failure kept in cctx.status).  Adds every key
; of the table to t and empties the table for the next call.  -> rax = the
; list's end.
%define mt_ctx   r12         ; the counting context
%define mt_tab   r13         ; the thread's table
%define mt_slot  r14         ; its slot being merged
%define mt_end   r15         ; the end of its slots
%define mt_list  rbx         ; the list's end (0: serial)
%define mt_t     rbp         ; t
merge_table:
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, 8                          ; (calls aligned)
    mov         mt_ctx, rdi
    mov         mt_tab, rsi
    mov         mt_list, rdx
    mov         mt_t, [mt_ctx + cctx.t]
    mov         mt_slot, [mt_tab + wtab.slots]
    mov         mt_end, [mt_tab + wtab.mask]
    inc         mt_end
    shl         mt_end, 5
    add         mt_end, mt_slot
.slot:
    cmp         mt_slot, mt_end
    jae         .emptied
    lea         rax, [mt_slot + MERGE_AHEAD * slot_size]
    cmp         rax, mt_end
    jae         .no_prefetch
    mov         rax, [rax + slot.hash]          ; prefetch the slot of t that
    and         rax, [mt_t + wtab.mask]         ; the slot MERGE_AHEAD further
    shl         rax, 5                          ; on will probe first
    add         rax, [mt_t + wtab.slots]
    prefetcht0  [rax]
    mov         rax, [mt_slot + MERGE_AHEAD * slot_size + slot.key]
    prefetcht0  [rax]                           ; and its text (copied or
.no_prefetch:                                   ; compared; no fault if empty)
    mov         r8, [mt_slot + slot.count]
    test        r8, r8
    jz          .next
    mov         qword [mt_slot + slot.count], 0 ; (emptied for the next call)
    mov         rdi, mt_t
    mov         rsi, [mt_slot + slot.key]
    mov         edx, [mt_slot + slot.len]
    mov         rcx, [mt_slot + slot.hash]
    test        mt_list, mt_list
    jz          .serial
    call        par_insert
    test        rax, rax
    jz          .next
    mov         [mt_list], rax                  ; a key new in t
    add         mt_list, 8
    jmp         .next
.serial:
    call        asmbpe_tab_insert
    test        eax, eax
    jz          .next
    movsxd      rax, eax
    mov         [mt_ctx + cctx.status], rax
.next:
    add         mt_slot, slot_size
    jmp         .slot
.emptied:
    mov         qword [mt_tab + wtab.used], 0
    mov         qword [mt_tab + wtab.total], 0
    mov         qword [mt_tab + wtab.keybytes], 0
    mov         rax, mt_list
    add         rsp, 8
    RESTORE
%undef  mt_ctx
%undef  mt_tab
%undef  mt_slot
%undef  mt_end
%undef  mt_list
%undef  mt_t

; void merge_worker(ctx, tid): merges this thread's table into t at once
; with the others (merge_table, listing from cctx.lstart[tid]; the list's
; end in cctx.lcur[tid]).
merge_worker:
    SAVE        rbx, r12, r13                   ; (calls aligned)
    mov         r12, rdi
    mov         rbx, rsi
    mov         rsi, [r12 + cctx.tables + rbx * 8]
    mov         rdx, [r12 + cctx.lstart + rbx * 8]
    mov         rax, rdx
    test        rsi, rsi
    jz          .done
    call        merge_table
.done:
    mov         [r12 + cctx.lcur + rbx * 8], rax
    RESTORE

; par_prepare: rdi = ctx.  Makes room in t for every key of the threads'
; tables (at most 15/16 full with all of them new) and in its arena for their
; bytes, adds their counts to t's total, and maps the list of new slots:
; each thread's part of it in cctx.lstart.  eax = 0, or ASMBPE_ENOMEM (then
; nothing is merged or counted; t may have grown).
%define pp_ctx   rbx
%define pp_t     r12
%define pp_i     r13
%define pp_used  r14         ; the threads' keys
%define pp_bytes r15         ; and their bytes
par_prepare:
    SAVE        rbx, r12, r13, r14, r15
    mov         pp_ctx, rdi
    mov         pp_t, [pp_ctx + cctx.t]
    xor         pp_used, pp_used
    xor         pp_bytes, pp_bytes
    xor         pp_i, pp_i
.sum:
    cmp         pp_i, [pp_ctx + cctx.nthreads]
    jae         .summed
    mov         rax, [pp_ctx + cctx.tables + pp_i * 8]
    test        rax, rax
    jz          .sum_next
    add         pp_used, [rax + wtab.used]
    add         pp_bytes, [rax + wtab.keybytes]
.sum_next:
    inc         pp_i
    jmp         .sum
.summed:
    mov         rax, [pp_t + wtab.used]         ; 16 (used + theirs) <= 15 slots?
    add         rax, pp_used
    shl         rax, 4
    mov         rcx, [pp_t + wtab.mask]
    inc         rcx
    imul        rcx, rcx, 15
    cmp         rax, rcx
    jbe         .room
    mov         rdi, pp_t
    call        asmbpe_tab_grow
    test        eax, eax
    jnz         .ret
    jmp         .summed
.room:
    mov         rdi, pp_t
    lea         rsi, [pp_bytes + KEY_SLACK]     ; par_finish copies 32 bytes a key
    call        asmbpe_arena_reserve
    test        eax, eax
    jnz         .ret
    lea         rdi, [pp_used * 8 + 8]
    mov         [pp_ctx + cctx.listbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [pp_ctx + cctx.list], rax
    xor         pp_i, pp_i                      ; each thread's part, and its
.parts:                                         ; counts into t's total
    cmp         pp_i, [pp_ctx + cctx.nthreads]
    jae         .done
    mov         [pp_ctx + cctx.lstart + pp_i * 8], rax
    mov         rcx, [pp_ctx + cctx.tables + pp_i * 8]
    test        rcx, rcx
    jz          .part_next
    mov         rdx, [rcx + wtab.used]
    lea         rax, [rax + rdx * 8]
    mov         rdx, [rcx + wtab.total]
    add         [pp_t + wtab.total], rdx
.part_next:
    inc         pp_i
    jmp         .parts
.done:
    xor         eax, eax
    jmp         .ret
.enomem:
    mov         eax, ASMBPE_ENOMEM
.ret:
    RESTORE
%undef  pp_ctx
%undef  pp_t
%undef  pp_i
%undef  pp_used
%undef  pp_bytes

; par_finish: rdi = ctx.  After merge_worker: copies the new keys' bytes
; into t's arena (room made by par_prepare), counts them in t.used, keeps the
; emptied thread tables in t, unmaps the list and grows t back to at most 3/4
; full.  eax = 0, or ASMBPE_ENOMEM (t could not grow: it is whole, fuller).
%define pf_ctx   rbx
%define pf_t     r12
%define pf_i     r13
%define pf_p     r14         ; the list entry
%define pf_end   r15         ; the end of this thread's list
par_finish:
    SAVE        rbx, r12, r13, r14, r15
    mov         pf_ctx, rdi
    mov         pf_t, [pf_ctx + cctx.t]
    xor         pf_i, pf_i
.thread:
    cmp         pf_i, [pf_ctx + cctx.nthreads]
    jae         .copied
    mov         rax, [pf_ctx + cctx.tables + pf_i * 8]
    mov         [pf_t + wtab.thread_tabs + pf_i * 8], rax
    mov         pf_p, [pf_ctx + cctx.lstart + pf_i * 8]
    mov         pf_end, [pf_ctx + cctx.lcur + pf_i * 8]
.key:
    cmp         pf_p, pf_end
    jae         .thread_next
    ; the slots (in t, by hash) and their words (in the text) are misses a
    ; key apart: prefetch the slot PF_SLOT_AHEAD entries ahead and the text
    ; of the one PF_TEXT_AHEAD ahead, whose slot came in meanwhile (entries
    ; past the list's end read as this one)
    lea         rax, [pf_p + PF_SLOT_AHEAD * 8]
    cmp         rax, pf_end
    cmovae      rax, pf_p
    mov         rax, [rax]
    prefetcht0  [rax]
    lea         rax, [pf_p + PF_TEXT_AHEAD * 8]
    cmp         rax, pf_end
    cmovae      rax, pf_p
    mov         rax, [rax]
    mov         rax, [rax + slot.key]
    prefetcht0  [rax]
    mov         r8, [pf_p]                      ; the slot
    mov         ecx, [r8 + slot.len]
    mov         rsi, [r8 + slot.key]            ; the bytes in the text
    mov         rdi, [pf_t + wtab.arena_use]
    mov         [r8 + slot.key], rdi            ; -> their arena offset
    add         [pf_t + wtab.arena_use], rcx
    add         rdi, [pf_t + wtab.base]
    cmp         ecx, 32
    ja          .long_key
    vmovdqu     xmm0, [rsi]                     ; up to 32 bytes: 32 copied (the
    vmovdqu     xmm1, [rsi + 16]                ; text has PAD bytes after it, the
    vmovdqu     [rdi], xmm0                     ; arena KEY_SLACK more than its
    vmovdqu     [rdi + 16], xmm1                ; keys: par_prepare)
    jmp         .key_copied
.long_key:
    rep movsb
.key_copied:
    mov         dword [r8 + slot.state], 0
    add         pf_p, 8
    jmp         .key
.thread_next:
    mov         rax, pf_end                     ; its new words, all in use now
    sub         rax, [pf_ctx + cctx.lstart + pf_i * 8]
    shr         rax, 3
    add         [pf_t + wtab.used], rax
    inc         pf_i
    jmp         .thread
.copied:
    mov         rdi, [pf_ctx + cctx.list]
    mov         rsi, [pf_ctx + cctx.listbytes]
    call        asmbpe_unmap
.grow:
    mov         rax, [pf_t + wtab.used]         ; 4 used <= 3 slots
    shl         rax, 2
    mov         rcx, [pf_t + wtab.mask]
    lea         rcx, [rcx * 2 + rcx + 3]
    cmp         rax, rcx
    jbe         .ret_ok
    mov         rdi, pf_t
    call        asmbpe_tab_grow
    test        eax, eax
    jz          .grow
    jmp         .ret
.ret_ok:
    xor         eax, eax
.ret:
    RESTORE
%undef  pf_ctx
%undef  pf_t
%undef  pf_i
%undef  pf_p
%undef  pf_end

