;-----------------------------------------------------------------------------
; wordtab.asm — the word tables of training (SPEC §4.1): open-addressing
; hash tables of words and their counts (layout and the chunk hash:
; wordtab.inc).  The per-thread tables of count.asm key words by pointers
; into the text being counted; the persistent table (asmbpe_wordtab) owns
; copies of the word bytes in an arena, so text can be counted in batches.
; Here: the tables (asmbpe_tab_alloc / free / insert and
; asmbpe_wordtab_release, hidden, for count.asm and train.asm), the
; asmbpe_wordtab_* API, and export / add, which take a table apart into
; arrays and build one back from them.  asmbpe_count_words,
; which fills the per-thread tables and merges them into the persistent one,
; is in count.asm.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%define WORDTAB_HERE
%include "wordtab.inc"

extern asmbpe_memeq

section .text

;-----------------------------------------------------------------------------
; void *asmbpe_tab_alloc(uint64_t nslots, int owns_keys)
; A table of nslots (a power of two) empty slots; with owns_keys, an arena
; for key bytes whose first PAD bytes stay unused (memeq's front reads).
; NULL when out of memory.
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_tab_alloc, 2, 12, 0, nslots, owns
    mov         rbx, nslotsq
    mov         ebp, ownsd
    mov         edi, 4096
    call        asmbpe_map                      ; header page
    test        rax, rax
    jz          .fail
    mov         r14, rax
    mov         rdi, rbx
    shl         rdi, 5
    call        asmbpe_map
    test        rax, rax
    jz          .fail_header
    mov         [r14 + wtab.slots], rax
    lea         rax, [rbx - 1]
    mov         [r14 + wtab.mask], rax
    mov         [r14 + wtab.owns_keys], rbp
    test        ebp, ebp
    jz          .done
    mov         edi, ARENA_INIT
    call        asmbpe_map
    test        rax, rax
    jz          .fail_slots
    mov         [r14 + wtab.base], rax
    mov         qword [r14 + wtab.arena_cap], ARENA_INIT
    mov         qword [r14 + wtab.arena_use], PAD
.done:
    mov         rax, r14
    RET
.fail_slots:
    mov         rdi, [r14 + wtab.slots]
    mov         rsi, rbx
    shl         rsi, 5
    call        asmbpe_unmap
.fail_header:
    mov         rdi, r14
    mov         esi, 4096
    call        asmbpe_unmap
.fail:
    xor         eax, eax
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; void asmbpe_tab_free(void *tab)      (NULL is fine)
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_tab_free, 1, 10, 0, tab
    mov         rbx, tabq
    test        rbx, rbx
    jz          .ret
    mov         rdi, rbx
    call        asmbpe_wordtab_release          ; slots and arena
    mov         rdi, rbx
    mov         esi, 4096
    call        asmbpe_unmap
.ret:
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; void asmbpe_wordtab_release(asmbpe_wordtab *t)   (any table: tab_free, and
; train.asm with ASMBPE_RELEASE_WORDS)
; Gives back the slots and the key arena: t keeps its header and reads as
; empty (size 0, no slots); only asmbpe_wordtab_free may follow.
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_wordtab_release, 1, 10, 0, t
    mov         rbx, tq
    cmp         qword [rbx + wtab.owns_keys], 0
    je          .slots
    mov         rdi, [rbx + wtab.base]
    mov         rsi, [rbx + wtab.arena_cap]
    call        asmbpe_unmap
    xor         eax, eax
    mov         [rbx + wtab.base], rax
    mov         [rbx + wtab.arena_cap], rax
    mov         [rbx + wtab.arena_use], rax
.slots:
    mov         rdi, [rbx + wtab.slots]
    mov         rsi, [rbx + wtab.mask]
    inc         rsi
    shl         rsi, 5
    call        asmbpe_unmap
    xor         eax, eax
    mov         [rbx + wtab.slots], rax
    mov         [rbx + wtab.used], rax
    mov         qword [rbx + wtab.mask], -1        ; (mask + 1) * slot_size = 0 bytes
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; int asmbpe_tab_insert(void *tab, const uint8_t *key, uint64_t len,
;                       uint64_t hash, uint64_t count)
; Adds count to the key's slot, creating it (copying the bytes into the arena
; when the table owns its keys).  A new key that would fill the table past
; its load (half for a thread's table, 3/4 for the persistent one, which owns
; its keys) grows it first.  0, or ASMBPE_ENOMEM: the key is then not added
; and the table is as it was, still within its load, so later inserts (which
; may keep coming, as the table merge's do after a failure) always find a
; free slot and end.
; key must have SPEC §2 padding (memeq may read 7 bytes before it, the copy
; of a new key of up to 32 bytes 32 bytes from its start).
;-----------------------------------------------------------------------------
%define ti_tab      rbx         ; the table
%define ti_key      r12         ; the key's bytes
%define ti_len      r13         ; its length
%define ti_hash     r14         ; its hash
%define ti_count    r15         ; the count to add
%define ti_i        rbp         ; the slot probed (index)
HIDDEN
FUNC asmbpe_tab_insert, 5, 15, 0, tab, key, len, hash, count
    sub         rsp, 8                          ; 6 pushes + 8: aligned calls
    mov         ti_tab, tabq
    mov         ti_key, keyq
    mov         ti_len, lenq
    mov         ti_hash, hashq
    mov         ti_count, countq
    mov         ti_i, ti_hash
    and         ti_i, [ti_tab + wtab.mask]         ; slot index
.probe:
    mov         rax, ti_i
    shl         rax, 5
    add         rax, [ti_tab + wtab.slots]
    cmp         qword [rax + slot.count], 0
    je          .new
    cmp         [rax + slot.hash], ti_hash
    jne         .next
    cmp         [rax + slot.len], ti_len
    jne         .next
    mov         rcx, rax
    cmp         ti_len, KEY_IN_HASH             ; (the same bytes: HASH_BYTES)
    jbe         .found
    mov         rsi, [rax + slot.key]
    add         rsi, [ti_tab + wtab.base]
    cmp         ti_len, 32
    ja          .memeq
    KEY_EQ32    ti_key, rsi, r13d, edi, r8d     ; up to 32 bytes: no call
    jz          .found
    jmp         .next
.memeq:
    mov         [rsp], rax
    mov         rdi, ti_key
    mov         rdx, ti_len
    call        asmbpe_memeq
    mov         rcx, [rsp]
    test        eax, eax
    jnz         .found
.next:
    inc         ti_i
    and         ti_i, [ti_tab + wtab.mask]
    jmp         .probe
.found:
    add         [rcx + slot.count], ti_count
    add         [ti_tab + wtab.total], ti_count
    xor         eax, eax
    jmp         .ret

.new:
    mov         rax, [ti_tab + wtab.used]       ; room for one more: a thread's
    mov         rcx, [ti_tab + wtab.mask]       ; table at most half full, the
    cmp         qword [ti_tab + wtab.owns_keys], 0  ; persistent one 3/4 (T53)
    jne         .load_3_4
    lea         rax, [rax * 2 + 2]
    cmp         rax, rcx
    jbe         .room
    jmp         .grow
.load_3_4:
    lea         rax, [rax * 4 + 4]              ; 4 (used + 1) <= 3 slots
    lea         rcx, [rcx * 2 + rcx + 3]
    cmp         rax, rcx
    jbe         .room
.grow:
    mov         rdi, ti_tab                     ; no: grow first, then probe again
    call        asmbpe_tab_grow                 ; (the slots moved)
    test        eax, eax
    jnz         .ret                            ; ENOMEM: nothing added
    mov         ti_i, ti_hash
    and         ti_i, [ti_tab + wtab.mask]
    jmp         .probe
.room:
    mov         rcx, ti_key                     ; key: the pointer itself
    cmp         qword [ti_tab + wtab.owns_keys], 0
    je          .store
    mov         rdi, ti_tab                     ; copy into the arena
    lea         rsi, [ti_len + KEY_SLACK]
    call        asmbpe_arena_reserve
    test        eax, eax
    jnz         .ret
.copy:
    mov         rdi, [ti_tab + wtab.base]
    add         rdi, [ti_tab + wtab.arena_use]
    mov         rsi, ti_key
    cmp         ti_len, 32
    ja          .copy_long
    vmovdqu     xmm0, [rsi]                     ; up to 32 bytes: 32 copied
    vmovdqu     xmm1, [rsi + 16]                ; (KEY_SLACK)
    vmovdqu     [rdi], xmm0
    vmovdqu     [rdi + 16], xmm1
    jmp         .copied
.copy_long:
    mov         rcx, ti_len
    rep movsb
.copied:
    mov         rcx, [ti_tab + wtab.arena_use]     ; key: the arena offset
    add         [ti_tab + wtab.arena_use], ti_len
.store:
    mov         rax, ti_i
    shl         rax, 5
    add         rax, [ti_tab + wtab.slots]
    SLOT_NEW    ti_tab, rax, ti_hash, rcx, ti_len, ti_count
    add         [ti_tab + wtab.total], ti_count
    xor         eax, eax
.ret:
    add         rsp, 8
    RET
ENDFUNC
%undef  ti_tab
%undef  ti_key
%undef  ti_len
%undef  ti_hash
%undef  ti_count
%undef  ti_i

;-----------------------------------------------------------------------------
; int asmbpe_arena_reserve(void *tab, uint64_t n)   (rdi, rsi; hidden)
; Makes room for n more key bytes in the arena of a table that owns its
; keys: grows it (asmbpe_remap, so base may move; keys are offsets) to
; max(2 x its size, what is needed + 1 MB) when they do not fit.  eax = 0, or
; ASMBPE_ENOMEM (the arena is as it was).  Clobbers rax, rcx, rdx, rsi, rdi,
; r8-r11.
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_arena_reserve, 2, 12, 0, tab, n
    mov         rbx, tabq
    mov         rax, [rbx + wtab.arena_use]
    add         rax, nq
    cmp         rax, [rbx + wtab.arena_cap]
    jbe         .fits
    mov         rbp, [rbx + wtab.arena_cap]        ; grow: max(2 cap, need + 1 MB)
    add         rbp, rbp
    add         rax, ARENA_INIT
    and         rax, -4096
    cmp         rbp, rax
    cmovb       rbp, rax
    mov         rdi, [rbx + wtab.base]
    mov         rsi, [rbx + wtab.arena_cap]
    mov         rdx, rbp
    call        asmbpe_remap
    test        rax, rax
    jz          .enomem
    mov         [rbx + wtab.base], rax
    mov         [rbx + wtab.arena_cap], rbp
.fits:
    xor         eax, eax
    RET
.enomem:
    mov         eax, ASMBPE_ENOMEM
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; int asmbpe_tab_grow(void *tab)   (rdi; hidden)
; Doubles the slots in place, rehashing by the stored hashes (T60): the
; mapping grows by asmbpe_remap (its pages move, nothing is copied; the new
; half is zero, i.e. empty), so only the new half is added to the memory in
; use.  eax = 0 or ASMBPE_ENOMEM (then the table is as it was).  Nobody else
; may use the table meanwhile (a parallel merge grows it before and after).
;
; The rehash is pt_grow's (train_pairs.asm): every word is marked unplaced
; (SLOT_UNPLACED in slot.state, 0 otherwise here), then for each unplaced
; slot i in turn its word probes from its new home for the first slot that
; is empty, unplaced, or i itself: i, it stays; empty, it moves there and i
; is emptied; unplaced, the two swap and the word that came to i probes
; next.  A placed word never probed past an unplaced slot, so emptying one
; breaks no chain.
;-----------------------------------------------------------------------------
%define SLOT_UNPLACED   (1 << 31)
section .rodata
align 32
unplaced_clear:                                 ; a slot AND this: its mark gone
    dd          -1, -1, -1, -1, -1, ~SLOT_UNPLACED, -1, -1
%if slot.state != 20 || slot_size != 32
    %error "unplaced_clear assumes slot.state at byte 20 of 32"
%endif
section .text
HIDDEN
FUNC asmbpe_tab_grow, 1, 12, 0, tab
    mov         rdi, tabq
    call        tab_grow
    RET
ENDFUNC

%define tg_tab  rbx   ; the table
%define tg_s    r12   ; its slots
%define tg_n    r13   ; old slot count
%define tg_i    r14   ; the slot being placed
%define tg_mask r15   ; the new mask
tab_grow:
    SAVE        rbx, r12, r13, r14, r15
    mov         tg_tab, rdi
    mov         tg_n, [tg_tab + wtab.mask]
    inc         tg_n
    mov         rdi, [tg_tab + wtab.slots]
    mov         rsi, tg_n
    shl         rsi, 5
    lea         rdx, [rsi + rsi]
    call        asmbpe_remap
    test        rax, rax
    jz          .enomem
    mov         tg_s, rax
    mov         [tg_tab + wtab.slots], rax
    lea         tg_mask, [tg_n * 2 - 1]
    mov         [tg_tab + wtab.mask], tg_mask
    xor         eax, eax
.mark:                                          ; every word: unplaced
    cmp         qword [tg_s + rax + slot.count], 0
    je          .mark_next
    or          dword [tg_s + rax + slot.state], SLOT_UNPLACED
.mark_next:
    add         rax, slot_size
    mov         rcx, tg_n
    shl         rcx, 5
    cmp         rax, rcx
    jb          .mark
    xor         tg_i, tg_i
.each:
    cmp         tg_i, tg_n
    jae         .done
    mov         rax, tg_i
    shl         rax, 5
    test        dword [tg_s + rax + slot.state], SLOT_UNPLACED
    jz          .next                           ; empty, or placed already
    and         dword [tg_s + rax + slot.state], ~SLOT_UNPLACED
    vmovdqu     ymm0, [tg_s + rax]              ; the word carried
.place:
    vmovq       rdx, xmm0                       ; slot.hash
.probe:
    and         rdx, tg_mask
    cmp         rdx, tg_i
    je          .stays
    mov         rax, rdx
    shl         rax, 5
    cmp         qword [tg_s + rax + slot.count], 0
    je          .moves
    test        dword [tg_s + rax + slot.state], SLOT_UNPLACED
    jnz         .swaps
    inc         rdx
    jmp         .probe
.stays:                                         ; slot i is the first free one
    mov         rax, tg_i                       ; of its probe
    shl         rax, 5
    vmovdqu     [tg_s + rax], ymm0
    jmp         .next
.moves:
    vmovdqu     [tg_s + rax], ymm0
    mov         rax, tg_i
    shl         rax, 5
    vpxor       xmm1, xmm1, xmm1
    vmovdqu     [tg_s + rax], ymm1
    jmp         .next
.swaps:                                         ; place it, carry the other
    vmovdqu     ymm1, [tg_s + rax]              ; (its mark cleared)
    vmovdqu     [tg_s + rax], ymm0
    vpand       ymm0, ymm1, [rel unplaced_clear]
    jmp         .place
.next:
    inc         tg_i
    jmp         .each
.done:
    vzeroupper
    xor         eax, eax
    jmp         .ret
.enomem:
    mov         eax, ASMBPE_ENOMEM
.ret:
    RESTORE
%undef  tg_tab
%undef  tg_s
%undef  tg_n
%undef  tg_i
%undef  tg_mask

;-----------------------------------------------------------------------------
; asmbpe_wordtab *asmbpe_wordtab_new(void)         NULL when out of memory
; void asmbpe_wordtab_free(asmbpe_wordtab *t)
; int64_t asmbpe_wordtab_size(const asmbpe_wordtab *t)       unique words
; int64_t asmbpe_wordtab_key_bytes(const asmbpe_wordtab *t)  their bytes
; uint64_t asmbpe_wordtab_total(const asmbpe_wordtab *t)     chunks counted
;-----------------------------------------------------------------------------
FUNC asmbpe_wordtab_new, 0, 1, 0
    mov         edi, T_INIT_SLOTS
    mov         esi, 1
    jmp         asmbpe_tab_alloc
ENDFUNC

FUNC asmbpe_wordtab_free, 1, 11, 0, t
    mov         rbx, tq                         ; the kept thread tables first
    test        rbx, rbx
    jz          .ret
    xor         ebp, ebp
.thread_tab:
    mov         rdi, [rbx + wtab.thread_tabs + rbp * 8]
    call        asmbpe_tab_free
    inc         ebp
    cmp         ebp, MAX_THREADS
    jb          .thread_tab
    mov         rdi, rbx
    call        asmbpe_tab_free
.ret:
    RET
ENDFUNC

FUNC asmbpe_wordtab_size, 1, 1, 0, t
    mov         rax, [tq + wtab.used]
    RET
ENDFUNC

FUNC asmbpe_wordtab_key_bytes, 1, 1, 0, t
    mov         rax, [tq + wtab.arena_use]
    sub         rax, PAD
    RET
ENDFUNC

FUNC asmbpe_wordtab_total, 1, 1, 0, t
    mov         rax, [tq + wtab.total]
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; int64_t asmbpe_wordtab_export(const asmbpe_wordtab *t, uint8_t *bytes,
;                               uint64_t *ends, uint64_t *counts)
; Writes every word of t (table order): its bytes concatenated into bytes
; (asmbpe_wordtab_key_bytes of them), the end offset of each in ends and its
; count in counts (asmbpe_wordtab_size entries each).  Returns the words.
;-----------------------------------------------------------------------------
FUNC asmbpe_wordtab_export, 4, 12, 0, t, bytes, ends, counts
    mov         rbx, tq
    mov         r8, [rbx + wtab.slots]
    mov         r9, [rbx + wtab.mask]
    inc         r9
    shl         r9, 5
    add         r9, r8                          ; end of slots
    mov         r10, bytesq
    xor         r11d, r11d                      ; bytes written
    xor         eax, eax                        ; words written
    mov         rbp, endsq
    mov         r14, countsq
.slot:
    cmp         r8, r9
    jae         .ret
    mov         rdx, [r8 + slot.count]
    test        rdx, rdx
    jz          .next
    mov         [r14 + rax * 8], rdx
    mov         rsi, [r8 + slot.key]
    add         rsi, [rbx + wtab.base]
    lea         rdi, [r10 + r11]
    mov         rcx, [r8 + slot.len]
    add         r11, rcx
    rep movsb
    mov         [rbp + rax * 8], r11
    inc         rax
.next:
    add         r8, slot_size
    jmp         .slot
.ret:
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; int64_t asmbpe_wordtab_add(asmbpe_wordtab *t, const uint8_t *bytes,
;                            const uint64_t *ends, const uint64_t *counts,
;                            uint64_t n)
; Adds n words with their counts to t: word i is bytes[ends[i-1], ends[i])
; (the first from 0), as asmbpe_wordtab_export writes them; bytes has SPEC
; §2 padding.  Merges tables counted elsewhere (other processes, machines).
; Returns the unique words in t, or ASMBPE_ENOMEM.
;-----------------------------------------------------------------------------
FUNC asmbpe_wordtab_add, 5, 15, 0, t, bytes, ends, counts, n
    sub         rsp, 8                          ; 6 pushes + 8: aligned calls
    mov         rbx, tq
    mov         r12, bytesq
    mov         r13, endsq
    mov         r14, countsq
    mov         r15, nq
    xor         ebp, ebp                        ; i
.word:
    cmp         rbp, r15
    jae         .done
    xor         eax, eax
    test        rbp, rbp
    jz          .start
    mov         rax, [r13 + rbp * 8 - 8]
.start:
    mov         rdx, [r13 + rbp * 8]
    sub         rdx, rax                        ; len
    lea         rsi, [r12 + rax]                ; key
    HASH_BYTES  rsi, rdx, r8, r9, r10
    mov         rdi, rbx
    mov         rcx, r8
    mov         r8, [r14 + rbp * 8]
    call        asmbpe_tab_insert
    test        eax, eax
    jnz         .fail
    inc         rbp
    jmp         .word
.done:
    mov         rax, [rbx + wtab.used]
    jmp         .ret
.fail:
    movsxd      rax, eax
.ret:
    add         rsp, 8
    RET
ENDFUNC
