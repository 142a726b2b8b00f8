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

; dm_add: rbx = map, rsi = P, rdx = delta.  Clobbers rax, rcx, r8, r9.
PROC dm_add
    mov         rax, rsi
    PAIR_HASH   rax, eax, rcx
    mov         r8, [rbx + dmap.slots]
.probe:
    and         rax, [rbx + dmap.mask]
    mov         rcx, rax
    shl         rcx, 4
    cmp         [r8 + rcx + pslot.key], rsi
    je          .add
    cmp         qword [r8 + rcx + pslot.key], EMPTY_KEY
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
    mov         [r8 + rcx + pslot.key], rsi
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
%define dg_map   rbx   ; the delta map
%define dg_nold  r12   ; old slot count
%define dg_slots r13   ; new slots
%define dg_list  r14   ; new list
%define dg_mask  r11   ; new mask
%define dg_i     r9    ; index in the old list
%define dg_i_d   r9d   ; (32-bit view)
static dm_grow:function
dm_grow:
    SAVE        rsi, rdx, rdi, r10, r11, r12, r13, r14
    mov         dg_nold, [dg_map + dmap.mask]
    inc         dg_nold                         ; old nslots
    lea         rdi, [dg_nold * 2]
    shl         rdi, 4
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         dg_slots, rax                   ; new slots
    mov         rdi, rax
    lea         rsi, [dg_nold * 2]
    call        pt_fill_empty
    lea         rdi, [dg_nold * 8]              ; new list: 2 x nslots x 4
    call        asmbpe_map
    test        rax, rax
    jz          .fail_slots
    mov         dg_list, rax                    ; new list
    mov         r10, [dg_map + dmap.slots]
    lea         dg_mask, [dg_nold * 2 - 1]      ; new mask
    xor         dg_i_d, dg_i_d                  ; i over the old list
.each:
    cmp         dg_i, [dg_map + dmap.used]
    jae         .swap
    mov         rcx, [dg_map + dmap.list]
    mov         ecx, [rcx + dg_i * 4]
    shl         rcx, 4
    mov         rsi, [r10 + rcx + pslot.key]
    mov         rdx, [r10 + rcx + pslot.val]
    mov         rax, rsi
    PAIR_HASH   rax, eax, rdi
.probe:
    and         rax, dg_mask
    mov         rdi, rax
    shl         rdi, 4
    cmp         qword [dg_slots + rdi + pslot.key], EMPTY_KEY
    je          .put
    inc         rax
    jmp         .probe
.put:
    mov         [dg_slots + rdi + pslot.key], rsi
    mov         [dg_slots + rdi + pslot.val], rdx
    mov         [dg_list + dg_i * 4], eax
    inc         dg_i
    jmp         .each
.swap:                                          ; header first: syscalls clobber r11
    mov         rdi, [dg_map + dmap.slots]
    mov         r10, [dg_map + dmap.list]
    mov         [dg_map + dmap.slots], dg_slots
    mov         [dg_map + dmap.list], dg_list
    mov         [dg_map + dmap.mask], dg_mask
    mov         rsi, dg_nold
    shl         rsi, 4
    call        asmbpe_unmap
    mov         rdi, r10
    lea         rsi, [dg_nold * 4]
    call        asmbpe_unmap
    jmp         .ret
.fail_slots:
    mov         rdi, dg_slots
    lea         rsi, [dg_nold * 2]
    shl         rsi, 4
    call        asmbpe_unmap
.fail:
    mov         qword [dg_map + dmap.status], ASMBPE_ENOMEM
.ret:
    RESTORE
%undef  dg_map
%undef  dg_nold
%undef  dg_slots
%undef  dg_list
%undef  dg_mask
%undef  dg_i
%undef  dg_i_d

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
    mov         qword [r8 + rax + pslot.key], EMPTY_KEY
    jmp         .each
.done:
    mov         qword [rbx + dmap.used], 0
    ret
ENDPROC
