;-----------------------------------------------------------------------------
; train_layout.asm — BPE training: W laid out from the word table on every
; thread (layout_words).  asmbpe_train (train.asm) counts the words and
; tokens of each block of LAYOUT_BLOCK slots first (tctx.lblk: where each
; block's words start in W, WS and WC), so the blocks are independent: the
; threads claim them one at a time, and each keys its block's words by
; script (LAYOUT_KEY, train.inc) and copies them into their runs of W.
; The chunk filters are then built on every thread too (bloom_par,
; train_compact.asm).
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "wordtab.inc"
%include "train.inc"

section .text

;=============================================================================
; layout_words(ctx, tab): rdi = ctx (tctx.w, .ws, .wc mapped, W[0] = SEP,
; tctx.lblk and .nblk set), rsi = the word table.  Fills W[1, wlen), WS and
; WC on min(tctx.nth, tctx.nblk) threads (on this one alone when they cannot
; be started).  eax = 0, or ASMBPE_ENOMEM (no thread could map its scratch).
; Keeps the System V registers.
;=============================================================================
; the context the layout threads share (on layout_words' stack)
struc lctx
    .ctx:       resq 1          ; the training context
    .tab:       resq 1          ; the word table
    .next:      resq 1          ; the next block to claim
                resq 1          ; (pad: aligned calls)
endstruc

PROC layout_words
    SAVE        rbx, r12, r13
    sub         rsp, lctx_size                  ; (3 pushes + 32: aligned)
    mov         [rsp + lctx.ctx], rdi
    mov         [rsp + lctx.tab], rsi
    mov         qword [rsp + lctx.next], 0
    mov         rdx, [rdi + tctx.nth]
    cmp         rdx, [rdi + tctx.nblk]
    cmova       rdx, [rdi + tctx.nblk]
    lea         rdi, [lay_worker]
    mov         rsi, rsp
    call        asmbpe_parallel
    test        eax, eax
    jz          .laid
    mov         rdi, rsp                        ; no threads: this one alone
    xor         esi, esi
    call        lay_worker
.laid:
    xor         eax, eax                        ; every block claimed (a thread
    mov         rcx, [rsp + lctx.ctx]           ; without its scratch leaves
    mov         rdx, [rsp + lctx.next]          ; its blocks to the others)
    cmp         rdx, [rcx + tctx.nblk]
    jae         .ret
    mov         eax, ASMBPE_ENOMEM
.ret:
    add         rsp, lctx_size
    RESTORE
ENDPROC

; lay_worker(lctx, tid): maps its scratch, claims blocks and lays each out
; (lay_block) until none is left; without its scratch, claims none.
static lay_worker:function
lay_worker:
    SAVE        rbx, r12, r13
    mov         rbx, rdi
    mov         edi, LAYOUT_SCRATCH
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         r12, rax                        ; the scratch (zero)
.claim:
    mov         eax, 1
    lock xadd   [rbx + lctx.next], rax
    mov         rdi, [rbx + lctx.ctx]
    cmp         rax, [rdi + tctx.nblk]
    jae         .claimed
    mov         rsi, [rbx + lctx.tab]
    mov         rdx, r12
    mov         rcx, rax
    call        lay_block
    jmp         .claim
.claimed:
    mov         rdi, r12
    mov         esi, LAYOUT_SCRATCH
    call        asmbpe_unmap
.enomem:                                        ; (no scratch: no block)
    RESTORE

;-----------------------------------------------------------------------------
; lay_block: rdi = ctx, rsi = tab, rdx = scratch (LAYOUT_SCRATCH bytes, its
; key counts zero), rcx = block b.  Pass 1 keys each word of the block's
; slots (the script of its first non-ASCII character, else its first byte)
; and counts the positions and words of each key; then each key gets its
; run of W from the block's first position and word (tctx.lblk[b]), in key
; order; pass 2 copies the words into their runs and writes WS and WC.  The
; key counts are left zero again.  Clobbers rax, rcx, rdx, rsi, rdi,
; r8-r11, ymm0.
;-----------------------------------------------------------------------------
%define lb_ctx   rbx   ; the context
%define lb_tab   r12   ; the word table
%define lb_scr   r13   ; the scratch
%define lb_w     r14   ; W
%define lb_first r15   ; the block's first slot
static lay_block:function
lay_block:
    SAVE        rbx, r12, r13, r14, r15
    mov         lb_ctx, rdi
    mov         lb_tab, rsi
    mov         lb_scr, rdx
    mov         lb_w, [lb_ctx + tctx.w]
    mov         rax, [lb_ctx + tctx.lblk]       ; the block's first position
    mov         rdx, rcx                        ; and word
    shl         rdx, 4
    mov         r8, [rax + rdx]
    mov         [lb_scr], r8
    mov         r8, [rax + rdx + 8]
    mov         [lb_scr + 8], r8
    mov         r8, rcx
    shl         r8, 5 + 14                      ; x LAYOUT_BLOCK x slot_size
%if LAYOUT_BLOCK != 1 << 14 || slot_size != 32
%error "lay_block: the shift above"
%endif
    add         r8, [lb_tab + wtab.slots]
    mov         lb_first, r8
    mov         r9, [lb_tab + wtab.mask]
    inc         r9
    shl         r9, 5
    add         r9, [lb_tab + wtab.slots]       ; the slots' end
    lea         rax, [r8 + LAYOUT_BLOCK * slot_size]
    cmp         rax, r9
    cmovb       r9, rax                         ; the block's end
    lea         rdi, [lb_scr + LAYOUT_KEYBUF]   ; the key of each slot
.key_slot:
    cmp         r8, r9
    jae         .keyed
    lea         rax, [r8 + FILL_AHEAD * slot_size]  ; the word FILL_AHEAD slots
    cmp         rax, r9                         ; on: its bytes (in the arena,
    jae         .key_prefetched                 ; in insertion order, not the
    mov         rax, [rax + slot.key]           ; slots' hash order) prefetched
    add         rax, [lb_tab + wtab.base]       ; (an empty slot's key: any
    prefetcht0  [rax]                           ; address, no fault)
.key_prefetched:
    cmp         qword [r8 + slot.count], 0
    je          .key_next
    mov         edx, [r8 + slot.len]
    cmp         edx, 2
    jb          .key_next
    mov         rsi, [r8 + slot.key]
    add         rsi, [lb_tab + wtab.base]
    ; the word's key: its first byte of 0x80+ within its first 32 bytes
    ; (the arena keeps KEY_SLACK readable bytes after a key), lead, and the
    ; byte after it, next (0 past the word): 128 + (lead & 0x7F) << 6 |
    ; (next & 0x3F), the script of the word's first non-ASCII character; a
    ; word without one (of those 32 bytes): its first byte
    vmovdqu     ymm0, [rsi]
    vpmovmskb   ecx, ymm0
    mov         r11d, 32
    cmp         edx, r11d
    cmovb       r11d, edx
    bzhi        ecx, ecx, r11d
    movzx       eax, byte [rsi]
    tzcnt       ecx, ecx
    jc          .key_put                        ; (no such byte)
    movzx       eax, byte [rsi + rcx]           ; lead
    and         eax, 0x7F
    shl         eax, 6
    inc         ecx
    cmp         ecx, edx
    jae         .key_lead
    movzx       r11d, byte [rsi + rcx]          ; next
    and         r11d, 0x3F
    or          eax, r11d
.key_lead:
    add         eax, 128
.key_put:
    mov         [rdi], ax
    shl         eax, 4
    inc         edx                             ; the word and its SEP
    add         [lb_scr + LAYOUT_HIST + rax], rdx
    inc         qword [lb_scr + LAYOUT_HIST + rax + 8]
.key_next:
    add         r8, slot_size
    add         rdi, 2
    jmp         .key_slot
.keyed:
    ; each key's run: its first position and first word, in key order
    mov         rcx, [lb_scr]                   ; the next position
    mov         r11, [lb_scr + 8]               ; the next word
    lea         rax, [lb_scr + LAYOUT_HIST]
    lea         rdx, [lb_scr + LAYOUT_KEYBUF]
.run:
    mov         rsi, [rax]
    mov         [rax], rcx
    add         rcx, rsi
    mov         rsi, [rax + 8]
    mov         [rax + 8], r11
    add         r11, rsi
    add         rax, 16
    cmp         rax, rdx
    jb          .run
    mov         r8, lb_first
    lea         rdi, [lb_scr + LAYOUT_KEYBUF]
    mov         r10, [lb_ctx + tctx.wc]
.fill_slot:
    cmp         r8, r9
    jae         .filled_block
    mov         rax, [r8 + slot.count]
    test        rax, rax
    jz          .fill_next
    mov         edx, [r8 + slot.len]
    cmp         edx, 2
    jb          .fill_next
    movzx       r11d, word [rdi]
    shl         r11d, 4
    add         r11, lb_scr                     ; its key's run (+ LAYOUT_HIST)
    mov         rcx, [r11 + LAYOUT_HIST]        ; the word's position
    mov         rsi, [r11 + LAYOUT_HIST + 8]    ; and index k
    inc         qword [r11 + LAYOUT_HIST + 8]
    mov         [r10 + rsi * 8], rax            ; WC[k]
    mov         rax, [lb_ctx + tctx.ws]
    mov         [rax + rsi * 8], rcx            ; WS[k]
    lea         rax, [rdx + 1]
    add         [r11 + LAYOUT_HIST], rax        ; the run's next position
    mov         rsi, [r8 + slot.key]
    add         rsi, [lb_tab + wtab.base]
%ifndef TOK32
    cmp         edx, 8
    jb          .fill_byte
.fill_8:                                        ; 8 bytes -> 8 tokens a round,
    cmp         edx, 8                          ; then the last 8 (they may
    jbe         .fill_last8                     ; overlap): nothing is written
    vpmovzxbw   xmm0, [rsi]                     ; past the word, whose next
    vmovdqu     [lb_w + rcx * TW], xmm0         ; position in W may hold a word
    add         rsi, 8                          ; of another key already (or
    add         rcx, 8                          ; of another thread's block)
    sub         edx, 8
    jmp         .fill_8
.fill_last8:
    vpmovzxbw   xmm0, [rsi + rdx - 8]
    lea         rcx, [rcx + rdx]
    vmovdqu     [lb_w + rcx * TW - 8 * TW], xmm0
    jmp         .fill_sep
%endif
.fill_byte:
    movzx       eax, byte [rsi]
    STT         [lb_w + rcx * TW], eax
    inc         rsi
    inc         rcx
    dec         edx
    jnz         .fill_byte
.fill_sep:
    mov         TWORD [lb_w + rcx * TW], SEP
.fill_next:
    add         r8, slot_size
    add         rdi, 2
    jmp         .fill_slot
.filled_block:
    lea         rdi, [lb_scr + LAYOUT_HIST]     ; the counts of the next block
    lea         rdx, [lb_scr + LAYOUT_KEYBUF]
    vpxor       xmm0, xmm0, xmm0
.clear_runs:
    vmovdqu     [rdi], ymm0
    add         rdi, 32
    cmp         rdi, rdx
    jb          .clear_runs
    vzeroupper
    RESTORE
%undef  lb_ctx
%undef  lb_tab
%undef  lb_scr
%undef  lb_w
%undef  lb_first
