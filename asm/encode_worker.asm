;-----------------------------------------------------------------------------
; encode_worker.asm — the worker (enc_worker), run on each thread by
; asmbpe_encode_impl (encode_entry.asm).
;
; It claims documents, splits them (asmbpe_split_offsets) and gives each
; chunk its ids: from the whole-token table or the cache here, else through
; chunk_miss / chunk_uncached / run_memo (encode_cache.asm).  mask_tab (here)
; is shared with encode_table.asm and encode_cache.asm.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "wordtab.inc"
%include "encode.inc"

extern asmbpe_split_offsets
extern chunk_miss
extern chunk_uncached
extern run_memo

section .rodata
align 64
; 64 bytes 0xFF then 64 zero bytes: the 48 bytes at (mask_tab + 64 - n) keep
; the first n bytes of a load (n <= 48)
global mask_tab:data hidden (mask_tab.end - mask_tab)
mask_tab:
    times 64 db 0xFF
    times 64 db 0
.end:

section .text

; ENTRY_EQ entry, ne (%1 = entry: the cache entry's address register, kept;
; %2 = ne: a label): to ne unless the cache entry holds the chunk (rsi =
; its bytes, rdx = its length, 2..CACHE_MAX_LEN, r9 = mask_tab + 64 - rdx):
; its length, then its masked 16 / 32 / 48 bytes (reads past the chunk:
; text or padding).  Falls through when it does.  Clobbers eax, ymm0, ymm1.
%macro ENTRY_EQ 2
    cmp         [%1 + centry.len], dl
    jne         %2
    cmp         edx, 16
    ja          %%key32
    vmovdqu     xmm0, [rsi]
    vpand       xmm0, xmm0, [r9]
    vpcmpeqb    xmm0, xmm0, [%1 + centry.key]
    vpmovmskb   eax, xmm0
    cmp         eax, 0xFFFF
    jne         %2
    jmp         %%eq
%%key32:
    vmovdqu     ymm0, [rsi]
    vpand       ymm0, ymm0, [r9]
    vpcmpeqb    ymm0, ymm0, [%1 + centry.key]
    vpmovmskb   eax, ymm0
    cmp         eax, -1
    jne         %2
    cmp         edx, 32
    jbe         %%eq
    vmovdqu     xmm1, [rsi + 32]
    vpand       xmm1, xmm1, [r9 + 32]
    vpcmpeqb    xmm1, xmm1, [%1 + centry.key + 32]
    vpmovmskb   eax, xmm1
    cmp         eax, 0xFFFF
    jne         %2
%%eq:
%endmacro

;=============================================================================
; enc_worker(job, tid): claim blocks of documents until none is left.  Each
; document is split EW_BUF chunks at a time.  Pass 1 gives each chunk its
; ew_frame.entry: 1 << 63 | id when it is one id (a chunk of up to 15 bytes
; found in the whole-token table: no branch), else the way 0 of its cache set
; (both ways prefetched), or 0 when it is not cached.  It is two loops: 1a
; keeps each short chunk's key (ew_frame.key) and prefetches its whole-token
; line (ew_frame.entry meanwhile: the line's offset, tagged by bit 0), 1b
; compares once the lines are there.  Pass 2 writes the ids: one id directly,
; a cache hit as one 16-byte copy, the rest through chunk_miss /
; chunk_uncached, which count as encoded (asmbpe_enc_stats: hits = chunks -
; encoded).
;=============================================================================
%define EW_BUF      512                         ; chunk ends per split call
struc ew_frame                                  ; enc_worker's stack frame
    .ends:      resq EW_BUF                     ; chunk ends (at rsp: the split's
                                                ; output)
    .entry:     resq EW_BUF                     ; their entries (pass 1)
    .doc:       resq 1                          ; the claim's next document
    .docend:    resq 1                          ; the claim's end
    .len:       resq 1                          ; the document's length
    .pos:       resq 1                          ; the split's start
    .n:         resq 1                          ; chunks of this split
    .o:         resq 1                          ; the document's first id
    .d:         resq 1                          ; the document
    .cache:     resq 1                          ; the cache, or 0
    .prof:      resq 1                          ; EF_PROFILE: keep cycles
    .t0:        resq 1                          ; rdtsc at the start
    .t1:        resq 1                          ; rdtsc at a phase's start
    .t2:        resq 1                          ; rdtsc before a miss
    .first:     resq 1                          ; the claim's first document:
                                                ; 1 (a room), 2 (thread 0's
                                                ; first: job.front); else 0
    .front:     resq 1                          ; thread 0: documents taken
                                                ; (from the front); others -1
    .safe:      resq 1                          ; a 16-byte store of ids at or
                                                ; below this stays in the room
    .seed:      resq 1                          ; the whole-token table
                resq 2                          ; (unused)
    .key:       resb 16 * EW_BUF                ; pass 1: each short chunk's
                                                ; key, 16 bytes
                resq 1                          ; (6 pushes + the frame: aligned)
endstruc
%if ew_frame.ends != 0
    %error "ew_frame: the chunk ends must be at rsp"
%endif

; PROF_START slot / PROF_ADD slot, field: with EF_PROFILE, [rsp + slot] =
; rdtsc, and [rbx + field] += rdtsc - [rsp + slot].  %1 = slot (an offset in
; ew_frame), %2 = field (an offset in the thread state).  Clobber rax, rdx.
%macro PROF_START 1
    cmp         qword [rsp + ew_frame.prof], 0
    je          %%off
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    mov         [rsp + %1], rax
%%off:
%endmacro
%macro PROF_ADD 2
    cmp         qword [rsp + ew_frame.prof], 0
    je          %%off
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    sub         rax, [rsp + %1]
    add         [rbx + %2], rax
%%off:
%endmacro

%define ew_job       r12   ; the job
%define ew_ts        rbx   ; this thread's state
%define ew_text      r13   ; the document's text (padded)
%define ew_w         r15   ; where its next id goes
%define ew_k         r14   ; the chunk (pass 1 and 2; its index, ew_frame.ends)
%define ew_kd        r14d  ; (ew_k, 32-bit)
%define ew_pos       rbp   ; the chunk's start in the text
%define ew_ent       r8    ; its entry (ew_frame.entry): 1 << 63 | id, its cache set, or 0
%define ew_entd      r8d   ; (ew_ent, 32-bit)
%define ew_entb      r8b   ; (ew_ent, 8-bit)
%define ew_cache     rdi   ; (pass 1) the cache
%define ew_seed      r10   ; (pass 1) the whole-token table
PROC enc_worker, 64
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, ew_frame_size
    mov         ew_job, rdi
    mov         rax, [ew_job + job.enc]
    mov         ew_ts, [rax + enc.ts + rsi * 8]
    mov         rax, [ew_job + job.flags]
    and         eax, EF_PROFILE
    mov         [rsp + ew_frame.prof], rax
    PROF_START  ew_frame.t0
    xor         eax, eax
    test        qword [ew_job + job.flags], EF_NOCACHE
    jnz         .no_cache
    mov         rax, [ew_ts + tstate.cache]
.no_cache:
    mov         [rsp + ew_frame.cache], rax
    mov         rdx, [ew_job + job.enc]
    mov         rdx, [rdx + enc.seed]
    mov         [rsp + ew_frame.seed], rdx
    neg         rsi                             ; tid 0 -> 0, others -> < 0
    sar         rsi, 63
    mov         [rsp + ew_frame.front], rsi
    cmp         qword [ew_ts + tstate.stale], 0 ; a state from the pool: its
    je          .claim                          ; cache cleared here, by its
    PROF_START  ew_frame.t1                     ; own thread (cache phase)
    mov         rdi, [ew_ts + tstate.cache]
    mov         ecx, CACHE_ENTRIES * centry_size / 8
    xor         eax, eax
    rep stosq
    mov         qword [ew_ts + tstate.stale], 0
    PROF_ADD    ew_frame.t1, tstate.cyc_pass
.claim:                                         ; k = (left / threads) / 4,
    mov         rax, [ew_job + job.ndocs]       ; 1..DOC_BLOCK (left: racy,
    sub         rax, [ew_job + job.next]        ; only a size hint)
    jbe         .done
    xor         edx, edx
    div         qword [ew_job + job.nth]
    shr         rax, 2
    mov         ecx, DOC_BLOCK
    cmp         rax, rcx
    cmova       rax, rcx
    mov         ecx, 1
    cmp         rax, rcx
    cmovb       rax, rcx
    mov         rcx, rax
    lock xadd   [ew_job + job.next], rax        ; documents claimed before
    mov         rdx, [ew_job + job.ndocs]
    sub         rdx, rax                        ; left
    jbe         .done
    cmp         rcx, rdx
    cmova       rcx, rdx                        ; this claim: rcx documents
    mov         rax, [rsp + ew_frame.front]
    test        rax, rax
    js          .back
    lea         rdx, [rax + rcx]                ; thread 0: [f, f + rcx), its
    mov         [rsp + ew_frame.front], rdx     ; ids after its last ones (the
    mov         [rsp + ew_frame.doc], rax       ; first from job.front), unmarked
    mov         [rsp + ew_frame.docend], rdx
    neg         rax                             ; ew_frame.first = f ? 0 : 2
    sbb         rax, rax
    add         rax, 1
    add         rax, rax
    mov         [rsp + ew_frame.first], rax
    jmp         .doc
.back:                                          ; the others: [e - rcx, e),
    mov         rax, rcx                        ; e = n - (documents taken
    lock xadd   [ew_job + job.back], rax        ; from the back before), in
    mov         rdx, [ew_job + job.ndocs]       ; the claim's room, its first
    sub         rdx, rax                        ; count marked
    mov         [rsp + ew_frame.docend], rdx
    sub         rdx, rcx
    mov         [rsp + ew_frame.doc], rdx
    mov         qword [rsp + ew_frame.first], 1
.doc:
    mov         rdx, [rsp + ew_frame.doc]
    cmp         rdx, [rsp + ew_frame.docend]
    jae         .claim
    mov         [rsp + ew_frame.d], rdx
    lea         rax, [rdx + 1]
    mov         [rsp + ew_frame.doc], rax
    mov         rcx, [ew_job + job.ends]
    xor         eax, eax
    test        rdx, rdx
    jz          .start
    mov         rax, [rcx + rdx * 8 - 8]
.start:
    mov         rsi, [rcx + rdx * 8]
    sub         rsi, rax
    mov         [rsp + ew_frame.len], rsi
    mov         ew_text, [ew_job + job.buf]
    test        qword [ew_job + job.flags], EF_DOCPTRS
    jnz         .doc_copy
    add         ew_text, rax                    ; the document's text
.have_text:
    cmp         qword [rsp + ew_frame.first], 1
    jb          .same_claim                     ; w: after the last document's
    ja          .front_start                    ; ids, the claim's room, or
    add         rax, rdx                        ; job.front
    mov         ew_w, [ew_job + job.out]
    lea         ew_w, [ew_w + rax * 2]
    jmp         .same_claim
.front_start:
    mov         ew_w, [ew_job + job.front]
.same_claim:
    mov         [rsp + ew_frame.o], ew_w
    mov         rax, [rsp + ew_frame.len]       ; room: len + 1 ids from w
    lea         rax, [ew_w + rax * 2 - 14]
    mov         [rsp + ew_frame.safe], rax
    test        qword [ew_job + job.flags], EF_BOS
    jz          .no_bos
    mov         rax, [ew_job + job.enc]
    mov         rax, [rax + enc.nmerges]
    add         eax, 256
    mov         [ew_w], ax
    add         ew_w, 2
.no_bos:
    mov         qword [rsp + ew_frame.pos], 0
.split:
    PROF_START  ew_frame.t1
    mov         rdi, ew_text
    mov         rsi, [rsp + ew_frame.len]
    mov         rdx, [rsp + ew_frame.pos]
    mov         rcx, rsp                        ; (ew_frame.ends)
    mov         r8, (1 << 63) | EW_BUF          ; (bit 63: stop short of a
    mov         r9, [ew_job + job.pretok]       ; window that would not fit)
    call        asmbpe_split_offsets
    mov         [rsp + ew_frame.n], rax
    add         [ew_ts + tstate.chunks], rax
    PROF_ADD    ew_frame.t1, tstate.cyc_pretok
    PROF_START  ew_frame.t1
    mov         ew_cache, [rsp + ew_frame.cache] ; pass 1: each chunk's entry
    test        ew_cache, ew_cache
    jz          .pass1_nocache
    mov         ew_pos, [rsp + ew_frame.pos]    ; chunk start
    mov         ew_seed, [rsp + ew_frame.seed]
    xor         ew_kd, ew_kd                    ; k
    cmp         ew_k, [rsp + ew_frame.n]
    jae         .pass2
.hash:
    mov         rax, [rsp + ew_frame.ends + ew_k * 8]
    mov         rdx, rax
    sub         rdx, ew_pos                     ; len
    lea         rsi, [ew_text + ew_pos]
    mov         ew_pos, rax
    cmp         rdx, SEED_MAX_LEN
    ja          .hash_long
    lea         r9, [mask_tab + 64]             ; 1..15 bytes, no branch: the
    sub         r9, rdx                         ; key (its masked 16 bytes,
    vmovdqu     xmm0, [rsi]                     ; past the chunk: text or
    vpand       xmm0, xmm0, [r9]                ; padding; its length in byte
    vpinsrb     xmm0, xmm0, edx, 15             ; 15), its hash
    SHORT_HASH  xmm0, ew_ent, rcx
    and         ew_entd, ~(CACHE_WAYS - 1)      ; the set / the slots' line
    shl         ew_ent, SD_SHIFT
    mov         r11, ew_k
    shl         r11, 4
    vmovdqu     [rsp + ew_frame.key + r11], xmm0
    prefetcht0  [ew_seed + ew_ent]
    or          ew_ent, 1                       ; (short: the line, tagged)
    mov         [rsp + ew_frame.entry + ew_k * 8], ew_ent
.hash_next:
    inc         ew_k
    cmp         ew_k, [rsp + ew_frame.n]
    jb          .hash
    xor         ew_kd, ew_kd                    ; pass 1b: the short chunks'
.seed:                                          ; lines, fetched by now
    mov         ew_ent, [rsp + ew_frame.entry + ew_k * 8]
    test        ew_entb, 1
    jz          .seed_next                      ; (longer: done)
    mov         r11, ew_k
    shl         r11, 4
    vmovdqu     xmm0, [rsp + ew_frame.key + r11]
    lea         rax, [ew_seed + ew_ent - 1]
    lea         ew_ent, [ew_cache + ew_ent * (centry_size / seedslot_size) - (centry_size / seedslot_size)]
    vpcmpeqb    xmm1, xmm0, [rax + seedslot.key] ; the set's way 0, unless
    vpcmpeqb    xmm2, xmm0, [rax + seedslot_size + seedslot.key] ; a slot holds the
    vpmovmskb   ecx, xmm1                       ; chunk
    vpmovmskb   r9d, xmm2
    cmp         ecx, 0xFFFF
    cmove       ew_ent, [rax + seedslot.val]    ; 1 << 63 | its id
    cmp         r9d, 0xFFFF
    cmove       ew_ent, [rax + seedslot_size + seedslot.val]
    mov         [rsp + ew_frame.entry + ew_k * 8], ew_ent
    prefetcht0  [ew_ent]                        ; (1 << 63 | id: not canonical,
    prefetcht0  [ew_ent + centry_size]          ; dropped)
.seed_next:
    inc         ew_k
    cmp         ew_k, [rsp + ew_frame.n]
    jb          .seed
    jmp         .pass2
.hash_long:                                     ; 16..48 bytes: HASH_BYTES;
    xor         ew_entd, ew_entd                ; longer: 0 (not cached)
    cmp         rdx, CACHE_MAX_LEN
    ja          .long_entry
    HASH_BYTES  rsi, rdx, ew_ent, r9, rax
    and         ew_entd, (CACHE_ENTRIES - 1) & ~(CACHE_WAYS - 1)
    shl         ew_ent, CE_SHIFT
    add         ew_ent, ew_cache
    prefetcht0  [ew_ent]
    prefetcht0  [ew_ent + centry_size]
.long_entry:
    mov         [rsp + ew_frame.entry + ew_k * 8], ew_ent
    jmp         .hash_next
.pass1_nocache:                                 ; no cache: one byte, 1 << 63
    mov         ew_pos, [rsp + ew_frame.pos]    ; | byte; the rest 0
    xor         ew_kd, ew_kd
.nc_chunk:
    cmp         ew_k, [rsp + ew_frame.n]
    jae         .pass2
    mov         rax, [rsp + ew_frame.ends + ew_k * 8]
    mov         rdx, rax
    sub         rdx, ew_pos
    movzx       ecx, byte [ew_text + ew_pos]
    bts         rcx, 63
    xor         ew_entd, ew_entd
    cmp         rdx, 1
    cmove       ew_ent, rcx
    mov         ew_pos, rax
    mov         [rsp + ew_frame.entry + ew_k * 8], ew_ent
    inc         ew_k
    jmp         .nc_chunk
.pass2:                                         ; pass 2: the ids
    xor         ew_kd, ew_kd                    ; k
.chunk:
    cmp         ew_k, [rsp + ew_frame.n]
    jae         .chunks_done
    mov         ew_ent, [rsp + ew_frame.entry + ew_k * 8]
    inc         ew_k
    test        ew_ent, ew_ent
    jns         .lookup
    mov         [ew_w], r8w                     ; one id
    add         ew_w, 2
    jmp         .chunk
.lookup:
    mov         ew_pos, [rsp + ew_frame.pos]    ; the chunk: from the end of
    cmp         ew_k, 1                         ; the one before
    je          .chunk_start
    mov         ew_pos, [rsp + ew_frame.ends + ew_k * 8 - 16]
.chunk_start:
    lea         rsi, [ew_text + ew_pos]
    mov         rdx, [rsp + ew_frame.ends + ew_k * 8 - 8]
    sub         rdx, ew_pos                     ; len
    test        ew_ent, ew_ent
    jz          .uncached
    lea         r9, [mask_tab + 64]
    sub         r9, rdx
    ENTRY_EQ    ew_ent, .way1
.hit:
    movzx       eax, byte [ew_ent + centry.ntok]
    cmp         ew_w, [rsp + ew_frame.safe]     ; room for a 16-byte store?
    ja          .hit_small
    vmovdqu     xmm0, [ew_ent + centry.tok]
    vmovdqu     [ew_w], xmm0
    lea         ew_w, [ew_w + rax * 2]
    jmp         .chunk
.hit_small:
    movzx       ecx, word [ew_ent + centry.tok]
    mov         [ew_w], cx
    add         ew_ent, 2
    add         ew_w, 2
    dec         eax
    jnz         .hit_small
    jmp         .chunk
.way1:                                          ; the set's other entry
    add         ew_ent, centry_size
    ENTRY_EQ    ew_ent, .miss1
    vmovdqu     ymm0, [ew_ent]                  ; found: the two swap, so
    vmovdqu     ymm1, [ew_ent + 32]             ; that way 0 holds the last
    vmovdqu     ymm2, [ew_ent - centry_size]    ; used
    vmovdqu     ymm3, [ew_ent - centry_size + 32]
    vmovdqu     [ew_ent - centry_size], ymm0
    vmovdqu     [ew_ent - centry_size + 32], ymm1
    vmovdqu     [ew_ent], ymm2
    vmovdqu     [ew_ent + 32], ymm3
    sub         ew_ent, centry_size
    jmp         .hit
.miss1:
    sub         ew_ent, centry_size             ; (chunk_miss: way 0)
.miss:
    inc         qword [ew_ts + tstate.encoded]
    cmp         qword [rsp + ew_frame.prof], 0
    jne         .miss_timed
    mov         rdi, ew_w
    call        chunk_miss
    mov         ew_w, rdi
    jmp         .chunk
.uncached:
    cmp         qword [rsp + ew_frame.cache], 0 ; cached calls: a run of one
    je          .not_memo                       ; byte may be in the memo
    mov         rdi, ew_w
    call        run_memo
    test        rax, rax
    jz          .not_memo
    mov         ew_w, rdi
    jmp         .chunk
.not_memo:
    inc         qword [ew_ts + tstate.encoded]
    cmp         qword [rsp + ew_frame.prof], 0
    jne         .uncached_timed
    mov         rdi, ew_w
    call        chunk_uncached
    mov         ew_w, rdi
    jmp         .chunk
.miss_timed:
    lea         r10, [chunk_miss]
    jmp         .timed
.uncached_timed:
    lea         r10, [chunk_uncached]
.timed:                                         ; EF_PROFILE: time the call
    mov         r9, rdx
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    mov         [rsp + ew_frame.t2], rax
    mov         rdx, r9
    mov         rdi, ew_w
    call        r10
    mov         ew_w, rdi
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    sub         rax, [rsp + ew_frame.t2]
    add         [ew_ts + tstate.cyc_merge], rax
    jmp         .chunk
.chunks_done:
    PROF_ADD    ew_frame.t1, tstate.cyc_pass
    mov         rax, [rsp + ew_frame.n]
    test        rax, rax
    jz          .doc_done
    mov         rax, [rsp + ew_frame.ends + rax * 8 - 8] ; the last chunk's end: the
    cmp         rax, [rsp + ew_frame.len]       ; next split's start, unless
    jae         .doc_done                       ; the document is done
    mov         [rsp + ew_frame.pos], rax
    jmp         .split
.doc_done:
    mov         rax, ew_w
    sub         rax, [rsp + ew_frame.o]
    shr         rax, 1
    mov         rcx, [rsp + ew_frame.first]
    mov         qword [rsp + ew_frame.first], 0
    cmp         rcx, 1                          ; a room's first document:
    jne         .count                          ; bit 63 of its count, for the
    bts         rax, 63                         ; move (which clears it)
.count:
    mov         rcx, [ew_job + job.counts]
    mov         rdx, [rsp + ew_frame.d]
    mov         [rcx + rdx * 8], rax
    jmp         .doc
.doc_copy:                                      ; asmbpe_encode_docs: the
    mov         r14, rax                        ; document (r13[d], ew_frame.len
    mov         rbp, rdx                        ; bytes) into tstate.doc, padded
    PROF_START  ew_frame.t1                     ; (rax, rdx kept in r14, rbp;
    mov         rsi, [rsp + ew_frame.len]       ; the copy, and growing tstate.doc,
    lea         rax, [rsi + 2 * PAD + 64]       ; count as pre-tokenizing)
    cmp         rax, [ew_ts + tstate.doccap]
    jbe         .doc_room
    mov         rdi, [ew_ts + tstate.doc]       ; grow
    mov         rsi, [ew_ts + tstate.doccap]
    call        asmbpe_unmap
    mov         qword [ew_ts + tstate.doc], 0
    mov         qword [ew_ts + tstate.doccap], 0
    mov         rdi, [rsp + ew_frame.len]
    add         rdi, 2 * PAD + 64 + DOC_GRAIN - 1
    and         rdi, -DOC_GRAIN
    mov         [rsp + ew_frame.t2], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .doc_enomem
    mov         [ew_ts + tstate.doc], rax
    mov         rax, [rsp + ew_frame.t2]
    mov         [ew_ts + tstate.doccap], rax
    mov         ew_text, [ew_job + job.buf]
.doc_room:
    mov         rsi, [ew_text + rbp * 8]
    mov         rdi, [ew_ts + tstate.doc]
    add         rdi, PAD
    mov         ew_text, rdi                    ; the text: the copy
    mov         rcx, [rsp + ew_frame.len]
    rep movsb
    PROF_ADD    ew_frame.t1, tstate.cyc_pretok
    mov         rax, r14
    mov         rdx, rbp
    jmp         .have_text
.doc_enomem:
    mov         qword [ew_job + job.status], ASMBPE_ENOMEM
.done:
    vzeroupper
    PROF_ADD    ew_frame.t0, tstate.cyc_total
    add         rsp, ew_frame_size
    RESTORE
ENDPROC
%undef ew_job
%undef ew_ts
%undef ew_text
%undef ew_w
%undef ew_k
%undef ew_kd
%undef ew_pos
%undef ew_ent
%undef ew_entd
%undef ew_entb
%undef ew_cache
%undef ew_seed
