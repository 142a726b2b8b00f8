;-----------------------------------------------------------------------------
; count.asm — word counting for training (SPEC §4.1): asmbpe_count_words
; splits the documents into chunks (asmbpe_split_offsets, pretok.asm) on
; asmbpe_parallel's threads, each counting its share into its own table
; (count_worker), then merges those tables into the caller's persistent
; table, which owns copies of the word bytes (so text can be counted in
; batches: count_merge, in count_merge.asm).  The counting context:
; count.inc.  The tables themselves (asmbpe_tab_alloc, asmbpe_tab_insert,
; the asmbpe_wordtab_* API) are in wordtab.asm; layout and the chunk hash:
; wordtab.inc.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "wordtab.inc"
%include "count.inc"

extern asmbpe_split_offsets

section .text

;-----------------------------------------------------------------------------
; The counting context (on asmbpe_count_words' stack) and its worker.
;-----------------------------------------------------------------------------
%define CW_BUF      4096        ; chunk ends per split call

; count_worker's stack frame (6 pushes + this: aligned calls)
struc cw_frame
    .ends:      resq CW_BUF     ; chunk ends of one split call (at rsp)
    .hash:      resq CW_BUF     ; their hashes
    .ctx:       resq 1          ; the counting context
    .tid:       resq 1          ; this thread's tid
    .doc:       resq 1          ; next document to count
    .docend:    resq 1          ; end of this thread's documents
    .doclen:    resq 1          ; bytes of the document being split
    .pos:       resq 1          ; where its next split call starts
    .n:         resq 1          ; chunk ends the last split call gave (0 once
                                ; the document's part is done)
    .lo:        resq 1          ; this thread's bytes: [lo, hi) of the text
    .hi:        resq 1
    .lim:       resq 1          ; end of its part of the document (an offset)
    .part:      resq 1          ; the part of the bytes being counted
    .slow:      resq 1          ; chunks of this pass off the fast path
    .pad:       resq 1          ; (calls stay aligned)
endstruc
%if (cw_frame_size + 7 * 8) % 16
    %error "cw_frame: 6 pushes + the return address + cw_frame must keep calls aligned"
%endif

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

; snap_cut: rdi = ctx, rax = a byte offset of the text -> rax = the first
; safe cut at or after it: the end of the text, the start of a document, or
; a byte p of a document that is an ASCII letter after an LF, the three
; bytes before the LF ASCII too (those inside the document).  No pattern of
; harness.pretokenizers (SPEC §3, §10) makes a chunk that holds such an LF
; and the letter after it (the chunks that can hold an LF end at it when a
; letter follows; the ones that start with an optional byte before a letter
; run exclude CR and LF from it), so a thread can count a document from
; there: one huge document is shared by every thread.  (The ASCII bytes
; before: the seed's characters take their length from the lead byte alone,
; so a lead byte up to three bytes before would swallow the LF and letter.)
; Ends at the document's end when none is found.  Clobbers rcx, rdx, rsi,
; r8-r11.
snap_cut:
    mov         r10, rax
    cmp         r10, [rdi + cctx.total]
    jae         .total
    push        rdi
    mov         rsi, [rdi + cctx.ndocs]
    mov         rdi, [rdi + cctx.ends]
    lea         rax, [r10 + 1]
    call        lower_bound_doc                 ; first doc starting past r10
    pop         rdi
    mov         rdx, [rdi + cctx.ends]
    mov         r11, [rdx + rax * 8 - 8]        ; the end of the doc holding r10
    xor         ecx, ecx                        ; (rax >= 1: doc 0 starts at 0)
    cmp         rax, 1
    je          .first
    mov         rcx, [rdx + rax * 8 - 16]       ; its start
.first:
    cmp         r10, rcx
    je          .have                           ; a document's start
    mov         rsi, [rdi + cctx.text]
.scan:                                          ; p in (start, end): text[p - 1]
    cmp         r10, r11                        ; == LF, text[p] a letter
    jae         .doc_end
    cmp         byte [rsi + r10 - 1], 10
    jne         .next
    movzx       edx, byte [rsi + r10]
    or          edx, 0x20                       ; (lower case)
    sub         edx, 'a'
    cmp         edx, 'z' - 'a'
    ja          .next
    lea         r8, [r10 - 4]                   ; text[max(p - 4, start) ..
    cmp         r8, rcx                         ; p - 2] ASCII
    cmovb       r8, rcx
    lea         r9, [r10 - 1]
.ascii:
    cmp         r8, r9
    jae         .have
    test        byte [rsi + r8], 0x80
    jnz         .next
    inc         r8
    jmp         .ascii
.next:
    inc         r10
    jmp         .scan
.doc_end:
    mov         r10, r11
.have:
    mov         rax, r10
    ret
.total:
    mov         rax, [rdi + cctx.total]
    ret

; void count_worker(ctx, tid): counts the chunks of the parts of the bytes it
; claims into its own table: part k is [snap_cut(total * k / parts),
; snap_cut(total * (k + 1) / parts)), which may start or end inside a
; document; parts are claimed one at a time (cctx.nextpart), so a thread that
; loses its core to another (the reader of the next batch) counts fewer.
%define cw_ctx      r12         ; the counting context (cctx)
%define cw_doc      rbx         ; the document's first byte
%define cw_di       r14         ; (.doc) the document's index
%define cw_lim      r14         ; (.split on) end of the chunk ends at rsp
%define cw_cur      r15         ; the chunk end being hashed / counted
%define cw_start    rbp         ; the chunk's start (offset in the document)
%define cw_end      r13         ; the chunk's end (offset in the document)
count_worker:
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, cw_frame_size
    mov         cw_ctx, rdi
    mov         [rsp + cw_frame.ctx], rdi
    mov         [rsp + cw_frame.tid], rsi
    mov         rcx, rsi                        ; this thread's table: kept
    cmp         qword [cw_ctx + cctx.tables + rcx * 8], 0 ; from the last call,
    jne         .claim                          ; or a new one
    mov         edi, T_THREAD_SLOTS
    xor         esi, esi
    call        asmbpe_tab_alloc
    mov         cw_ctx, [rsp + cw_frame.ctx]
    mov         rcx, [rsp + cw_frame.tid]
    mov         [cw_ctx + cctx.tables + rcx * 8], rax
    test        rax, rax
    jz          .enomem
.claim:                                         ; the next part of the bytes,
    mov         eax, 1                          ; any thread (another thread
    lock xadd   [cw_ctx + cctx.nextpart], rax   ; of the process may take this
    cmp         rax, [cw_ctx + cctx.nparts]     ; one's core for a while)
    jae         .done
    mov         [rsp + cw_frame.part], rax
    mul         qword [cw_ctx + cctx.total]     ; lo: bytes * part / parts,
    div         qword [cw_ctx + cctx.nparts]    ; snapped
    mov         rdi, cw_ctx
    call        snap_cut
    mov         [rsp + cw_frame.lo], rax
    mov         rax, [rsp + cw_frame.part]      ; hi: the same for part + 1
    inc         rax
    mul         qword [cw_ctx + cctx.total]
    div         qword [cw_ctx + cctx.nparts]
    mov         rdi, cw_ctx
    call        snap_cut
    mov         [rsp + cw_frame.hi], rax
    cmp         rax, [rsp + cw_frame.lo]
    jbe         .claim                          ; an empty part
    mov         rdi, [cw_ctx + cctx.ends]       ; docs: from the one holding lo
    mov         rsi, [cw_ctx + cctx.ndocs]      ; to the last starting before
    call        lower_bound_doc                 ; hi
    mov         [rsp + cw_frame.docend], rax
    mov         rax, [rsp + cw_frame.lo]
    inc         rax
    mov         rdi, [cw_ctx + cctx.ends]
    mov         rsi, [cw_ctx + cctx.ndocs]
    call        lower_bound_doc                 ; first doc starting past lo,
    dec         rax                             ; minus one: the doc holding lo
    mov         [rsp + cw_frame.doc], rax       ; (lo < total: rax >= 1)

.doc:
    mov         cw_di, [rsp + cw_frame.doc]
    cmp         cw_di, [rsp + cw_frame.docend]
    jae         .claim
    lea         rax, [cw_di + 1]
    mov         [rsp + cw_frame.doc], rax
    mov         rdx, [cw_ctx + cctx.ends]
    xor         eax, eax
    test        cw_di, cw_di
    jz          .start
    mov         rax, [rdx + cw_di * 8 - 8]
.start:
    mov         rcx, [rdx + cw_di * 8]
    sub         rcx, rax
    mov         [rsp + cw_frame.doclen], rcx
    mov         cw_doc, [cw_ctx + cctx.text]
    add         cw_doc, rax                     ; the document
    mov         rdx, [rsp + cw_frame.hi]        ; this thread's part of it:
    sub         rdx, rax                        ; [max(lo - start, 0),
    cmp         rdx, rcx                        ;  min(hi - start, len))
    cmova       rdx, rcx
    mov         [rsp + cw_frame.lim], rdx
    mov         rdx, [rsp + cw_frame.lo]
    sub         rdx, rax
    mov         ecx, 0
    cmovb       rdx, rcx
    mov         [rsp + cw_frame.pos], rdx
.split:
    mov         rdi, cw_doc
    mov         rsi, [rsp + cw_frame.doclen]
    mov         rdx, [rsp + cw_frame.pos]
    mov         rcx, rsp
    mov         r8d, CW_BUF
    mov         r9, [cw_ctx + cctx.pretok]
    call        asmbpe_split_offsets
    mov         rcx, [rsp + cw_frame.lim]       ; keep the ends up to lim
    mov         rdx, rax
.keep:
    test        rdx, rdx
    jz          .kept
    cmp         [rsp + rdx * 8 - 8], rcx
    jbe         .kept
    dec         rdx
    jmp         .keep
.kept:
    cmp         rdx, rax                        ; some end past lim, or the
    jb          .part_done                      ; last one at it: the part
    test        rdx, rdx                        ; ends in this batch
    jz          .part_open
    cmp         [rsp + rdx * 8 - 8], rcx
    jne         .part_open
.part_done:
    xor         eax, eax
.part_open:
    mov         [rsp + cw_frame.n], rax
    lea         cw_lim, [rsp + rdx * 8]         ; end of the chunk ends
    ; pass 1: hash every chunk and prefetch its first slot, so the inserts
    ; below find the (mostly) cold table lines on their way
    mov         cw_cur, rsp
    mov         cw_start, [rsp + cw_frame.pos]
    mov         rcx, [rsp + cw_frame.tid]
    mov         rdi, [cw_ctx + cctx.tables + rcx * 8]
.hash:
    cmp         cw_cur, cw_lim
    jae         .hashed
    mov         cw_end, [cw_cur]
    mov         rdx, cw_end
    sub         rdx, cw_start                   ; len
    lea         rsi, [cw_doc + cw_start]
    HASH_BYTES  rsi, rdx, r8, r9, r10
    mov         [cw_cur + cw_frame.hash], r8
    and         r8, [rdi + wtab.mask]
    shl         r8, 5
    add         r8, [rdi + wtab.slots]
    prefetcht0  [r8]
    mov         cw_start, cw_end
    add         cw_cur, 8
    jmp         .hash
.hashed:
    mov         cw_cur, rsp
    mov         cw_start, [rsp + cw_frame.pos]  ; start of the next chunk
    mov         qword [rsp + cw_frame.slow], 0
.reload:                                        ; the table (an insert may
    mov         rcx, [rsp + cw_frame.tid]       ; grow it)
    mov         rdi, [cw_ctx + cctx.tables + rcx * 8]
    mov         r11, [rdi + wtab.mask]
    mov         rcx, [rdi + wtab.slots]
.chunk:
    cmp         cw_cur, cw_lim
    jae         .chunks_done
    mov         cw_end, [cw_cur]
    add         cw_cur, 8
    mov         rdx, cw_end
    sub         rdx, cw_start                   ; len
    cmp         rdx, [cw_ctx + cctx.maxw]
    ja          .too_long
    lea         rsi, [cw_doc + cw_start]        ; key
    mov         r8, [cw_cur + cw_frame.hash - 8]    ; (cw_cur is past it)
    ; fast path: the first slot probed already holds this word.  Of <= 8
    ; bytes: the same hash and length are the same bytes (KEY_IN_HASH), so
    ; the key, a pointer into text read long ago, is not read; of 9..32
    ; bytes: compared here, 32 bytes from each start (both in text with PAD
    ; bytes after it), the bytes past len masked off (T79).  The table's
    ; total is added once per pass, at .chunks_done (a count of the chunks
    ; that took this path: one add per chunk to the same qword chained them)
    mov         rax, r11
    and         rax, r8
    shl         rax, 5
    add         rax, rcx
    cmp         [rax + slot.hash], r8
    jne         .insert
    cmp         [rax + slot.len], rdx
    jne         .insert
    cmp         qword [rax + slot.count], 0        ; an emptied slot
    je          .insert
    cmp         rdx, KEY_IN_HASH
    jbe         .same_word
    cmp         rdx, 32
    ja          .insert
    mov         r9, [rax + slot.key]
    KEY_EQ32    rsi, r9, edx, r10d, r9d
    jnz         .insert
.same_word:
    inc         qword [rax + slot.count]
    mov         cw_start, cw_end
    jmp         .chunk
.too_long:                                      ; not counted
    inc         qword [rsp + cw_frame.slow]
    mov         cw_start, cw_end
    jmp         .chunk
.insert:                                        ; a new word, its first slot
    cmp         qword [rax + slot.count], 0     ; free: stored here (as
    jne         .insert_call                    ; asmbpe_tab_insert would,
    mov         r9, [rdi + wtab.used]           ; without the call), if the
    lea         r9, [r9 * 2 + 2]                ; table stays at most half
    cmp         r9, r11                         ; full
    ja          .insert_call
    SLOT_NEW    rdi, rax, r8, rsi, rdx, 1       ; (the key: a pointer into
                                                ; the text)
    mov         cw_start, cw_end                ; (counted in the pass's
    jmp         .chunk                          ; total)
.insert_call:                                   ; (adds to the total itself)
    inc         qword [rsp + cw_frame.slow]
    mov         rcx, r8
    mov         r8d, 1
    call        asmbpe_tab_insert
    test        eax, eax
    jnz         .fail
    mov         cw_start, cw_end
    jmp         .reload
.chunks_done:
    mov         rax, cw_lim                     ; the fast path's chunks: all
    sub         rax, rsp                        ; but the slow ones
    shr         rax, 3
    sub         rax, [rsp + cw_frame.slow]
    mov         rcx, [rsp + cw_frame.tid]
    mov         rdi, [cw_ctx + cctx.tables + rcx * 8]
    add         [rdi + wtab.total], rax
    cmp         qword [rsp + cw_frame.n], CW_BUF
    jb          .doc
    mov         [rsp + cw_frame.pos], cw_start
    jmp         .split

.enomem:
    mov         eax, ASMBPE_ENOMEM
.fail:
    movsxd      rax, eax                        ; int status -> int64_t
    mov         [cw_ctx + cctx.status], rax     ; any worker's failure
.done:
    add         rsp, cw_frame_size
    RESTORE
%undef  cw_ctx
%undef  cw_doc
%undef  cw_di
%undef  cw_lim
%undef  cw_cur
%undef  cw_start
%undef  cw_end

;-----------------------------------------------------------------------------
; int64_t asmbpe_count_words(asmbpe_wordtab *t, const uint8_t *text,
;                            const uint64_t *doc_ends, uint64_t n_docs,
;                            uint64_t threads, uint64_t max_word_bytes,
;                            uint64_t pretok)
;
; Splits documents text[doc_ends[i-1], doc_ends[i]) (the first starts at 0)
; into chunks with pre-tokenizer `pretok` (ASMBPE_PRETOK_*) and adds each chunk of at most max_word_bytes bytes
; (0: no limit) to t.  Threads each count the documents that start in their
; share of the bytes into their own table; the tables are then merged into t.
; Returns the unique words in t, or ASMBPE_EINVAL (threads 0 or more than
; MAX_THREADS, an unknown pretok), ASMBPE_ENOMEM, ASMBPE_ETHREAD.  text has SPEC §2 padding.
;-----------------------------------------------------------------------------
%define cn_t        rbx         ; t
%define cn_nth      r12         ; threads
FUNC asmbpe_count_words, 7, 15, 0, t, text, ends, ndocs, threads, maxw, pretok
    STACK_ALLOC cctx_size                       ; 6 pushes + cctx_size: aligned
    mov         cn_t, tq
    mov         rax, ASMBPE_EINVAL              ; int64_t: sign-extended
    test        threadsq, threadsq
    jz          .ret
    cmp         threadsq, MAX_THREADS
    ja          .ret
    mov         r10, pretokm
    lea         r11, [r10 - PRETOK_MIN]
    cmp         r11, PRETOK_MAX - PRETOK_MIN
    ja          .ret                            ; no such pre-tokenizer
    mov         [rsp + cctx.pretok], r10
    mov         [rsp + cctx.t], cn_t
    mov         [rsp + cctx.text], textq
    mov         [rsp + cctx.ends], endsq
    mov         [rsp + cctx.ndocs], ndocsq
    mov         [rsp + cctx.nthreads], threadsq
    test        maxwq, maxwq
    jnz         .maxw
    dec         maxwq                           ; no limit
.maxw:
    mov         [rsp + cctx.maxw], maxwq
    xor         eax, eax
    test        ndocsq, ndocsq
    jz          .total
    mov         rax, [endsq + ndocsq * 8 - 8]
.total:
    mov         [rsp + cctx.total], rax
    mov         qword [rsp + cctx.status], 0
    mov         qword [rsp + cctx.nextpart], 0
    mov         rax, threadsq                   ; COUNT_PARTS parts a thread
    imul        rax, rax, COUNT_PARTS           ; (1: one part, as before)
    cmp         threadsq, 1
    jne         .parts
    mov         eax, 1
.parts:
    mov         [rsp + cctx.nparts], rax
    mov         cn_nth, threadsq
    lea         rdi, [rsp + cctx.tables]        ; the thread tables kept in t
    lea         rsi, [cn_t + wtab.thread_tabs]
    mov         ecx, MAX_THREADS
    rep movsq
    mov         rax, [cn_t + wtab.used]
    cmp         qword [rsp + cctx.total], 0
    je          .ret
    lea         rdi, [count_worker]
    mov         rsi, rsp
    mov         rdx, cn_nth
    call        asmbpe_parallel
    test        eax, eax
    jnz         .ret_status

    mov         rdi, rsp                        ; the threads' tables into t
    call        count_merge
.merged:
    mov         rax, [rsp + cctx.status]
    test        rax, rax
    jnz         .ret
    mov         rax, [cn_t + wtab.used]
    jmp         .ret
.ret_status:
    movsxd      rax, eax
.ret:
    STACK_FREE  cctx_size
    RET
ENDFUNC
%undef  cn_t
%undef  cn_nth

