;-----------------------------------------------------------------------------
; encode_long.asm — the long path: chunks of more than SHORT_MAX bytes (long_path),
; with its min-heap (heap_push, heap_pop: used here only).
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

PROC long_path
    SAVE        rbp, r12, r13, r14, r15
    sub         rsp, lp_frame_size
    mov         [rsp + lp_frame.w], rdi
    mov         [rsp + lp_frame.p], rsi
    mov         [rsp + lp_frame.n], rdx
    inc         qword [rbx + tstate.longs]
    cmp         rdx, [rbx + tstate.longcap]
    jbe         .have_room
    mov         rdi, [rbx + tstate.long]        ; grow the arrays
    mov         rsi, [rbx + tstate.longcap]
    shl         rsi, 5
    call        asmbpe_unmap
    mov         qword [rbx + tstate.long], 0
    mov         qword [rbx + tstate.longcap], 0
    mov         rdi, [rsp + lp_frame.n]
    add         rdi, 65535
    and         rdi, ~65535
    mov         r13, rdi
    shl         rdi, 5
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         [rbx + tstate.long], rax
    mov         [rbx + tstate.longcap], r13
.have_room:
    mov         rax, [r12 + job.enc]
    LOAD_TABLE  rax
    mov         r12, [rsp + lp_frame.w]         ; ids (r12 is saved)
    mov         r13, [rbx + tstate.long]        ; next[]
    mov         r14, [rbx + tstate.longcap]
    lea         r14, [r13 + r14 * 4]            ; prev[]
    mov         r15, [rbx + tstate.longcap]
    lea         r15, [r13 + r15 * 8]            ; heap[]
    xor         ebp, ebp                        ; heap size
    mov         rsi, [rsp + lp_frame.p]
    mov         rdx, [rsp + lp_frame.n]
    xor         eax, eax
.init:
    movzx       ecx, byte [rsi + rax]
    mov         [r12 + rax * 2], cx
    lea         ecx, [eax + 1]
    mov         [r13 + rax * 4], ecx
    lea         ecx, [eax - 1]
    mov         [r14 + rax * 4], ecx
    inc         rax
    cmp         rax, rdx
    jb          .init
    xor         edi, edi                        ; the first pairs
.init_pairs:
    lea         eax, [edi + 1]
    cmp         rax, [rsp + lp_frame.n]
    jae         .loop
    movzx       eax, word [r12 + rdi * 2]
    movzx       edx, word [r12 + rdi * 2 + 2]
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
    test        ebp, ebp
    jz          .finish
    call        heap_pop                        ; rax = rank << 32 | i
    mov         edi, eax                        ; i
    shr         rax, 32
    mov         esi, eax                        ; rank
    movzx       eax, word [r12 + rdi * 2]
    cmp         eax, DEAD
    je          .loop
    mov         ecx, [r13 + rdi * 4]            ; j = next[i]
    cmp         rcx, [rsp + lp_frame.n]
    jae         .loop
    movzx       edx, word [r12 + rcx * 2]
    push        rcx
    RANK        eax, rax, eax, edx
    pop         rcx
    cmp         eax, esi
    jne         .loop                           ; stale
    add         esi, 256                        ; merge: id[i] = t
    mov         [r12 + rdi * 2], si
    mov         word [r12 + rcx * 2], DEAD
    mov         edx, [r13 + rcx * 4]            ; k = next[j]
    mov         [r13 + rdi * 4], edx
    cmp         rdx, [rsp + lp_frame.n]
    jae         .no_k
    mov         [r14 + rdx * 4], edi            ; prev[k] = i
    push        rdx                             ; (t, id[k]) at i
    push        rdi
    movzx       eax, word [r12 + rdx * 2]
    RANK        eax, rax, esi, eax
    pop         rdi
    pop         rdx
    cmp         eax, NO_RANK
    je          .no_k
    shl         rax, 32
    or          rax, rdi
    push        rdi
    push        rsi
    call        heap_push
    pop         rsi
    pop         rdi
.no_k:
    mov         edx, [r14 + rdi * 4]            ; h = prev[i]
    cmp         edx, -1
    je          .loop
    movzx       eax, word [r12 + rdx * 2]       ; (id[h], t) at h
    push        rdx
    RANK        eax, rax, eax, esi
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
    movzx       ecx, word [r12 + rax * 2]
    mov         [r12 + rdx * 2], cx
    inc         edx
    mov         eax, [r13 + rax * 4]
    cmp         rax, [rsp + lp_frame.n]
    jb          .gather
    lea         rdi, [r12 + rdx * 2]
    jmp         .ret
.enomem:
    mov         r12, [rsp + lp_frame_size + 8 * 3] ; the saved job (r12)
    mov         qword [r12 + job.status], ASMBPE_ENOMEM
    mov         rdi, [rsp + lp_frame.w]
.ret:
    add         rsp, lp_frame_size
    RESTORE
ENDPROC

; heap_push: rax = key; r15 = heap, rbp = size (grows by one).  A min-heap.
; Clobbers rcx, rdx, r11.
heap_push:
    mov         ecx, ebp                        ; hole
    inc         ebp
.up:
    test        ecx, ecx
    jz          .place
    lea         edx, [ecx - 1]
    shr         edx, 1                          ; parent
    mov         r11, [r15 + rdx * 8]
    cmp         r11, rax
    jbe         .place
    mov         [r15 + rcx * 8], r11
    mov         ecx, edx
    jmp         .up
.place:
    mov         [r15 + rcx * 8], rax
    ret

; heap_pop: r15 = heap, rbp = size (> 0, shrinks by one).  rax = the least
; key.  Clobbers rcx, rdx, r8?  No: rcx, rdx, r11 and the stack slot below.
heap_pop:
    push        r8
    push        r9
    mov         rax, [r15]
    dec         ebp
    mov         r8, [r15 + rbp * 8]             ; the last key sinks from the top
    xor         ecx, ecx                        ; hole
.down:
    lea         edx, [ecx * 2 + 1]              ; left child
    cmp         edx, ebp
    jae         .place
    mov         r11, [r15 + rdx * 8]
    lea         r9d, [edx + 1]
    cmp         r9d, ebp
    jae         .one_child
    cmp         [r15 + r9 * 8], r11
    jae         .one_child
    mov         edx, r9d
    mov         r11, [r15 + rdx * 8]
.one_child:
    cmp         r8, r11
    jbe         .place
    mov         [r15 + rcx * 8], r11
    mov         ecx, edx
    jmp         .down
.place:
    mov         [r15 + rcx * 8], r8
    pop         r9
    pop         r8
    ret
