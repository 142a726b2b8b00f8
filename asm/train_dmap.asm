;-----------------------------------------------------------------------------
; train_dmap.asm — BPE training: the per-thread delta maps (struc dmap header
; page, struc pslot slots and a list of the slots in use).  scan_segment
; (train_scan.asm) adds a thread's exact pair-count changes to its own map
; (dm_add) without locks; coordinate (train_merge.asm) applies every map to
; the pair table and empties it (dm_clear); asmbpe_train maps and frees them.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "train.inc"

extern pt_fill_empty

section .text

;=============================================================================
; delta maps (one per thread): slots {u32 key, u32 pad, i64 delta}, and the
; list of slot indices in use so clearing costs only what was used.
;=============================================================================

; dm_alloc: -> rax = map or 0.
PROC dm_alloc
    SAVE        rbx
    mov         edi, 4096
    call        asmbpe_map
    test        rax, rax
    jz          .ret
    mov         rbx, rax
    mov         edi, DM_INIT * pslot_size
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [rbx + dmap.slots], rax
    mov         qword [rbx + dmap.mask], DM_INIT - 1
    mov         rdi, rax
    mov         esi, DM_INIT
    call        pt_fill_empty
    mov         edi, DM_INIT * 4
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [rbx + dmap.list], rax
    mov         rax, rbx
.ret:
    RESTORE
.fail:
    mov         rdi, rbx
    call        dm_free
    xor         eax, eax
    RESTORE
ENDPROC

; dm_free: rdi = map (or 0)
PROC dm_free
    test        rdi, rdi
    jz          .ret
    push        rbx
    mov         rbx, rdi
    mov         rsi, [rbx + dmap.mask]
    inc         rsi
    push        rsi
    shl         rsi, 4
    mov         rdi, [rbx + dmap.slots]
    call        asmbpe_unmap
    pop         rsi
    shl         rsi, 2
    mov         rdi, [rbx + dmap.list]
    call        asmbpe_unmap
    mov         rdi, rbx
    mov         esi, 4096
    call        asmbpe_unmap
    pop         rbx
.ret:
    ret
ENDPROC

; dm_add: rbx = map, esi = P, rdx = delta.  Clobbers rax, rcx, r8, r9.
PROC dm_add
    mov         eax, esi
    mov         rcx, PAIR_HASH_K
    imul        rax, rcx
    shr         rax, 32
    mov         r8, [rbx + dmap.slots]
.probe:
    and         rax, [rbx + dmap.mask]
    mov         rcx, rax
    shl         rcx, 4
    cmp         [r8 + rcx + pslot.key], esi
    je          .add
    cmp         dword [r8 + rcx + pslot.key], EMPTY_KEY
    je          .new
    inc         rax
    jmp         .probe
.add:
    add         [r8 + rcx + pslot.val], rdx
    ret
.new:
    mov         r9, [rbx + dmap.used]
    cmp         r9, [rbx + dmap.mask]
    jae         .ret                            ; full after a failed grow: the
                                                ; run fails with dmap.status set
    mov         [r8 + rcx + pslot.key], esi
    mov         [r8 + rcx + pslot.val], rdx
    mov         rcx, [rbx + dmap.list]
    mov         [rcx + r9 * 4], eax
    inc         r9
    mov         [rbx + dmap.used], r9
    add         r9, r9
    cmp         r9, [rbx + dmap.mask]
    jbe         .ret
    jmp         dm_grow                         ; tail call
.ret:
    ret
ENDPROC

; dm_grow: rbx = map.  Doubles slots and list.  Keeps rsi, rdx, rdi, r10-r15.
static dm_grow:function
dm_grow:
    SAVE        rsi, rdx, rdi, r10, r11, r12, r13, r14
    mov         r12, [rbx + dmap.mask]
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
    mov         r10, [rbx + dmap.slots]
    lea         r11, [r12 * 2 - 1]              ; new mask
    xor         r9d, r9d                        ; i over the old list
.each:
    cmp         r9, [rbx + dmap.used]
    jae         .swap
    mov         rcx, [rbx + dmap.list]
    mov         ecx, [rcx + r9 * 4]
    shl         rcx, 4
    mov         esi, [r10 + rcx + pslot.key]
    mov         rdx, [r10 + rcx + pslot.val]
    mov         eax, esi
    mov         rdi, PAIR_HASH_K
    imul        rax, rdi
    shr         rax, 32
.probe:
    and         rax, r11
    mov         rdi, rax
    shl         rdi, 4
    cmp         dword [r13 + rdi + pslot.key], EMPTY_KEY
    je          .put
    inc         rax
    jmp         .probe
.put:
    mov         [r13 + rdi + pslot.key], esi
    mov         [r13 + rdi + pslot.val], rdx
    mov         [r14 + r9 * 4], eax
    inc         r9
    jmp         .each
.swap:                                          ; header first: syscalls clobber r11
    mov         rdi, [rbx + dmap.slots]
    mov         r10, [rbx + dmap.list]
    mov         [rbx + dmap.slots], r13
    mov         [rbx + dmap.list], r14
    mov         [rbx + dmap.mask], r11
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
    mov         qword [rbx + dmap.status], ASMBPE_ENOMEM
.ret:
    RESTORE

; dm_clear: rbx = map.  Frees the used slots.  Clobbers rax, rcx, rdx, r8.
PROC dm_clear
    mov         r8, [rbx + dmap.slots]
    mov         rdx, [rbx + dmap.list]
    mov         rcx, [rbx + dmap.used]
.each:
    test        rcx, rcx
    jz          .done
    dec         rcx
    mov         eax, [rdx + rcx * 4]
    shl         rax, 4
    mov         dword [r8 + rax + pslot.key], EMPTY_KEY
    jmp         .each
.done:
    mov         qword [rbx + dmap.used], 0
    ret
ENDPROC
