;-----------------------------------------------------------------------------
; count.asm — word counting for training (SPEC §4.1): asmbpe_count_words
; splits the documents into chunks (asmbpe_split_offsets, pretok.asm) on
; asmbpe_parallel's threads, each counting its share into its own table
; (count_worker), then merges those tables into the caller's persistent
; table, which owns copies of the word bytes (so text can be counted in
; batches): from two threads on every thread merges its own table at once
; (merge_worker, par_insert: T58), with one thread serially.  The tables themselves (asmbpe_tab_alloc, asmbpe_tab_insert, the
; asmbpe_wordtab_* API) are in wordtab.asm; layout and the chunk hash:
; wordtab.inc.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "wordtab.inc"

%define MERGE_AHEAD 8               ; slots between a prefetch and its insert

extern asmbpe_split_offsets
extern asmbpe_tab_grow
extern asmbpe_arena_reserve
extern asmbpe_memeq

section .text

;-----------------------------------------------------------------------------
; The counting context (on asmbpe_count_words' stack) and its worker.
;-----------------------------------------------------------------------------
; the counting context, on asmbpe_count_words' stack (6 pushes + this:
; aligned calls), read by every worker
struc cctx
    .text:      resq 1          ; the text
    .ends:      resq 1          ; u64 doc_ends
    .ndocs:     resq 1          ; documents
    .nthreads:  resq 1          ; threads
    .maxw:      resq 1          ; max word bytes (0: no limit -> all ones)
    .total:     resq 1          ; bytes of text
    .status:    resq 1          ; 0 or a negative status set by a worker
    .pretok:    resq 1          ; the pre-tokenizer id (asmbpe_split_offsets)
    .t:         resq 1          ; the persistent table
    .list:      resq 1          ; (parallel merge) the new keys' slots, all
    .listbytes: resq 1          ; threads' lists in one mapping, and its size
    .tables:    resq MAX_THREADS    ; per-thread table pointers
    .lstart:    resq MAX_THREADS    ; (parallel merge) each thread's list
    .lcur:      resq MAX_THREADS    ; and its end once merge_worker is done
endstruc
%if (cctx_size + 7 * 8) % 16
    %error "cctx: 6 pushes + the return address + cctx must keep calls aligned"
%endif

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
endstruc

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

; void count_worker(ctx, tid): counts the chunks of its share of the bytes
; into its own table: [snap_cut(total * tid / n), snap_cut(total * (tid + 1)
; / n)), which may start or end inside a document.
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
    mov         rax, [cw_ctx + cctx.total]      ; lo: bytes * tid / n, snapped
    mul         rsi
    div         qword [cw_ctx + cctx.nthreads]
    mov         rdi, cw_ctx
    call        snap_cut
    mov         [rsp + cw_frame.lo], rax
    mov         rax, [rsp + cw_frame.tid]       ; hi: the same for tid + 1
    inc         rax
    mul         qword [cw_ctx + cctx.total]
    div         qword [cw_ctx + cctx.nthreads]
    mov         rdi, cw_ctx
    call        snap_cut
    mov         [rsp + cw_frame.hi], rax
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
    mov         rcx, [rsp + cw_frame.lo]
    cmp         rcx, [rsp + cw_frame.hi]
    jb          .range_done
    mov         [rsp + cw_frame.docend], rax    ; an empty share
.range_done:
    mov         rcx, [rsp + cw_frame.tid]       ; this thread's table: kept
    cmp         qword [cw_ctx + cctx.tables + rcx * 8], 0 ; from the last call,
    jne         .doc                            ; or a new one
    mov         edi, T_THREAD_SLOTS
    xor         esi, esi
    call        asmbpe_tab_alloc
    mov         cw_ctx, [rsp + cw_frame.ctx]
    mov         rcx, [rsp + cw_frame.tid]
    mov         [cw_ctx + cctx.tables + rcx * 8], rax
    test        rax, rax
    jz          .enomem

.doc:
    mov         cw_di, [rsp + cw_frame.doc]
    cmp         cw_di, [rsp + cw_frame.docend]
    jae         .done
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
.chunk:
    cmp         cw_cur, cw_lim
    jae         .chunks_done
    mov         cw_end, [cw_cur]
    add         cw_cur, 8
    mov         rdx, cw_end
    sub         rdx, cw_start                   ; len
    cmp         rdx, [cw_ctx + cctx.maxw]
    ja          .skip
    lea         rsi, [cw_doc + cw_start]        ; key
    mov         r8, [cw_cur + cw_frame.hash - 8]    ; (cw_cur is past it)
    mov         rcx, [rsp + cw_frame.tid]
    mov         rdi, [cw_ctx + cctx.tables + rcx * 8]
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
    mov         cw_start, cw_end
    jmp         .chunk
.chunks_done:
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
    mov         [rsp], rdx
    mov         rsi, [rdx + slot.key]           ; its bytes: in the text (state
    cmp         dword [rdx + slot.state], 0     ; 1), or at this offset of the
    jne         .compare                        ; arena
    add         rsi, [pi_t + wtab.base]
.compare:
    mov         rdi, pi_key
    mov         rdx, pi_len
    call        asmbpe_memeq
    mov         rdx, [rsp]
    test        eax, eax
    jz          .next
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

; void merge_worker(ctx, tid): merges this thread's table into t (par_insert),
; emptying it for the next call, and lists the slots of the keys new in t
; from cctx.lstart[tid]; their end in cctx.lcur[tid].
%define mw_ctx   r12         ; the counting context
%define mw_tab   r13         ; this thread's table
%define mw_slot  r14         ; its slot being merged
%define mw_end   r15         ; the end of its slots
%define mw_cur   rbx         ; the list's end
%define mw_t     rbp         ; t
merge_worker:
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, 8                          ; (calls aligned)
    mov         mw_ctx, rdi
    mov         [rsp], rsi
    mov         mw_tab, [mw_ctx + cctx.tables + rsi * 8]
    mov         mw_cur, [mw_ctx + cctx.lstart + rsi * 8]
    mov         mw_t, [mw_ctx + cctx.t]
    test        mw_tab, mw_tab
    jz          .done
    mov         mw_slot, [mw_tab + wtab.slots]
    mov         mw_end, [mw_tab + wtab.mask]
    inc         mw_end
    shl         mw_end, 5
    add         mw_end, mw_slot
.slot:
    cmp         mw_slot, mw_end
    jae         .emptied
    lea         rax, [mw_slot + MERGE_AHEAD * slot_size]
    cmp         rax, mw_end
    jae         .no_prefetch
    mov         rax, [rax + slot.hash]          ; prefetch the slot of t that
    and         rax, [mw_t + wtab.mask]         ; the slot MERGE_AHEAD further
    shl         rax, 5                          ; on will probe first
    add         rax, [mw_t + wtab.slots]
    prefetcht0  [rax]
.no_prefetch:
    mov         r8, [mw_slot + slot.count]
    test        r8, r8
    jz          .next
    mov         qword [mw_slot + slot.count], 0 ; (emptied for the next call)
    mov         rdi, mw_t
    mov         rsi, [mw_slot + slot.key]
    mov         edx, [mw_slot + slot.len]
    mov         rcx, [mw_slot + slot.hash]
    call        par_insert
    test        rax, rax
    jz          .next
    mov         [mw_cur], rax                   ; a key new in t
    add         mw_cur, 8
.next:
    add         mw_slot, slot_size
    jmp         .slot
.emptied:
    mov         qword [mw_tab + wtab.used], 0
    mov         qword [mw_tab + wtab.total], 0
    mov         qword [mw_tab + wtab.keybytes], 0
.done:
    mov         rsi, [rsp]
    mov         [mw_ctx + cctx.lcur + rsi * 8], mw_cur
    add         rsp, 8
    RESTORE
%undef  mw_ctx
%undef  mw_tab
%undef  mw_slot
%undef  mw_end
%undef  mw_cur
%undef  mw_t

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
    mov         rsi, pp_bytes
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
    mov         r8, [pf_p]                      ; the slot
    mov         ecx, [r8 + slot.len]
    mov         rsi, [r8 + slot.key]            ; the bytes in the text
    mov         rdi, [pf_t + wtab.arena_use]
    mov         [r8 + slot.key], rdi            ; -> their arena offset
    add         [pf_t + wtab.arena_use], rcx
    add         rdi, [pf_t + wtab.base]
    rep movsb
    mov         dword [r8 + slot.state], 0
    inc         qword [pf_t + wtab.used]
    add         pf_p, 8
    jmp         .key
.thread_next:
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
%define cn_i        r13         ; (merge) the thread table being merged
%define cn_i_d      r13d        ; (32-bit view)
%define cn_tab      r14         ; its table
%define cn_slot     r15         ; its slot being merged
%define cn_send     rbp         ; end of its slots
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

    cmp         cn_nth, 1                       ; threads: they merge their own
    je          .serial                         ; tables at once
    mov         rdi, rsp
    call        par_prepare
    test        eax, eax
    jnz         .serial                         ; no room: one thread merges
    lea         rdi, [merge_worker]
    mov         rsi, rsp
    mov         rdx, cn_nth
    call        asmbpe_parallel
    test        eax, eax
    jnz         .par_not_run
    mov         rdi, rsp
    call        par_finish
    test        eax, eax
    jz          .merged
    movsxd      rax, eax
    mov         [rsp + cctx.status], rax
    jmp         .merged
.par_not_run:                                   ; no thread ran: one merges
    mov         rdi, [rsp + cctx.list]
    mov         rsi, [rsp + cctx.listbytes]
    call        asmbpe_unmap
    xor         cn_i_d, cn_i_d                  ; (par_prepare added the counts
.untotal:                                       ; to t's total: the serial merge
    cmp         cn_i, cn_nth                    ; adds them again)
    jae         .serial
    mov         rax, [rsp + cctx.tables + cn_i * 8]
    test        rax, rax
    jz          .untotal_next
    mov         rax, [rax + wtab.total]
    sub         [cn_t + wtab.total], rax
.untotal_next:
    inc         cn_i
    jmp         .untotal
.serial:
    xor         cn_i_d, cn_i_d                  ; merge thread tables into t
.merge_table:
    cmp         cn_i, cn_nth
    jae         .merged
    mov         cn_tab, [rsp + cctx.tables + cn_i * 8]
    test        cn_tab, cn_tab
    jz          .next_table
    mov         cn_slot, [cn_tab + wtab.slots]
    mov         cn_send, [cn_tab + wtab.mask]
    inc         cn_send
    shl         cn_send, 5
    add         cn_send, cn_slot                ; end of slots
.merge_slot:
    cmp         cn_slot, cn_send
    jae         .free_table
    lea         rax, [cn_slot + MERGE_AHEAD * slot_size]
    cmp         rax, cn_send
    jae         .no_prefetch
    mov         rax, [rax + slot.hash]             ; prefetch the slot of t that
    and         rax, [cn_t + wtab.mask]            ; the slot MERGE_AHEAD further
    shl         rax, 5                          ; on will probe first
    add         rax, [cn_t + wtab.slots]
    prefetcht0  [rax]
.no_prefetch:
    mov         r8, [cn_slot + slot.count]
    test        r8, r8
    jz          .merge_next
    mov         qword [cn_slot + slot.count], 0    ; (emptied for the next call)
    mov         rdi, cn_t
    mov         rsi, [cn_slot + slot.key]
    mov         rdx, [cn_slot + slot.len]
    mov         rcx, [cn_slot + slot.hash]
    call        asmbpe_tab_insert
    test        eax, eax
    jz          .merge_next
    movsxd      rax, eax
    mov         [rsp + cctx.status], rax
.merge_next:
    add         cn_slot, slot_size
    jmp         .merge_slot
.free_table:                                    ; keep it, empty, in t
    mov         qword [cn_tab + wtab.used], 0
    mov         qword [cn_tab + wtab.total], 0
    mov         qword [cn_tab + wtab.keybytes], 0
    mov         [cn_t + wtab.thread_tabs + cn_i * 8], cn_tab
.next_table:
    inc         cn_i
    jmp         .merge_table
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
%undef  cn_i
%undef  cn_i_d
%undef  cn_tab
%undef  cn_slot
%undef  cn_send

