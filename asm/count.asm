;-----------------------------------------------------------------------------
; count.asm — word counting for training (SPEC §4.1): per-thread hash tables
; of the chunks of each thread's documents, merged into one persistent table
; that owns copies of the word bytes (so text can be counted in batches).
; Table layout and the chunk hash: wordtab.inc.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%define COUNT_HERE
%include "wordtab.inc"

%define MERGE_AHEAD 8               ; slots between a prefetch and its insert

extern asmbpe_memeq
extern asmbpe_split_offsets

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
; when the table owns its keys).  Grows the table at half full.  0, or
; ASMBPE_ENOMEM (the table is then unchanged but for the failed key).
; key must have SPEC §2 front padding (memeq may read 7 bytes before it).
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_tab_insert, 5, 15, 0, tab, key, len, hash, count
    sub         rsp, 8                          ; 6 pushes + 8: aligned calls
    mov         rbx, tabq
    mov         r12, keyq
    mov         r13, lenq
    mov         r14, hashq
    mov         r15, countq
    mov         rbp, r14
    and         rbp, [rbx + wtab.mask]             ; slot index
.probe:
    mov         rax, rbp
    shl         rax, 5
    add         rax, [rbx + wtab.slots]
    cmp         qword [rax + slot.count], 0
    je          .new
    cmp         [rax + slot.hash], r14
    jne         .next
    cmp         [rax + slot.len], r13
    jne         .next
    mov         [rsp], rax
    mov         rdi, r12
    mov         rsi, [rax + slot.key]
    add         rsi, [rbx + wtab.base]
    mov         rdx, r13
    call        asmbpe_memeq
    mov         rcx, [rsp]
    test        eax, eax
    jnz         .found
.next:
    inc         rbp
    and         rbp, [rbx + wtab.mask]
    jmp         .probe
.found:
    add         [rcx + slot.count], r15
    add         [rbx + wtab.total], r15
    xor         eax, eax
    jmp         .ret

.new:
    mov         rcx, r12                        ; key: the pointer itself
    cmp         qword [rbx + wtab.owns_keys], 0
    je          .store
    mov         rax, [rbx + wtab.arena_use]        ; copy into the arena
    add         rax, r13
    cmp         rax, [rbx + wtab.arena_cap]
    jbe         .copy
    mov         rdx, [rbx + wtab.arena_cap]        ; grow: max(2 cap, need + 1 MB)
    add         rdx, rdx
    add         rax, ARENA_INIT
    and         rax, -4096
    cmp         rdx, rax
    cmovb       rdx, rax
    mov         [rsp], rdx
    mov         rdi, [rbx + wtab.base]
    mov         rsi, [rbx + wtab.arena_cap]
    call        asmbpe_remap
    test        rax, rax
    jz          .enomem
    mov         [rbx + wtab.base], rax
    mov         rdx, [rsp]
    mov         [rbx + wtab.arena_cap], rdx
.copy:
    mov         rdi, [rbx + wtab.base]
    add         rdi, [rbx + wtab.arena_use]
    mov         rsi, r12
    mov         rcx, r13
    rep movsb
    mov         rcx, [rbx + wtab.arena_use]        ; key: the arena offset
    add         [rbx + wtab.arena_use], r13
.store:
    mov         rax, rbp
    shl         rax, 5
    add         rax, [rbx + wtab.slots]
    mov         [rax + slot.hash], r14
    mov         [rax + slot.key], rcx
    mov         [rax + slot.len], r13
    mov         [rax + slot.count], r15
    add         [rbx + wtab.total], r15
    mov         rax, [rbx + wtab.used]
    inc         rax
    mov         [rbx + wtab.used], rax
    add         rax, rax
    mov         rdx, [rbx + wtab.mask]
    cmp         rax, rdx
    jbe         .ok
    mov         rdi, rbx
    call        tab_grow
    jmp         .ret
.ok:
    xor         eax, eax
    jmp         .ret
.enomem:
    mov         eax, ASMBPE_ENOMEM
.ret:
    add         rsp, 8
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; tab_grow (local): rdi = table.  Doubles the slots, rehashing by the stored
; hashes.  eax = 0 or ASMBPE_ENOMEM (then the table is as it was).
;-----------------------------------------------------------------------------
tab_grow:
    SAVE        rbx, r12, r13
    mov         rbx, rdi
    mov         rdi, [rbx + wtab.mask]
    inc         rdi
    shl         rdi, 6                          ; 2 x slots x 32 bytes
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         r12, rax                        ; new slots
    mov         r13, [rbx + wtab.mask]
    lea         r13, [r13 * 2 + 1]              ; new mask
    mov         rsi, [rbx + wtab.slots]
    mov         r8, [rbx + wtab.mask]
    inc         r8
    shl         r8, 5
    add         r8, rsi                         ; end of old slots
.each:
    cmp         rsi, r8
    jae         .swap
    cmp         qword [rsi + slot.count], 0
    je          .skip
    mov         rdx, [rsi + slot.hash]
.find:
    and         rdx, r13
    mov         rax, rdx
    shl         rax, 5
    add         rax, r12
    cmp         qword [rax + slot.count], 0
    je          .put
    inc         rdx
    jmp         .find
.put:
    vmovdqu     xmm0, [rsi]
    vmovdqu     [rax], xmm0
    vmovdqu     xmm0, [rsi + 16]
    vmovdqu     [rax + 16], xmm0
.skip:
    add         rsi, slot_size
    jmp         .each
.swap:
    mov         rdi, [rbx + wtab.slots]
    mov         rsi, [rbx + wtab.mask]
    inc         rsi
    shl         rsi, 5
    mov         [rbx + wtab.slots], r12
    mov         [rbx + wtab.mask], r13
    call        asmbpe_unmap
    xor         eax, eax
    jmp         .ret
.enomem:
    mov         eax, ASMBPE_ENOMEM
.ret:
    RESTORE

;-----------------------------------------------------------------------------
; The counting context (on asmbpe_count_words' stack) and its worker.
;-----------------------------------------------------------------------------
%define C_TEXT      0
%define C_ENDS      8
%define C_NDOCS     16
%define C_NTHREADS  24
%define C_MAXW      32      ; max word bytes (0: no limit -> all ones)
%define C_TOTAL     40      ; bytes of text
%define C_STATUS    48      ; 0 or a negative status set by a worker
%define C_TABLES    56      ; per-thread table pointers
%define C_SIZE      (C_TABLES + 8 * MAX_THREADS)

%define CW_BUF      4096                        ; chunk ends per split call
%define L_HASH      (CW_BUF * 8)                ; their hashes
%define L_CTX       (CW_BUF * 16)
%define L_TID       (L_CTX + 8)
%define L_DOC       (L_CTX + 16)
%define L_DOCEND    (L_CTX + 24)
%define L_DOCLEN    (L_CTX + 32)
%define L_POS       (L_CTX + 40)
%define L_N         (L_CTX + 48)
%define CW_FRAME    (CW_BUF * 16 + 56)          ; 6 pushes + this: aligned

; first document whose start offset is >= rax; in: rdi = ends, rsi = ndocs.
; out: rax.  Clobbers rcx, rdx, r8, r9.
lower_bound_doc:
    mov         r8, rax                         ; bound
    xor         eax, eax                        ; lo
    mov         r9, rsi                         ; hi
.loop:
    cmp         rax, r9
    jae         .ret
    lea         rcx, [rax + r9]
    shr         rcx, 1                          ; mid
    xor         edx, edx
    test        rcx, rcx
    jz          .have
    mov         rdx, [rdi + rcx * 8 - 8]        ; start(mid) = ends[mid - 1]
.have:
    cmp         rdx, r8
    jae         .upper
    lea         rax, [rcx + 1]
    jmp         .loop
.upper:
    mov         r9, rcx
    jmp         .loop
.ret:
    ret

; void count_worker(ctx, tid): counts the chunks of the documents whose start
; falls in this thread's share of the bytes into its own table.
count_worker:
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, CW_FRAME
    mov         r12, rdi
    mov         [rsp + L_CTX], rdi
    mov         [rsp + L_TID], rsi
    mov         rax, [r12 + C_TOTAL]            ; bytes * tid / n
    mul         rsi
    div         qword [r12 + C_NTHREADS]
    mov         rdi, [r12 + C_ENDS]
    mov         rsi, [r12 + C_NDOCS]
    call        lower_bound_doc
    mov         [rsp + L_DOC], rax
    mov         rax, [rsp + L_TID]
    inc         rax
    mov         rsi, [r12 + C_NDOCS]
    mov         [rsp + L_DOCEND], rsi
    cmp         rax, [r12 + C_NTHREADS]
    jae         .range_done                     ; the last thread: to the end
    mul         qword [r12 + C_TOTAL]
    div         qword [r12 + C_NTHREADS]
    mov         rdi, [r12 + C_ENDS]
    call        lower_bound_doc
    mov         [rsp + L_DOCEND], rax
.range_done:
    mov         rcx, [rsp + L_TID]              ; this thread's table: kept
    cmp         qword [r12 + C_TABLES + rcx * 8], 0     ; from the last call,
    jne         .doc                            ; or a new one
    mov         edi, T_THREAD_SLOTS
    xor         esi, esi
    call        asmbpe_tab_alloc
    mov         r12, [rsp + L_CTX]
    mov         rcx, [rsp + L_TID]
    mov         [r12 + C_TABLES + rcx * 8], rax
    test        rax, rax
    jz          .enomem

.doc:
    mov         r14, [rsp + L_DOC]
    cmp         r14, [rsp + L_DOCEND]
    jae         .done
    lea         rax, [r14 + 1]
    mov         [rsp + L_DOC], rax
    mov         rdx, [r12 + C_ENDS]
    xor         eax, eax
    test        r14, r14
    jz          .start
    mov         rax, [rdx + r14 * 8 - 8]
.start:
    mov         rcx, [rdx + r14 * 8]
    sub         rcx, rax
    mov         [rsp + L_DOCLEN], rcx
    mov         rbx, [r12 + C_TEXT]
    add         rbx, rax                        ; the document
    mov         qword [rsp + L_POS], 0
.split:
    mov         rdi, rbx
    mov         rsi, [rsp + L_DOCLEN]
    mov         rdx, [rsp + L_POS]
    mov         rcx, rsp
    mov         r8d, CW_BUF
    call        asmbpe_split_offsets
    mov         [rsp + L_N], rax
    lea         r14, [rsp + rax * 8]            ; end of the chunk ends
    ; pass 1: hash every chunk and prefetch its first slot, so the inserts
    ; below find the (mostly) cold table lines on their way
    mov         r15, rsp
    mov         rbp, [rsp + L_POS]
    mov         rcx, [rsp + L_TID]
    mov         rdi, [r12 + C_TABLES + rcx * 8]
.hash:
    cmp         r15, r14
    jae         .hashed
    mov         r13, [r15]
    mov         rdx, r13
    sub         rdx, rbp                        ; len
    lea         rsi, [rbx + rbp]
    HASH_BYTES  rsi, rdx, r8, r9, r10
    mov         [r15 + L_HASH], r8
    and         r8, [rdi + wtab.mask]
    shl         r8, 5
    add         r8, [rdi + wtab.slots]
    prefetcht0  [r8]
    mov         rbp, r13
    add         r15, 8
    jmp         .hash
.hashed:
    mov         r15, rsp
    mov         rbp, [rsp + L_POS]              ; start of the next chunk
.chunk:
    cmp         r15, r14
    jae         .chunks_done
    mov         r13, [r15]
    add         r15, 8
    mov         rdx, r13
    sub         rdx, rbp                        ; len
    cmp         rdx, [r12 + C_MAXW]
    ja          .skip
    lea         rsi, [rbx + rbp]                ; key
    mov         r8, [r15 + L_HASH - 8]          ; (r15 moved past it)
    mov         rcx, [rsp + L_TID]
    mov         rdi, [r12 + C_TABLES + rcx * 8]
    ; fast path: the first slot probed already holds this word of <= 8
    ; bytes (keys are text pointers: compare the 8 bytes ending at the end)
    cmp         rdx, 8
    ja          .insert
    mov         rax, [rdi + wtab.mask]
    and         rax, r8
    shl         rax, 5
    add         rax, [rdi + wtab.slots]
    cmp         [rax + slot.hash], r8
    jne         .insert
    cmp         [rax + slot.len], rdx
    jne         .insert
    cmp         qword [rax + slot.count], 0        ; an emptied slot: its key
    je          .insert                         ; points into freed text
    mov         r9, [rax + slot.key]
    mov         r10, [r9 + rdx - 8]
    xor         r10, [rsi + rdx - 8]
    lea         ecx, [edx * 8]
    neg         ecx
    add         ecx, 64                         ; (8 - len) * 8
    shrx        r10, r10, rcx
    test        r10, r10
    jnz         .insert
    inc         qword [rax + slot.count]
    inc         qword [rdi + wtab.total]
    jmp         .skip
.insert:
    mov         rcx, r8
    mov         r8d, 1
    call        asmbpe_tab_insert
    test        eax, eax
    jnz         .fail
.skip:
    mov         rbp, r13
    jmp         .chunk
.chunks_done:
    cmp         qword [rsp + L_N], CW_BUF
    jb          .doc
    mov         [rsp + L_POS], rbp
    jmp         .split

.enomem:
    mov         eax, ASMBPE_ENOMEM
.fail:
    movsxd      rax, eax                        ; int status -> int64_t
    mov         [r12 + C_STATUS], rax           ; any worker's failure
.done:
    add         rsp, CW_FRAME
    RESTORE

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
; int64_t asmbpe_count_words(asmbpe_wordtab *t, const uint8_t *text,
;                            const uint64_t *doc_ends, uint64_t n_docs,
;                            uint64_t threads, uint64_t max_word_bytes)
;
; Splits documents text[doc_ends[i-1], doc_ends[i]) (the first starts at 0)
; into chunks (SPEC §3) and adds each chunk of at most max_word_bytes bytes
; (0: no limit) to t.  Threads each count the documents that start in their
; share of the bytes into their own table; the tables are then merged into t.
; Returns the unique words in t, or ASMBPE_EINVAL (threads 0 or more than
; MAX_THREADS), ASMBPE_ENOMEM, ASMBPE_ETHREAD.  text has SPEC §2 padding.
;-----------------------------------------------------------------------------
FUNC asmbpe_count_words, 6, 15, 0, t, text, ends, ndocs, threads, maxw
    sub         rsp, C_SIZE                     ; 6 pushes + C_SIZE: aligned
    mov         rbx, tq
    mov         rax, ASMBPE_EINVAL              ; int64_t: sign-extended
    test        threadsq, threadsq
    jz          .ret
    cmp         threadsq, MAX_THREADS
    ja          .ret
    mov         [rsp + C_TEXT], textq
    mov         [rsp + C_ENDS], endsq
    mov         [rsp + C_NDOCS], ndocsq
    mov         [rsp + C_NTHREADS], threadsq
    test        maxwq, maxwq
    jnz         .maxw
    dec         maxwq                           ; no limit
.maxw:
    mov         [rsp + C_MAXW], maxwq
    xor         eax, eax
    test        ndocsq, ndocsq
    jz          .total
    mov         rax, [endsq + ndocsq * 8 - 8]
.total:
    mov         [rsp + C_TOTAL], rax
    mov         qword [rsp + C_STATUS], 0
    mov         r12, threadsq
    lea         rdi, [rsp + C_TABLES]           ; the thread tables kept in t
    lea         rsi, [rbx + wtab.thread_tabs]
    mov         ecx, MAX_THREADS
    rep movsq
    mov         rax, [rbx + wtab.used]
    cmp         qword [rsp + C_TOTAL], 0
    je          .ret
    lea         rdi, [count_worker]
    mov         rsi, rsp
    mov         rdx, r12
    call        asmbpe_parallel
    test        eax, eax
    jnz         .ret_status

    xor         r13d, r13d                      ; merge thread tables into t
.merge_table:
    cmp         r13, r12
    jae         .merged
    mov         r14, [rsp + C_TABLES + r13 * 8]
    test        r14, r14
    jz          .next_table
    mov         r15, [r14 + wtab.slots]
    mov         rbp, [r14 + wtab.mask]
    inc         rbp
    shl         rbp, 5
    add         rbp, r15                        ; end of slots
.merge_slot:
    cmp         r15, rbp
    jae         .free_table
    lea         rax, [r15 + MERGE_AHEAD * slot_size]
    cmp         rax, rbp
    jae         .no_prefetch
    mov         rax, [rax + slot.hash]             ; prefetch the slot of t that
    and         rax, [rbx + wtab.mask]             ; the slot MERGE_AHEAD further
    shl         rax, 5                          ; on will probe first
    add         rax, [rbx + wtab.slots]
    prefetcht0  [rax]
.no_prefetch:
    mov         r8, [r15 + slot.count]
    test        r8, r8
    jz          .merge_next
    mov         qword [r15 + slot.count], 0        ; (emptied for the next call)
    mov         rdi, rbx
    mov         rsi, [r15 + slot.key]
    mov         rdx, [r15 + slot.len]
    mov         rcx, [r15 + slot.hash]
    call        asmbpe_tab_insert
    test        eax, eax
    jz          .merge_next
    movsxd      rax, eax
    mov         [rsp + C_STATUS], rax
.merge_next:
    add         r15, slot_size
    jmp         .merge_slot
.free_table:                                    ; keep it, empty, in t
    mov         qword [r14 + wtab.used], 0
    mov         qword [r14 + wtab.total], 0
    mov         [rbx + wtab.thread_tabs + r13 * 8], r14
.next_table:
    inc         r13
    jmp         .merge_table
.merged:
    mov         rax, [rsp + C_STATUS]
    test        rax, rax
    jnz         .ret
    mov         rax, [rbx + wtab.used]
    jmp         .ret
.ret_status:
    movsxd      rax, eax
.ret:
    add         rsp, C_SIZE
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
