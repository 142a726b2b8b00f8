;-----------------------------------------------------------------------------
; encode_long.asm — the long path: chunks of more than SHORT_MAX bytes
; (long_path), with its min-heap (heap_push, heap_pop: used here only).
;
; Called by chunk_uncached (encode_cache.asm).  Its arrays live in the
; thread state (tstate.long), grown here.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "encode.inc"

section .text

;=============================================================================
; long_path: rbx = thread state, r12 = job, rsi = bytes, rdx = n (>
; SHORT_MAX), rdi = ids out.  The ids live at rdi by position; next[] and
; prev[] link the live ones; a min-heap holds (rank << 32 | position) of
; candidate pairs, stale entries dropped when popped (the pair at that
; position no longer has that rank).  Same-rank pairs pop left to right,
; and a merge only makes pairs of higher rank, so this is the rounds of the
; short path, in O(n log n).  Returns rdi past the ids.  Keeps rbx, rbp,
; r12-r15.  On ENOMEM: sets the job's status, returns rdi unchanged.
;=============================================================================
struc lp_frame                                  ; long_path's stack frame
    .w:         resq 1                          ; ids out
    .p:         resq 1                          ; the chunk's bytes
    .n:         resq 1                          ; its length
endstruc                                        ; (5 pushes + ret + 24: aligned)

%define DEAD        0xFFFF

%define lp_ts        rbx   ; the thread state (tstate.long: the arrays)
%define lp_ids       r12   ; the ids, by position (r12: the job until then)
%define lp_next      r13   ; u32 next[]: the next live position
%define lp_prev      r14   ; u32 prev[]: the live one before
%define lp_heap      r15   ; u64 heap[] of rank << 32 | position
%define lp_hn        ebp   ; its size
%define lp_at        rdi   ; i: the position popped
%define lp_atd       edi   ; (lp_at, 32-bit)
%define lp_r         esi   ; its pair's rank, then the new id (256 + rank)
%define lp_rw        si    ; (lp_r, 16-bit)
PROC long_path, 64
    SAVE        rbp, r12, r13, r14, r15
    sub         rsp, lp_frame_size
    mov         [rsp + lp_frame.w], rdi
    mov         [rsp + lp_frame.p], rsi
    mov         [rsp + lp_frame.n], rdx
    inc         qword [lp_ts + tstate.longs]
    cmp         rdx, [lp_ts + tstate.longcap]
    jbe         .have_room
    mov         rdi, [lp_ts + tstate.long]      ; grow the arrays
    mov         rsi, [lp_ts + tstate.longcap]
    shl         rsi, 5
    call        asmbpe_unmap
    mov         qword [lp_ts + tstate.long], 0
    mov         qword [lp_ts + tstate.longcap], 0
    mov         rdi, [rsp + lp_frame.n]
    add         rdi, 65535
    and         rdi, ~65535
    mov         r13, rdi
    shl         rdi, 5
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [lp_ts + tstate.long], rax
    mov         [lp_ts + tstate.longcap], r13
.have_room:
    mov         rax, [r12 + job.enc]
    LOAD_TABLE  rax
    mov         lp_ids, [rsp + lp_frame.w]      ; ids (r12 is saved)
    mov         lp_next, [lp_ts + tstate.long]  ; next[]
    mov         lp_prev, [lp_ts + tstate.longcap]
    lea         lp_prev, [lp_next + lp_prev * 4] ; prev[]
    mov         lp_heap, [lp_ts + tstate.longcap]
    lea         lp_heap, [lp_next + lp_heap * 8] ; heap[]
    xor         lp_hn, lp_hn                    ; heap size
    mov         rsi, [rsp + lp_frame.p]
    mov         rdx, [rsp + lp_frame.n]
    xor         eax, eax
.init:
    movzx       ecx, byte [rsi + rax]
    mov         [lp_ids + rax * 2], cx
    lea         ecx, [eax + 1]
    mov         [lp_next + rax * 4], ecx
    lea         ecx, [eax - 1]
    mov         [lp_prev + rax * 4], ecx
    inc         rax
    cmp         rax, rdx
    jb          .init
    xor         edi, edi                        ; the first pairs
.init_pairs:
    lea         eax, [edi + 1]
    cmp         rax, [rsp + lp_frame.n]
    jae         .loop
    movzx       eax, word [lp_ids + rdi * 2]
    movzx       edx, word [lp_ids + rdi * 2 + 2]
    RANK        eax, rax, eax, edx
    cmp         eax, NO_RANK
    je          .init_next
    shl         rax, 32
    or          rax, rdi
    call        heap_push
.init_next:
    inc         edi
    jmp         .init_pairs
.loop:
    test        lp_hn, lp_hn
    jz          .finish
    call        heap_pop                        ; rax = rank << 32 | i
    mov         lp_atd, eax                     ; i
    shr         rax, 32
    mov         lp_r, eax                       ; rank
    movzx       eax, word [lp_ids + lp_at * 2]
    cmp         eax, DEAD
    je          .loop
    mov         ecx, [lp_next + lp_at * 4]      ; j = next[i]
    cmp         rcx, [rsp + lp_frame.n]
    jae         .loop
    movzx       edx, word [lp_ids + rcx * 2]
    push        rcx
    RANK        eax, rax, eax, edx
    pop         rcx
    cmp         eax, lp_r
    jne         .loop                           ; stale
    add         lp_r, 256                       ; merge: id[i] = t
    mov         [lp_ids + lp_at * 2], lp_rw
    mov         word [lp_ids + rcx * 2], DEAD
    mov         edx, [lp_next + rcx * 4]        ; k = next[j]
    mov         [lp_next + lp_at * 4], edx
    cmp         rdx, [rsp + lp_frame.n]
    jae         .no_k
    mov         [lp_prev + rdx * 4], lp_atd     ; prev[k] = i
    push        rdx                             ; (t, id[k]) at i
    push        rdi
    movzx       eax, word [lp_ids + rdx * 2]
    RANK        eax, rax, lp_r, eax
    pop         rdi
    pop         rdx
    cmp         eax, NO_RANK
    je          .no_k
    shl         rax, 32
    or          rax, lp_at
    push        rdi
    push        rsi
    call        heap_push
    pop         rsi
    pop         rdi
.no_k:
    mov         edx, [lp_prev + lp_at * 4]      ; h = prev[i]
    cmp         edx, -1
    je          .loop
    movzx       eax, word [lp_ids + rdx * 2]    ; (id[h], t) at h
    push        rdx
    RANK        eax, rax, eax, lp_r
    pop         rdx
    cmp         eax, NO_RANK
    je          .loop
    shl         rax, 32
    or          rax, rdx
    call        heap_push
    jmp         .loop
.finish:                                        ; the live ids, in order
    xor         eax, eax                        ; read (position)
    xor         edx, edx                        ; write
.gather:
    movzx       ecx, word [lp_ids + rax * 2]
    mov         [lp_ids + rdx * 2], cx
    inc         edx
    mov         eax, [lp_next + rax * 4]
    cmp         rax, [rsp + lp_frame.n]
    jb          .gather
    lea         rdi, [lp_ids + rdx * 2]
    jmp         .ret
.enomem:
    mov         r12, [rsp + lp_frame_size + 8 * 3] ; the saved job (r12)
    mov         qword [r12 + job.status], ASMBPE_ENOMEM
    mov         rdi, [rsp + lp_frame.w]
.ret:
    add         rsp, lp_frame_size
    RESTORE
ENDPROC
%undef lp_ts
%undef lp_ids
%undef lp_next
%undef lp_prev
%undef lp_heap
%undef lp_hn
%undef lp_at
%undef lp_atd
%undef lp_r
%undef lp_rw

; heap_push: rax = key; r15 = heap, rbp = size (grows by one).  A min-heap.
; Clobbers rcx, rdx, r11.
%define hp_heap      r15   ; the heap
%define hp_n         ebp   ; its size
%define hp_hole      ecx   ; the hole's position
%define hp_holeq     rcx   ; (hp_hole, 64-bit)
%define hp_key       rax   ; the key placed
heap_push:
    mov         hp_hole, hp_n                   ; hole
    inc         hp_n
.up:
    test        hp_hole, hp_hole
    jz          .place
    lea         edx, [hp_hole - 1]
    shr         edx, 1                          ; parent
    mov         r11, [hp_heap + rdx * 8]
    cmp         r11, hp_key
    jbe         .place
    mov         [hp_heap + hp_holeq * 8], r11
    mov         hp_hole, edx
    jmp         .up
.place:
    mov         [hp_heap + hp_holeq * 8], hp_key
    ret
%undef hp_heap
%undef hp_n
%undef hp_hole
%undef hp_holeq
%undef hp_key

; heap_pop: r15 = heap, rbp = size (> 0, shrinks by one).  rax = the least
; key.  Keeps r8, r9 (pushed); clobbers rcx, rdx, r11.
%define hp_heap      r15   ; the heap
%define hp_n         ebp   ; its size
%define hp_hole      ecx   ; the hole's position
%define hp_holeq     rcx   ; (hp_hole, 64-bit)
%define hp_nq        rbp   ; (hp_n, 64-bit)
%define hp_key       r8    ; the last key, sinking from the top
heap_pop:
    push        r8
    push        r9
    mov         rax, [hp_heap]
    dec         hp_n
    mov         hp_key, [hp_heap + hp_nq * 8]   ; the last key sinks from the top
    xor         hp_hole, hp_hole                ; hole
.down:
    lea         edx, [hp_hole * 2 + 1]          ; left child
    cmp         edx, hp_n
    jae         .place
    mov         r11, [hp_heap + rdx * 8]
    lea         r9d, [edx + 1]
    cmp         r9d, hp_n
    jae         .one_child
    cmp         [hp_heap + r9 * 8], r11
    jae         .one_child
    mov         edx, r9d
    mov         r11, [hp_heap + rdx * 8]
.one_child:
    cmp         hp_key, r11
    jbe         .place
    mov         [hp_heap + hp_holeq * 8], r11
    mov         hp_hole, edx
    jmp         .down
.place:
    mov         [hp_heap + hp_holeq * 8], hp_key
    pop         r9
    pop         r8
    ret
%undef hp_heap
%undef hp_n
%undef hp_hole
%undef hp_holeq
%undef hp_nq
%undef hp_key
