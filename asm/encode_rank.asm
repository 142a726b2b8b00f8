;-----------------------------------------------------------------------------
; encode_rank.asm — the rank encoder (SPEC §11): vocabularies that asmbpe did
; not train (tiktoken rank files, Hugging Face tokenizer.json), u32 ids.
;
; A chunk that is itself a token is that token (RF_WHOLE: tiktoken always,
; HF with ignore_merges).  Otherwise it starts as the ids of its bytes (any
; ids: cl100k's "!" is 0) and the adjacent pair of lowest priority merges,
; leftmost first, one merge at a time, until no adjacent pair is in the pair
; table.  The caller (harness.vocab.pair_table) gives the table: for a rank
; file every split of a token into two tokens, priority = result = its rank;
; for HF each merge, priority = its number.
;
;   asmbpe_renc_new / _free   the pair hash (8-byte slots: a 40-bit key
;                             left << 20 | right and a 24-bit priority; the
;                             results in renc.res), the whole-token tables,
;                             the byte pairs, the bytes
;   asmbpe_renc_chunk         one chunk -> ids (rk_chunk), thread state 0
;   asmbpe_renc_text          a padded text: split, then each chunk (state 0)
;   asmbpe_renc_encode        documents on threads (rk_worker), ids moved
;                             into document order at the end
;
;   asmbpe_renc_decode        ids -> bytes through the token table
;
; Each thread index has a state (rts, mapped on first use, kept with the
; encoder): a chunk cache (RC_ENTRIES entries of 64 bytes in sets of two:
; chunks of 2..RC_MAX_LEN bytes with at most RC_MAX_TOK ids, keyed by their
; zero-padded bytes and length), a pair cache in front of the pair table,
; rk_chunk's scratch and the split's ends.  rk_doc looks a batch of chunks
; up at a time, their lines prefetched first: one byte is its id, a whole
; token of up to WT_MAX_LEN bytes is found in renc.wt (RF_WHOLE), the rest
; go to rk_chunk.  A chunk not in the cache: the whole-token tables
; (RF_WHOLE), then merging (renc.bp gives the first pairs):
; up to RK_SHORT bytes arrays id / prio / result and a scan for the lowest
; priority per merge (tiktoken's way, fast when short); longer ones a
; min-heap of (priority << 32 | position) over a linked list, stale entries
; skipped when popped, O(n log n): a 1 MB run of one letter stays fast.
;
; Not yet: the asmbpe_encode integration (the merge-table encoder of SPEC
; §6 stays the path for asmbpe's own vocabularies).  Calls on one encoder
; must not overlap (the thread states are the encoder's).
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"

extern asmbpe_split_offsets
extern mask_tab

%define NO_PRIO     0xFFFFFFFF      ; no pair / empty
%define RK_SHORT    128             ; chunks up to this: the scan
%define RK_GOLD     0x9E3779B97F4A7C15
%define RK_MAX_TOK  0xFFFFF         ; tokens (ids < 2^20 - 1: 20-bit key fields)
%define RK_SPLITS   4096            ; chunk ends per asmbpe_split_offsets call
%define RK_BATCH    64              ; rk_doc: chunks whose lines are prefetched
                                    ; before they are looked up
%define RF_WHOLE    1               ; flags: a chunk that is a token is it
%define RC_ENTRIES  131072          ; chunk cache entries per thread (8 MB),
%define RC_SETS     (RC_ENTRIES / 2) ; in sets of two (way 0: the last used)
%define RC_MAX_LEN  32              ; chunks cached: 2..RC_MAX_LEN bytes
%define RC_MAX_TOK  7               ; ... of at most this many ids
%define WT_MAX_LEN  11              ; whole tokens with their bytes in the slot
%define WT_LENB     11              ; the key's length byte
%define WT_SHIFT    4               ; log2(wtslot_size)
%define BP_BYTES    (65536 * 8)     ; renc.bp: the pair of every two bytes
%define PC_BITS     14              ; the pair cache: 16,384 entries of 16 bytes

; the encoder object
struc renc
    .slots:     resq 1              ; pair slots: u64 (left << 20 | right) |
                                    ; priority << 40, ~0: empty
    .smask:     resq 1              ; slot bytes - 1 (slots * 8 - 1)
    .shift:     resq 1              ; 64 - log2(slots)
    .sbytes:    resq 1              ; bytes mapped for the slots
    .wslots:    resq 1              ; tokens over WT_MAX_LEN: {u32 id, u32 crc}, id
                                    ; ~0: empty; 0 without RF_WHOLE
    .wmask:     resq 1              ; whole slots - 1
    .wbytes:    resq 1              ; bytes mapped for them
    .res:       resq 1              ; u32 the result of each priority [ntok]
    .rbytes:    resq 1              ; bytes mapped for it
    .tokoff:    resq 1              ; u64 offsets [ntok + 1] (a copy)
    .tokbytes:  resq 1              ; token bytes (a copy, PAD around)
    .tbytes:    resq 1              ; bytes mapped for both
    .ntok:      resq 1
    .flags:     resq 1
    .bp:        resq 1              ; each byte pair b0 | b1 << 8: {u32
                                    ; priority, u32 result} (BP_BYTES)
    .wt:        resq 1              ; RF_WHOLE: tokens of 2..WT_MAX_LEN bytes,
                                    ; wtslot each (hash SHORT_KEY), or 0
    .wtmask:    resq 1              ; its slots - 1
    .wtbytes:   resq 1              ; bytes mapped for it
    .byteid:    resd 256            ; the id of each byte
    .ts:        resq MAX_THREADS    ; each thread index's state, or 0
endstruc

; a whole-token slot: the token's bytes zero-padded to 11 and its length in
; byte 11 (one compare of 12 bytes; length 0: empty), its id
struc wtslot
    .key:       resb 12
    .id:        resd 1
endstruc
%if wtslot_size != 1 << WT_SHIFT
    %error "wtslot: not 1 << WT_SHIFT bytes"
%endif

; a thread index's state (its own mapping, rounded up to pages)
struc rts
    .enc:       resq 1              ; the encoder
    .cache:     resq 1              ; RC_ENTRIES rcent, or 0 (mapped on use)
    .scratch:   resq 1              ; rk_chunk's arrays, or 0
    .scrbytes:  resq 1              ; bytes mapped for them
    .lnext:     resq 1              ; long path: next[], prev[], prio[],
    .lprev:     resq 1              ; result[] (in the scratch)
    .lprio:     resq 1
    .lres:      resq 1
    .outlim:    resq 1              ; the end of rk_chunk's out room (bytes)
    .bend:      resq 1              ; rk_doc: the end of the batch of chunks
    .ends:      resq RK_SPLITS      ; a document's chunk ends
    alignb 64
    .pc:        resq 2 << PC_BITS   ; the pair cache: {u64 key (~0: empty),
                                    ; u32 priority, u32 result} by the key's
                                    ; hash, in front of the pair table
endstruc

; a chunk cache entry: the chunk's bytes zero-padded, its length, its ids
struc rcent
    .key:       resb RC_MAX_LEN
    .len:       resb 1              ; 0: empty
    .ntok:      resb 1
                resb 2
    .ids:       resd RC_MAX_TOK
endstruc
%if rcent_size != 64
    %error "rcent: not 64 bytes"
%endif

; the job of one asmbpe_renc_encode call (on its stack)
struc rjob
    .enc:       resq 1
    .text:      resq 1
    .ends:      resq 1              ; doc_ends
    .ndocs:     resq 1
    .pretok:    resq 1
    .out:       resq 1
    .counts:    resq 1
    .next:      resq 1              ; documents claimed (atomic)
    .status:    resq 1              ; 0, or ASMBPE_ENOMEM from a thread
endstruc

section .text

;-----------------------------------------------------------------------------
; RPROBE enc: rcx = a pair's key (left << 20 | right) -> eax = its priority,
; NO_PRIO if none; edx = its result (renc.res[priority]; %1 = a register
; holding the encoder).  Slots are u64 key | priority << 40, ~0: empty.
; Needs r8 = slots, r9 = smask, r10 = shift.  Keeps rcx; clobbers r11.
;-----------------------------------------------------------------------------
%macro RPROBE 1
    mov         r11, RK_GOLD
    imul        r11, rcx
    shrx        r11, r11, r10
    shl         r11, 3                          ; its home slot (bytes)
%%probe:
    mov         rax, [r8 + r11]
    cmp         rax, -1
    je          %%none
    mov         rdx, rax
    xor         rdx, rcx
    shl         rdx, 24                         ; the key's 40 bits equal?
    jz          %%hit
    add         r11, 8
    and         r11, r9
    jmp         %%probe
%%hit:
    shr         rax, 40                         ; the priority
    mov         r11, [%1 + renc.res]
    mov         edx, [r11 + rax * 4]            ; the result
    jmp         %%done
%%none:
    mov         eax, NO_PRIO
%%done:
%endmacro

; RPROBE_TS: RPROBE through the thread's pair cache (rbx = its state): a
; pair found there (or known not to be a pair) costs one load that is
; mostly in L2; otherwise the pair table answers and the entry is
; overwritten.  Keeps rcx; clobbers r11; eax = priority, edx = result (the
; top of rax is not zero).
%macro RPROBE_TS 0
    mov         r11, RK_GOLD
    imul        r11, rcx
    mov         rax, r11
    shr         rax, 64 - PC_BITS
    shl         eax, 4
    lea         rax, [rbx + rts.pc + rax]       ; its pair cache entry
    cmp         rcx, [rax]
    jne         %%table
    mov         edx, [rax + 12]
    mov         eax, [rax + 8]
    jmp         %%done
%%table:
    push        rax
    shrx        r11, r11, r10
    shl         r11, 3                          ; its home slot (bytes)
%%probe:
    mov         rax, [r8 + r11]
    cmp         rax, -1
    je          %%none
    mov         rdx, rax
    xor         rdx, rcx
    shl         rdx, 24                         ; the key's 40 bits equal?
    jz          %%hit
    add         r11, 8
    and         r11, r9
    jmp         %%probe
%%hit:
    shr         rax, 40                         ; the priority
    mov         r11, [rbx + rts.enc]
    mov         r11, [r11 + renc.res]
    mov         edx, [r11 + rax * 4]            ; the result
    shl         rdx, 32
    or          rax, rdx                        ; priority | result << 32
    jmp         %%fill
%%none:
    mov         eax, NO_PRIO
%%fill:
    pop         r11
    mov         [r11], rcx
    mov         [r11 + 8], rax
    mov         rdx, rax
    shr         rdx, 32
%%done:
%endmacro

; PKEY left, right: rcx = the key of the pair (left << 20 | right); %1, %2:
; 32-bit memory operands or registers (not ecx, r11d).  Clobbers r11.
%macro PKEY 2
    mov         ecx, %1
    shl         rcx, 20
    mov         r11d, %2
    or          rcx, r11
%endmacro

; WT_HASH key, out: out = crc32c of the two qwords of xmm key (out a 64-bit
; register other than r11, zeroed first).  Clobbers r11.
%macro WT_HASH 2
    xor         %2, %2
    vmovq       r11, %1
    crc32       %2, r11
    vpextrq     r11, %1, 1
    crc32       %2, r11
%endmacro

; WT_LOOKUP found: is the chunk rsi (rdx = its length, 2..WT_MAX_LEN, PAD
; readable after it) a token in rdi's whole-token slots (renc.wt, not 0)?
; Yes: eax = its id, jumps to %1; no: falls through.  Clobbers rax, rdi,
; r9-r11, xmm0, xmm1.
%macro WT_LOOKUP 1
    mov         r9, [rdi + renc.wt]
    lea         rax, [mask_tab + 64]            ; its key: the bytes zero-
    sub         rax, rdx                        ; padded, the length in
    vmovdqu     xmm1, [rax]                     ; byte 11 (bytes 12-15 zero)
    vpand       xmm0, xmm1, [rsi]
    vpinsrb     xmm0, xmm0, edx, WT_LENB
    WT_HASH     xmm0, r10
    mov         r11, [rdi + renc.wtmask]
%%probe:
    and         r10, r11
    mov         rax, r10
    shl         rax, WT_SHIFT
    add         rax, r9                         ; its slot
    vpcmpeqb    xmm1, xmm0, [rax]
    vpmovmskb   edi, xmm1
    and         edi, 0xFFF                      ; (bytes 12-15: the id)
    cmp         edi, 0xFFF
    je          %%hit
    cmp         byte [rax + WT_LENB], 0
    je          %%none                          ; empty: not a token
    inc         r10
    jmp         %%probe
%%hit:
    mov         eax, [rax + wtslot.id]
    jmp         %1
%%none:
%endmacro

; CACHE_SET p, n: the cache set of a chunk of 2..RC_MAX_LEN bytes.  %1 = p,
; %2 = n (64-bit registers, kept; PAD readable after p), rbx = the thread
; state.  Out: ymm0 = its key (the bytes zero-padded), rcx = its set.
; Clobbers rax, ymm1, ymm2.
%macro CACHE_SET 2
    lea         rax, [mask_tab + 64]
    sub         rax, %2
    vmovdqu     ymm1, [rax]                     ; first n bytes 0xFF
    vpand       ymm0, ymm1, [%1]                ; the key
    vextracti128 xmm2, ymm0, 1
    vpxor       xmm2, xmm2, xmm0
    vmovq       rax, xmm2
    mov         rcx, %2
    crc32       rcx, rax
    vpextrq     rax, xmm2, 1
    crc32       rcx, rax
    and         ecx, RC_SETS - 1
    shl         rcx, 7
    add         rcx, [rbx + rts.cache]          ; its set
%endmacro

; CRC_BYTES p, n, out32: out = crc32c of n bytes at p (8 at a time, then the
; rest byte by byte).  %1 = p, %2 = n (64-bit registers, kept), %3 = out (a
; 64-bit register).  Clobbers rcx, r11.
%macro CRC_BYTES 3
    mov         %3, %2                          ; seeded with the length
    xor         ecx, ecx
%%q:
    lea         r11, [rcx + 8]
    cmp         r11, %2
    ja          %%b
    crc32       %3, qword [%1 + rcx]
    mov         rcx, r11
    jmp         %%q
%%b:
    cmp         rcx, %2
    jae         %%done
    crc32       %3, byte [%1 + rcx]
    inc         rcx
    jmp         %%b
%%done:
%endmacro

;-----------------------------------------------------------------------------
; asmbpe_renc *asmbpe_renc_new(const uint32_t *pairs, uint64_t n_pairs,
;                              const uint32_t *byte_ids,
;                              const uint8_t *tok_bytes,
;                              const uint64_t *tok_offsets, uint64_t n_tokens,
;                              uint64_t flags)
; pairs: n_pairs rows {left, right, priority, result} (no pair twice, ids
; and priorities < n_tokens <= RK_MAX_TOK, one result per priority: the
; slots keep the priority, renc.res the result); byte_ids[256]; token i is
; tok_bytes[tok_offsets[i], tok_offsets[i + 1]).  flags: RF_WHOLE.  NULL
; when out of memory or an argument is out of range.
;-----------------------------------------------------------------------------
%define nw_pairs    rbx
%define nw_n        rbp
%define nw_enc      r14
%define nw_i        r15
%define nw_t        r12
%define nw_t2       r13
FUNC asmbpe_renc_new, 7, 15, 1, pairs, npairs, byteids, tokbytes, tokoff, ntok, flags
    mov         nw_t2, flagsm
    push        tokoffq
    push        tokbytesq
    push        ntokq
    push        byteidsq
    mov         nw_pairs, pairsq
    mov         nw_n, npairsq
    xor         eax, eax
    mov         rcx, ntokq
    dec         rcx
    cmp         rcx, RK_MAX_TOK                 ; 1 <= n_tokens <= RK_MAX_TOK
    jae         .bad
    mov         edi, (renc_size + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .bad
    mov         nw_enc, rax
    mov         rax, [rsp]                      ; byte ids
    lea         rdi, [nw_enc + renc.byteid]
    mov         rsi, rax
    mov         ecx, 256
    rep movsd
    mov         rax, [rsp + 8]
    mov         [nw_enc + renc.ntok], rax
    mov         rax, nw_t2
    and         eax, RF_WHOLE
    mov         [nw_enc + renc.flags], rax

    ; the pair slots: a power of two >= 2 n, at least 1024
    lea         rax, [nw_n * 2]
    mov         ecx, 10
.size:
    mov         edx, 1
    shl         rdx, cl
    cmp         rdx, rax
    jae         .sized
    inc         ecx
    jmp         .size
.sized:
    mov         eax, 64
    sub         eax, ecx
    mov         [nw_enc + renc.shift], rax
    shl         rdx, 3
    lea         rax, [rdx - 1]
    mov         [nw_enc + renc.smask], rax
    mov         [nw_enc + renc.sbytes], rdx
    mov         rdi, rdx
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.slots], rax
    mov         rdi, rax
    mov         rcx, [nw_enc + renc.sbytes]
    shr         rcx, 3
    mov         rax, -1
    rep stosq                                   ; every key ~0 (and the rest)
    mov         rdi, [nw_enc + renc.ntok]       ; the result of each priority
    lea         rdi, [rdi * 4 + 4095]
    and         rdi, ~4095
    mov         [nw_enc + renc.rbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.res], rax
    mov         r8, [nw_enc + renc.slots]
    mov         r9, [nw_enc + renc.smask]
    mov         r10, [nw_enc + renc.shift]
    xor         nw_i, nw_i
.insert:
    cmp         nw_i, nw_n
    jae         .inserted
    PKEY        [nw_pairs], [nw_pairs + 4]      ; left << 20 | right
    mov         eax, [nw_pairs + 8]             ; priority (< n_tokens)
    mov         edx, [nw_pairs + 12]            ; result
    mov         r11, [nw_enc + renc.res]
    mov         [r11 + rax * 4], edx
    shl         rax, 40
    or          rax, rcx                        ; the slot
    mov         r11, RK_GOLD
    imul        r11, rcx
    shrx        r11, r11, r10
    shl         r11, 3
.probe:
    cmp         qword [r8 + r11], -1
    je          .free
    add         r11, 8
    and         r11, r9
    jmp         .probe
.free:
    mov         [r8 + r11], rax
    add         nw_pairs, 16
    inc         nw_i
    jmp         .insert
.inserted:
    ; the byte pairs: the table's answer for every two bytes, by b0 | b1 << 8
    mov         edi, BP_BYTES
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.bp], rax
    mov         r8, [nw_enc + renc.slots]
    mov         r9, [nw_enc + renc.smask]
    mov         r10, [nw_enc + renc.shift]
    xor         nw_i, nw_i
.bpair:
    movzx       eax, r15b                       ; b0 (nw_i's low byte)
    mov         ecx, [nw_enc + renc.byteid + rax * 4]
    shl         rcx, 20
    mov         eax, r15d
    shr         eax, 8                          ; b1
    mov         eax, [nw_enc + renc.byteid + rax * 4]
    or          rcx, rax
    RPROBE      nw_enc
    mov         r11, [nw_enc + renc.bp]
    mov         [r11 + nw_i * 8], eax
    mov         [r11 + nw_i * 8 + 4], edx
    inc         nw_i
    cmp         nw_i, 65536
    jb          .bpair

    ; the token bytes and offsets: one mapping, offsets first, PAD around
    ; the bytes
    mov         rcx, [nw_enc + renc.ntok]
    mov         rax, [rsp + 24]                 ; tok_offsets
    mov         nw_t, [rax + rcx * 8]           ; bytes in all
    lea         rdi, [rcx * 8 + 8 + 2 * PAD]
    add         rdi, nw_t
    add         rdi, 4095
    and         rdi, ~4095
    mov         [nw_enc + renc.tbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.tokoff], rax
    mov         rdi, rax
    mov         rsi, [rsp + 24]
    mov         rcx, [nw_enc + renc.ntok]
    inc         rcx
    rep movsq
    add         rdi, PAD
    mov         [nw_enc + renc.tokbytes], rdi
    mov         rsi, [rsp + 16]                 ; tok_bytes
    mov         rcx, nw_t
    rep movsb

    ; the whole-token slots (RF_WHOLE): tokens of 2+ bytes by crc32c
    test        qword [nw_enc + renc.flags], RF_WHOLE
    jz          .done
    mov         rax, [nw_enc + renc.ntok]
    add         rax, rax
    mov         ecx, 10
.wsize:
    mov         edx, 1
    shl         rdx, cl
    cmp         rdx, rax
    jae         .wsized
    inc         ecx
    jmp         .wsize
.wsized:
    lea         rax, [rdx - 1]
    mov         [nw_enc + renc.wmask], rax
    lea         rdi, [rdx * 8]
    mov         [nw_enc + renc.wbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.wslots], rax
    mov         rdi, rax
    mov         rcx, [nw_enc + renc.wbytes]
    shr         rcx, 3
    mov         rax, -1
    rep stosq
    xor         nw_i, nw_i
.winsert:
    cmp         nw_i, [nw_enc + renc.ntok]
    jae         .winserted
    mov         rax, [nw_enc + renc.tokoff]
    mov         rsi, [rax + nw_i * 8]
    mov         nw_t2, [rax + nw_i * 8 + 8]
    sub         nw_t2, rsi                      ; its length
    cmp         nw_t2, WT_MAX_LEN               ; (shorter ones: renc.wt)
    jbe         .wnext
    add         rsi, [nw_enc + renc.tokbytes]
    CRC_BYTES   rsi, nw_t2, rax
    mov         rdx, [nw_enc + renc.wslots]
    mov         r9, [nw_enc + renc.wmask]
    mov         ecx, eax
    and         rcx, r9
.wprobe:
    cmp         dword [rdx + rcx * 8], NO_PRIO
    je          .wfree
    inc         rcx
    and         rcx, r9
    jmp         .wprobe
.wfree:
    mov         [rdx + rcx * 8], r15d           ; (nw_i)
    mov         [rdx + rcx * 8 + 4], eax
.wnext:
    inc         nw_i
    jmp         .winsert
.winserted:
    ; the whole-token slots with the bytes in them: tokens of 2..WT_MAX_LEN
    mov         rax, [nw_enc + renc.ntok]
    add         rax, rax
    mov         ecx, 10
.tsize:
    mov         edx, 1
    shl         rdx, cl
    cmp         rdx, rax
    jae         .tsized
    inc         ecx
    jmp         .tsize
.tsized:
    lea         rax, [rdx - 1]
    mov         [nw_enc + renc.wtmask], rax
    shl         rdx, WT_SHIFT
    mov         [nw_enc + renc.wtbytes], rdx
    mov         rdi, rdx
    call        asmbpe_map                      ; zeroed: every slot empty
    test        rax, rax
    jz          .fail
    mov         [nw_enc + renc.wt], rax
    xor         nw_i, nw_i
.tinsert:
    cmp         nw_i, [nw_enc + renc.ntok]
    jae         .done
    mov         rax, [nw_enc + renc.tokoff]
    mov         rsi, [rax + nw_i * 8]
    mov         rdx, [rax + nw_i * 8 + 8]
    sub         rdx, rsi                        ; its length
    cmp         rdx, 2
    jb          .tnext
    cmp         rdx, WT_MAX_LEN
    ja          .tnext
    add         rsi, [nw_enc + renc.tokbytes]
    lea         rax, [mask_tab + 64]
    sub         rax, rdx
    vmovdqu     xmm1, [rax]
    vpand       xmm0, xmm1, [rsi]               ; (PAD after the bytes)
    vpinsrb     xmm0, xmm0, edx, WT_LENB        ; the key
    WT_HASH     xmm0, rcx
    mov         r8, [nw_enc + renc.wt]
    mov         r9, [nw_enc + renc.wtmask]
.tprobe:
    and         rcx, r9
    mov         rax, rcx
    shl         rax, WT_SHIFT
    cmp         byte [r8 + rax + WT_LENB], 0
    je          .tfree
    inc         rcx
    jmp         .tprobe
.tfree:
    vmovdqu     [r8 + rax], xmm0
    mov         [r8 + rax + wtslot.id], r15d    ; (nw_i)
.tnext:
    inc         nw_i
    jmp         .tinsert
.done:
    mov         rax, nw_enc
    add         rsp, 32
    RET
.fail:
    mov         rdi, nw_enc
    call        asmbpe_renc_free_impl
.bad:
    xor         eax, eax
    add         rsp, 32
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; void asmbpe_renc_free(asmbpe_renc *e): everything it mapped (NULL: nothing).
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_free, 1, 10, 0, e
    call        asmbpe_renc_free_impl
    RET
ENDFUNC

; asmbpe_renc_free_impl: rdi = the encoder or 0: its tables, its thread
; states (cache, scratch) and itself unmapped.  Keeps rbx, rbp, r12-r15;
; clobbers the other registers.
asmbpe_renc_free_impl:
    test        rdi, rdi
    jz          .ret
    push        rbx
    push        r12
    push        r13
    mov         rbx, rdi
    xor         r12d, r12d
.states:
    mov         r13, [rbx + renc.ts + r12 * 8]
    test        r13, r13
    jz          .next_state
    mov         rdi, [r13 + rts.cache]
    mov         esi, RC_ENTRIES * rcent_size + 4096
    call        .unmap
    mov         rdi, [r13 + rts.scratch]
    mov         rsi, [r13 + rts.scrbytes]
    call        .unmap
    mov         rdi, r13
    mov         esi, (rts_size + 4095) & ~4095
    call        .unmap
.next_state:
    inc         r12
    cmp         r12, MAX_THREADS
    jb          .states
    mov         rdi, [rbx + renc.slots]
    mov         rsi, [rbx + renc.sbytes]
    call        .unmap
    mov         rdi, [rbx + renc.wslots]
    mov         rsi, [rbx + renc.wbytes]
    call        .unmap
    mov         rdi, [rbx + renc.wt]
    mov         rsi, [rbx + renc.wtbytes]
    call        .unmap
    mov         rdi, [rbx + renc.bp]
    mov         esi, BP_BYTES
    call        .unmap
    mov         rdi, [rbx + renc.res]
    mov         rsi, [rbx + renc.rbytes]
    call        .unmap
    mov         rdi, [rbx + renc.tokoff]
    mov         rsi, [rbx + renc.tbytes]
    call        .unmap
    mov         rdi, rbx
    mov         esi, (renc_size + 4095) & ~4095
    call        .unmap
    pop         r13
    pop         r12
    pop         rbx
.ret:
    ret
.unmap:                                         ; rdi = address or 0, rsi
    test        rdi, rdi
    jz          .ret
    jmp         asmbpe_unmap

;-----------------------------------------------------------------------------
; rk_state: rdi = the encoder, rsi = a thread index.  Out: rax = its state
; (made on first use, its cache mapped), 0 when out of memory.  Keeps rbx,
; rbp, r12-r15; clobbers the other registers.
;-----------------------------------------------------------------------------
rk_state:
    mov         rax, [rdi + renc.ts + rsi * 8]
    test        rax, rax
    jnz         .ret
    push        rbx
    push        r12
    push        r13
    mov         rbx, rdi
    mov         r12, rsi
    mov         edi, (rts_size + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .out
    mov         r13, rax
    mov         [r13 + rts.enc], rbx
    lea         rdi, [r13 + rts.pc]             ; every pair cache key ~0
    mov         ecx, 2 << PC_BITS
    mov         rax, -1
    rep stosq
    mov         edi, RC_ENTRIES * rcent_size + 4096 ; zeroed: every entry
                                                ; empty (+ a page: 32-byte
                                                ; loads of the last ids)
    call        asmbpe_map
    test        rax, rax
    jz          .no_cache
    mov         [r13 + rts.cache], rax
    mov         [rbx + renc.ts + r12 * 8], r13
    mov         rax, r13
.out:
    pop         r13
    pop         r12
    pop         rbx
.ret:
    ret
.no_cache:
    mov         rdi, r13
    mov         esi, (rts_size + 4095) & ~4095
    call        asmbpe_unmap
    xor         eax, eax
    jmp         .out

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_chunk(asmbpe_renc *e, const uint8_t *chunk, size_t len,
;                           uint32_t *out)
; The ids of one chunk (len >= 1 bytes, PAD readable after it) into out (room
; for len ids), with thread state 0.  Returns the ids written, or
; ASMBPE_ENOMEM.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_chunk, 4, 15, 1, e, chunk, len, out
    mov         r12, chunkq
    mov         r13, lenq
    mov         r14, outq
    xor         esi, esi
    call        rk_state
    test        rax, rax
    jz          .nomem
    mov         rbx, rax
    lea         rax, [r14 + r13 * 4]
    mov         [rbx + rts.outlim], rax         ; the room's end
    mov         rsi, r12
    mov         rdx, r13
    mov         rcx, r14
    call        rk_chunk
    RET
.nomem:
    mov         rax, ASMBPE_ENOMEM
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; rk_chunk: rbx = a thread state, rsi = the chunk (PAD readable after it),
; rdx = its length (>= 1), rcx = out (room for rdx ids; past the ids
; written, out may be overwritten up to rts.outlim, the end of the whole
; room).  Out: rax = ids written, or ASMBPE_ENOMEM.  Keeps rbx, rbp,
; r12-r15; clobbers the other registers and ymm0-ymm3.
;
; Chunks of 2..RC_MAX_LEN bytes look in the cache first: the bytes loaded
; zero-padded (mask_tab), hashed (crc32c of the two halves xor'ed, seeded
; with the length), the set's two entries compared (32 bytes and the
; length; a hit in way 1 swaps the two).  A miss encodes, moves way 0 to
; way 1 and fills way 0 when the ids fit.
;-----------------------------------------------------------------------------
%define rk_p        r12     ; the chunk
%define rk_n        r13     ; its length
%define rk_out      r14     ; out
%define rk_m        r15     ; ids left (short path)
%define rk_s        rbp     ; scratch
rk_chunk:
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    mov         rk_p, rsi
    mov         rk_n, rdx
    mov         rk_out, rcx
    mov         rdi, [rbx + rts.enc]
    cmp         rk_n, 1
    ja          .multi
    movzx       eax, byte [rk_p]
    mov         eax, [rdi + renc.byteid + rax * 4]
    mov         [rk_out], eax
    mov         eax, 1
    jmp         .ret

.multi:
    cmp         rk_n, RC_MAX_LEN
    ja          .uncached
    CACHE_SET   rk_p, rk_n
    vpcmpeqb    ymm2, ymm0, [rcx + rcent.key]
    vpmovmskb   eax, ymm2
    cmp         eax, -1
    jne         .way1
    cmp         [rcx + rcent.len], r13b
    jne         .way1
.hit:
    movzx       eax, byte [rcx + rcent.ntok]    ; a hit: its ids
    cmp         eax, 1
    jne         .hit_more
    mov         edx, [rcx + rcent.ids]
    mov         [rk_out], edx
    jmp         .ret
.hit_more:
    lea         rdx, [rk_out + 32]
    cmp         rdx, [rbx + rts.outlim]
    ja          .hit_masked
    vmovdqu     ymm2, [rcx + rcent.ids]         ; 8 ids, the ones past ntok
    vmovdqu     [rk_out], ymm2                  ; within the room (scratch)
    jmp         .ret
.hit_masked:
    lea         rdx, [rax * 4]
    lea         rsi, [mask_tab + 64]
    sub         rsi, rdx
    vmovdqu     ymm1, [rsi]                     ; first ntok dwords
    vpmaskmovd  ymm2, ymm1, [rcx + rcent.ids]
    vpmaskmovd  [rk_out], ymm1, ymm2
    jmp         .ret
.way1:
    vpcmpeqb    ymm2, ymm0, [rcx + rcent_size + rcent.key]
    vpmovmskb   eax, ymm2
    cmp         eax, -1
    jne         .cache_miss
    cmp         [rcx + rcent_size + rcent.len], r13b
    jne         .cache_miss
    vmovdqu     ymm0, [rcx]                     ; found: the two swap, way 0
    vmovdqu     ymm1, [rcx + 32]                ; the last used
    vmovdqu     ymm2, [rcx + 64]
    vmovdqu     ymm3, [rcx + 96]
    vmovdqu     [rcx], ymm2
    vmovdqu     [rcx + 32], ymm3
    vmovdqu     [rcx + 64], ymm0
    vmovdqu     [rcx + 96], ymm1
    jmp         .hit
.cache_miss:
    push        rcx                             ; the set
    sub         rsp, 8
    call        .encode                         ; rax = ids (or ENOMEM)
    add         rsp, 8
    pop         rcx
    test        rax, rax
    js          .ret
    cmp         rax, RC_MAX_TOK
    ja          .ret
    vmovdqu     ymm0, [rcx]                     ; way 0 to way 1, the chunk
    vmovdqu     ymm1, [rcx + 32]                ; into way 0 (the least
    vmovdqu     [rcx + 64], ymm0                ; recently used goes)
    vmovdqu     [rcx + 96], ymm1
    lea         rdx, [mask_tab + 64]            ; the key again (ymm0 is
    sub         rdx, rk_n                       ; gone)
    vmovdqu     ymm1, [rdx]
    vpand       ymm0, ymm1, [rk_p]
    vmovdqu     [rcx + rcent.key], ymm0
    mov         [rcx + rcent.len], r13b
    mov         [rcx + rcent.ntok], al
    lea         rdx, [rax * 4]
    lea         rsi, [mask_tab + 64]
    sub         rsi, rdx
    vmovdqu     ymm1, [rsi]
    vpmaskmovd  ymm2, ymm1, [rk_out]            ; (no read past the ids)
    vpmaskmovd  [rcx + rcent.ids], ymm1, ymm2
    jmp         .ret
.uncached:
    call        .encode
.ret:
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret

; .encode: the chunk's ids into out, rax = their count or ASMBPE_ENOMEM
; (a local routine: rdi = the encoder on entry; the named registers as above)
.encode:
    mov         rdi, [rbx + rts.enc]
    test        qword [rdi + renc.flags], RF_WHOLE
    jz          .merge
    cmp         rk_n, WT_MAX_LEN
    ja          .long_token
    mov         rsi, rk_p
    mov         rdx, rk_n
    WT_LOOKUP   .is_token                       ; a token of up to 11 bytes?
    jmp         .merge
.is_token:
    mov         [rk_out], eax
    mov         eax, 1
    ret
.long_token:
    CRC_BYTES   rk_p, rk_n, rax                 ; a longer token?
    mov         rdi, [rbx + rts.enc]
    mov         r9, [rdi + renc.wmask]
    mov         r8d, eax
    and         r8, r9
    mov         rdx, [rdi + renc.wslots]
.wprobe:
    mov         r10d, [rdx + r8 * 8]            ; id
    cmp         r10d, NO_PRIO
    je          .merge                          ; not a token
    cmp         eax, [rdx + r8 * 8 + 4]
    jne         .wnext
    mov         rsi, [rdi + renc.tokoff]
    mov         r11, [rsi + r10 * 8]
    mov         rcx, [rsi + r10 * 8 + 8]
    sub         rcx, r11
    cmp         rcx, rk_n
    jne         .wnext
    add         r11, [rdi + renc.tokbytes]      ; compare its bytes, 8 at a
    xor         ecx, ecx                        ; time (both have padding
.wcmp:                                          ; after them)
    mov         rsi, [r11 + rcx]
    xor         rsi, [rk_p + rcx]
    push        rax
    mov         rax, rk_n
    sub         rax, rcx
    cmp         rax, 8
    jae         .wfull
    shl         eax, 3
    bzhi        rsi, rsi, rax
    pop         rax
    test        rsi, rsi
    jnz         .wnext
    jmp         .whole
.wfull:
    pop         rax
    test        rsi, rsi
    jnz         .wnext
    add         rcx, 8
    cmp         rcx, rk_n
    jb          .wcmp
.whole:
    mov         [rk_out], r10d
    mov         eax, 1
    ret
.wnext:
    inc         r8
    and         r8, r9
    jmp         .wprobe

.merge:
    ; scratch: 5 u32 arrays of n (id, prio/next, result, prev, prio) and a
    ; heap of 3 n u64, for the longest chunk so far
    lea         rax, [rk_n + rk_n * 4]
    lea         rax, [rax * 4]
    lea         rcx, [rk_n * 8]
    lea         rax, [rax + rcx * 2]
    add         rax, rcx
    add         rax, 64
    mov         ecx, 4096                       ; (the short path: 12 RK_SHORT)
    cmp         rax, rcx
    cmovb       rax, rcx
    cmp         rax, [rbx + rts.scrbytes]
    jbe         .scratch_ok
    push        rax
    mov         rdi, [rbx + rts.scratch]
    mov         rsi, [rbx + rts.scrbytes]
    test        rdi, rdi
    jz          .no_old
    call        asmbpe_unmap
    mov         qword [rbx + rts.scratch], 0
    mov         qword [rbx + rts.scrbytes], 0
.no_old:
    pop         rdi
    add         rdi, 4095
    and         rdi, ~4095
    push        rdi
    call        asmbpe_map
    pop         rdi
    test        rax, rax
    jz          .nomem
    mov         [rbx + rts.scratch], rax
    mov         [rbx + rts.scrbytes], rdi
.scratch_ok:
    mov         rk_s, [rbx + rts.scratch]
    mov         rdi, [rbx + rts.enc]
    mov         r8, [rdi + renc.slots]
    mov         r9, [rdi + renc.smask]
    mov         r10, [rdi + renc.shift]
    xor         ecx, ecx
.ids:                                           ; id[i] = the byte's id
    movzx       eax, byte [rk_p + rcx]
    mov         eax, [rdi + renc.byteid + rax * 4]
    mov         [rk_s + rcx * 4], eax
    inc         rcx
    cmp         rcx, rk_n
    jb          .ids
    cmp         rk_n, RK_SHORT
    ja          .long

    ;-------------------------------------------------------------------------
    ; short: id[] at rk_s, prio[] at rk_s + 4 RK_SHORT, result[] after it
    ;-------------------------------------------------------------------------
%define SP_PRIO     (4 * RK_SHORT)
%define SP_RES      (8 * RK_SHORT)
    xor         edi, edi
    mov         rsi, [rbx + rts.enc]
    mov         rsi, [rsi + renc.bp]
.sinit:                                         ; prio[i] of (id[i], id[i+1]):
    movzx       eax, word [rk_p + rdi]          ; two bytes, from renc.bp
    mov         rax, [rsi + rax * 8]
    mov         [rk_s + SP_PRIO + rdi * 4], eax
    shr         rax, 32
    mov         [rk_s + SP_RES + rdi * 4], eax
    inc         edi
    lea         eax, [edi + 1]
    cmp         rax, rk_n
    jb          .sinit
    mov         rk_m, rk_n                      ; ids
.sloop:                                         ; the lowest priority, leftmost
    mov         eax, NO_PRIO
    xor         edi, edi                        ; i
    xor         esi, esi                        ; its position
    lea         rcx, [rk_m - 1]
.sscan:
    mov         edx, [rk_s + SP_PRIO + rdi * 4]
    cmp         edx, eax
    jae         .snext
    mov         eax, edx
    mov         rsi, rdi
.snext:
    inc         rdi
    cmp         rdi, rcx
    jb          .sscan
    cmp         eax, NO_PRIO
    je          .sdone
    mov         edx, [rk_s + SP_RES + rsi * 4]  ; merge at k = rsi
    mov         [rk_s + rsi * 4], edx
    lea         rdi, [rsi + 1]                  ; remove k + 1 from the three
.sshift:                                        ; arrays
    lea         rax, [rdi + 1]
    cmp         rax, rk_m
    jae         .sshifted
    mov         edx, [rk_s + rax * 4]
    mov         [rk_s + rdi * 4], edx
    mov         edx, [rk_s + SP_PRIO + rax * 4]
    mov         [rk_s + SP_PRIO + rdi * 4], edx
    mov         edx, [rk_s + SP_RES + rax * 4]
    mov         [rk_s + SP_RES + rdi * 4], edx
    inc         rdi
    jmp         .sshift
.sshifted:
    dec         rk_m
    lea         rax, [rsi + 1]                  ; the pair (k, k + 1)
    mov         dword [rk_s + SP_PRIO + rsi * 4], NO_PRIO
    cmp         rax, rk_m
    jae         .sleft
    PKEY        [rk_s + rsi * 4], [rk_s + rsi * 4 + 4]
    RPROBE_TS
    mov         [rk_s + SP_PRIO + rsi * 4], eax
    mov         [rk_s + SP_RES + rsi * 4], edx
.sleft:
    test        rsi, rsi                        ; the pair (k - 1, k)
    jz          .sloop
    PKEY        [rk_s + rsi * 4 - 4], [rk_s + rsi * 4]
    RPROBE_TS
    mov         [rk_s + SP_PRIO + rsi * 4 - 4], eax
    mov         [rk_s + SP_RES + rsi * 4 - 4], edx
    jmp         .sloop
.sdone:
    xor         ecx, ecx
.scopy:
    mov         eax, [rk_s + rcx * 4]
    mov         [rk_out + rcx * 4], eax
    inc         rcx
    cmp         rcx, rk_m
    jb          .scopy
    mov         rax, rk_m
    ret

    ;-------------------------------------------------------------------------
    ; long: id[] at rk_s, then next[] (u32; n: the end), prev[] (u32; ~0:
    ; none), prio[] and result[] of the pair (i, next[i]) (NO_PRIO: none, or
    ; i is gone), then heap[] (r12; r15 entries) of u64 priority << 32 | i
    ;-------------------------------------------------------------------------
.long:
    lea         rax, [rk_s + rk_n * 4]
    mov         [rbx + rts.lnext], rax
    lea         rax, [rax + rk_n * 4]
    mov         [rbx + rts.lprev], rax
    lea         rax, [rax + rk_n * 4]
    mov         [rbx + rts.lprio], rax
    lea         rax, [rax + rk_n * 4]
    mov         [rbx + rts.lres], rax
    lea         r12, [rax + rk_n * 4 + 7]
    and         r12, ~7                         ; the heap
    xor         r15d, r15d
    xor         ecx, ecx
.linit:
    mov         rdx, [rbx + rts.lnext]
    lea         eax, [ecx + 1]
    mov         [rdx + rcx * 4], eax
    mov         rdx, [rbx + rts.lprev]
    lea         eax, [ecx - 1]
    mov         [rdx + rcx * 4], eax
    mov         rdx, [rbx + rts.lprio]
    mov         dword [rdx + rcx * 4], NO_PRIO
    inc         rcx
    cmp         rcx, rk_n
    jb          .linit
    xor         edi, edi
.lpairs:                                        ; every (i, i + 1)
    call        lk_pair
    inc         rdi
    lea         rax, [rdi + 1]
    cmp         rax, rk_n
    jb          .lpairs
.lpop:
    call        lk_pop                          ; rax = the least, CF: none
    jc          .ldone
    mov         rdx, rax
    shr         rdx, 32                         ; its priority
    mov         esi, eax                        ; i
    mov         rcx, [rbx + rts.lprio]
    cmp         edx, [rcx + rsi * 4]
    jne         .lpop                           ; stale
    mov         rcx, [rbx + rts.lres]          ; merge (i, j = next[i])
    mov         eax, [rcx + rsi * 4]
    mov         [rk_s + rsi * 4], eax           ; id[i] = the result
    mov         rcx, [rbx + rts.lnext]
    mov         edi, [rcx + rsi * 4]            ; j
    mov         eax, [rcx + rdi * 4]            ; k = next[j]
    mov         [rcx + rsi * 4], eax            ; next[i] = k
    mov         rcx, [rbx + rts.lprio]
    mov         dword [rcx + rdi * 4], NO_PRIO  ; j is gone
    mov         dword [rcx + rsi * 4], NO_PRIO
    cmp         rax, rk_n
    jae         .lleft
    mov         rcx, [rbx + rts.lprev]
    mov         [rcx + rax * 4], esi            ; prev[k] = i
    mov         rdi, rsi
    push        rsi
    call        lk_pair                         ; (i, k)
    pop         rsi
.lleft:
    mov         rcx, [rbx + rts.lprev]
    mov         edi, [rcx + rsi * 4]            ; h = prev[i]
    cmp         edi, NO_PRIO
    je          .lpop
    call        lk_pair                         ; (h, i)
    jmp         .lpop
.ldone:
    xor         ecx, ecx                        ; the list from 0 (never
    xor         eax, eax                        ; merged away: only right
    mov         rdx, [rbx + rts.lnext]         ; ones are)
.lcopy:
    mov         r8d, [rk_s + rcx * 4]
    mov         [rk_out + rax * 4], r8d
    inc         rax
    mov         ecx, [rdx + rcx * 4]
    cmp         rcx, rk_n
    jb          .lcopy
    ret

.nomem:
    mov         rax, ASMBPE_ENOMEM
    ret

; lk_pair (long path): rdi = i, alive, next[i] < n: prio[i] and result[i]
; of the pair (i, next[i]), pushed onto the heap (r12, r15 entries) when it
; is one.  rbp = the scratch (id[]), rbx = the thread state, r8-r10 the
; pair table.  Keeps rdi; clobbers rax, rcx, rdx, rsi, r11.
lk_pair:
    mov         rcx, [rbx + rts.lnext]
    mov         esi, [rcx + rdi * 4]
    PKEY        [rk_s + rdi * 4], [rk_s + rsi * 4] ; the key
    RPROBE_TS
    mov         rcx, [rbx + rts.lprio]
    mov         [rcx + rdi * 4], eax
    cmp         eax, NO_PRIO
    je          .none
    mov         rcx, [rbx + rts.lres]
    mov         [rcx + rdi * 4], edx
    shl         rax, 32
    or          rax, rdi                        ; the entry
    mov         rdx, r15
    inc         r15
.up:                                            ; sift up
    test        rdx, rdx
    jz          .place
    lea         rsi, [rdx - 1]
    shr         rsi, 1                          ; the parent
    cmp         rax, [r12 + rsi * 8]
    jae         .place
    mov         r11, [r12 + rsi * 8]
    mov         [r12 + rdx * 8], r11
    mov         rdx, rsi
    jmp         .up
.place:
    mov         [r12 + rdx * 8], rax
.none:
    ret

; lk_pop (long path): rax = the heap's least entry, removed; CF set when the
; heap (r12, r15 entries) is empty.  Clobbers rcx, rsi, rdi, r11.
lk_pop:
    test        r15, r15
    jz          .empty
    mov         rax, [r12]
    dec         r15
    jz          .done
    mov         rdi, [r12 + r15 * 8]            ; the last, sifted down from 0
    xor         esi, esi
.down:
    lea         r11, [rsi * 2 + 1]              ; the left child
    cmp         r11, r15
    jae         .put
    lea         rcx, [r11 + 1]
    cmp         rcx, r15
    jae         .one
    mov         rcx, [r12 + r11 * 8 + 8]
    cmp         rcx, [r12 + r11 * 8]
    jae         .one
    inc         r11                             ; the right one is less
.one:
    mov         rcx, [r12 + r11 * 8]
    cmp         rdi, rcx
    jbe         .put
    mov         [r12 + rsi * 8], rcx
    mov         rsi, r11
    jmp         .down
.put:
    mov         [r12 + rsi * 8], rdi
.done:
    clc
    ret
.empty:
    stc
    ret

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_text(asmbpe_renc *e, const uint8_t *text, size_t len,
;                          uint64_t pretok, uint32_t *out, size_t cap)
; The ids of a padded text (PAD readable around it): split by pre-tokenizer
; pretok, each chunk encoded, with thread state 0.  cap >= len (ids never
; outnumber bytes).  Returns the ids written, or ASMBPE_EINVAL (cap < len,
; unknown pretok), ASMBPE_ENOMEM.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_text, 6, 15, 1, e, text, len, pretok, out, cap
    mov         rax, ASMBPE_EINVAL
    cmp         capq, lenq
    jb          .ret
    cmp         pretokq, PRETOK_MIN
    jb          .ret
    cmp         pretokq, PRETOK_MAX
    ja          .ret
    push        textq
    push        lenq
    push        pretokq
    push        outq
    xor         esi, esi
    call        rk_state
    test        rax, rax
    jz          .nomem
    mov         rbx, rax
    mov         rdi, [rsp + 24]
    mov         rsi, [rsp + 16]
    mov         rdx, [rsp + 8]
    mov         rcx, [rsp]
    call        rk_doc
    add         rsp, 32
.ret:
    RET
.nomem:
    add         rsp, 32
    mov         rax, ASMBPE_ENOMEM
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; rk_doc: rbx = a thread state, rdi = a padded text, rsi = its length, rdx =
; the pre-tokenizer (valid), rcx = out (room for rsi ids).  Out: rax = the
; ids written, or a negative status.  Keeps rbx, rbp, r12-r15; clobbers
; the other registers and ymm0-ymm3.
;-----------------------------------------------------------------------------
rk_doc:
    lea         rax, [rcx + rsi * 4]
    mov         [rbx + rts.outlim], rax         ; the room's end
    push        rbp
    push        r12
    push        r13
    push        r14
    push        r15
    push        rdi                             ; [rsp + 24]: text
    push        rsi                             ; [rsp + 16]: len
    push        rdx                             ; [rsp + 8]: pretok
    push        rcx                             ; [rsp]: out
    xor         r12d, r12d                      ; pos
    xor         r13d, r13d                      ; ids written
.split:
    cmp         r12, [rsp + 16]
    jae         .done
    mov         rdi, [rsp + 24]
    mov         rsi, [rsp + 16]
    mov         rdx, r12
    lea         rcx, [rbx + rts.ends]
    mov         r8d, RK_SPLITS
    mov         r9, [rsp + 8]
    call        asmbpe_split_offsets
    test        rax, rax
    js          .out
    jz          .done
    mov         r14, rax                        ; ends got
    xor         r15d, r15d
.batch:                                         ; the next RK_BATCH chunks:
    lea         rax, [r15 + RK_BATCH]           ; their whole-token slots (or
    cmp         rax, r14                        ; cache sets) prefetched, then
    cmova       rax, r14                        ; each looked up
    mov         [rbx + rts.bend], rax
    mov         rdi, [rbx + rts.enc]
    mov         r8, r12                         ; a chunk's start
    mov         r9, r15
.pf:
    cmp         r9, [rbx + rts.bend]
    jae         .chunk
    mov         r10, [rbx + rts.ends + r9 * 8]
    mov         rdx, r10
    sub         rdx, r8                         ; its length
    mov         rsi, [rsp + 24]
    add         rsi, r8                         ; the chunk
    mov         r8, r10
    inc         r9
    cmp         rdx, 1
    jbe         .pf
    cmp         rdx, WT_MAX_LEN
    ja          .pf_cache
    cmp         qword [rdi + renc.wt], 0
    je          .pf_cache
    lea         rax, [mask_tab + 64]
    sub         rax, rdx
    vmovdqu     xmm1, [rax]
    vpand       xmm0, xmm1, [rsi]
    vpinsrb     xmm0, xmm0, edx, WT_LENB
    WT_HASH     xmm0, rcx
    and         rcx, [rdi + renc.wtmask]
    shl         rcx, WT_SHIFT
    add         rcx, [rdi + renc.wt]
    prefetcht0  [rcx]
    CACHE_SET   rsi, rdx
    prefetcht0  [rcx]
    jmp         .pf
.pf_cache:
    cmp         rdx, RC_MAX_LEN
    ja          .pf
    CACHE_SET   rsi, rdx
    prefetcht0  [rcx]
    prefetcht0  [rcx + 64]
    jmp         .pf
.chunk:
    mov         rsi, [rsp + 24]
    add         rsi, r12                        ; the chunk
    mov         r8, [rbx + rts.ends + r15 * 8]  ; its end
    mov         rdx, r8
    sub         rdx, r12                        ; its length
    mov         rcx, [rsp]
    lea         rcx, [rcx + r13 * 4]            ; its ids go here
    mov         rdi, [rbx + rts.enc]
    cmp         rdx, 1
    je          .one
    cmp         rdx, WT_MAX_LEN
    ja          .slow
    cmp         qword [rdi + renc.wt], 0
    je          .slow
    WT_LOOKUP   .wt_hit                         ; a whole token?
    jmp         .slow
.wt_hit:
    mov         [rcx], eax
    jmp         .one_id
.one:
    movzx       eax, byte [rsi]
    mov         eax, [rdi + renc.byteid + rax * 4]
    mov         [rcx], eax
.one_id:
    mov         r12, r8
    inc         r13
    jmp         .next
.slow:
    push        r8
    call        rk_chunk
    pop         r12                             ; pos = its end
    test        rax, rax
    js          .out
    add         r13, rax
.next:
    inc         r15
    cmp         r15, [rbx + rts.bend]
    jb          .chunk
    cmp         r15, r14
    jb          .batch
    jmp         .split
.done:
    mov         rax, r13
.out:
    add         rsp, 32
    pop         r15
    pop         r14
    pop         r13
    pop         r12
    pop         rbp
    ret

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_encode(asmbpe_renc *e, const uint8_t *text,
;                            const uint64_t *doc_ends, uint64_t n_docs,
;                            uint64_t threads, uint64_t pretok,
;                            uint32_t *out, uint64_t *counts)
; Documents text[doc_ends[i-1], doc_ends[i]) (the first from 0; text padded)
; on `threads` threads, each claiming the next document; document i's ids
; are written from out[doc_ends[i-1]] (its own room: ids never outnumber
; bytes), counts[i] = their number; then thread 0 moves them down into one
; run, in document order, from out[0].  out: room for doc_ends[n-1] ids.
; Returns the ids in all, or ASMBPE_EINVAL (threads 0 or > MAX_THREADS,
; unknown pretok), ASMBPE_ENOMEM, ASMBPE_ETHREAD.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_encode, 8, 15, 1, e, text, ends, ndocs, threads, pretok, out, counts
    STACK_ALLOC rjob_size + 8
    mov         [rsp + rjob.enc], eq
    mov         [rsp + rjob.text], textq
    mov         [rsp + rjob.ends], endsq
    mov         [rsp + rjob.ndocs], ndocsq
    mov         [rsp + rjob.pretok], pretokq
    mov         rax, outm
    mov         [rsp + rjob.out], rax
    mov         rax, countsm
    mov         [rsp + rjob.counts], rax
    mov         qword [rsp + rjob.next], 0
    mov         qword [rsp + rjob.status], 0
    mov         rax, ASMBPE_EINVAL
    cmp         pretokq, PRETOK_MIN
    jb          .ret
    cmp         pretokq, PRETOK_MAX
    ja          .ret
    test        threadsq, threadsq
    jz          .ret
    cmp         threadsq, MAX_THREADS
    ja          .ret
    cmp         threadsq, ndocsq                ; no more threads than
    cmova       threadsq, ndocsq                ; documents
    xor         eax, eax
    test        threadsq, threadsq
    jz          .ret
    mov         r12, threadsq
    xor         r13d, r13d                      ; each thread's state, made
.states:                                        ; here (mapping is not
    mov         rdi, [rsp + rjob.enc]           ; thread-safe to share)
    mov         rsi, r13
    call        rk_state
    test        rax, rax
    jz          .nomem
    inc         r13
    cmp         r13, r12
    jb          .states
    lea         rdi, [rk_worker]
    mov         rsi, rsp
    mov         rdx, r12
    call        asmbpe_parallel
    test        rax, rax
    jnz         .ret
    mov         rax, [rsp + rjob.status]
    test        rax, rax
    jnz         .ret
    mov         rsi, [rsp + rjob.ends]          ; into document order
    mov         rdi, [rsp + rjob.out]
    mov         r8, [rsp + rjob.counts]
    xor         ecx, ecx                        ; document
    xor         edx, edx                        ; ids so far
    xor         r9d, r9d                        ; its start
.gather:
    cmp         rcx, [rsp + rjob.ndocs]
    jae         .gathered
    mov         r10, [r8 + rcx * 8]             ; its ids
    xor         r11d, r11d
.move:
    cmp         r11, r10
    jae         .moved
    lea         rax, [r9 + r11]
    mov         eax, [rdi + rax * 4]
    lea         rbx, [rdx + r11]
    mov         [rdi + rbx * 4], eax
    inc         r11
    jmp         .move
.moved:
    add         rdx, r10
    mov         r9, [rsi + rcx * 8]
    inc         rcx
    jmp         .gather
.gathered:
    mov         rax, rdx
.ret:
    STACK_FREE  rjob_size + 8
    RET
.nomem:
    mov         rax, ASMBPE_ENOMEM
    jmp         .ret
ENDFUNC

;-----------------------------------------------------------------------------
; rk_worker(rjob *job, uint64_t tid): claims documents one at a time and
; encodes each into its room.  System V; keeps rbx, rbp, r12-r15.
;-----------------------------------------------------------------------------
rk_worker:
    push        rbx
    push        r12
    push        r13
    mov         r12, rdi                        ; the job
    mov         rdi, [r12 + rjob.enc]
    mov         rbx, [rdi + renc.ts + rsi * 8]  ; this thread's state
.claim:
    mov         eax, 1
    lock xadd   [r12 + rjob.next], rax
    cmp         rax, [r12 + rjob.ndocs]
    jae         .done
    mov         r13, rax                        ; document d
    mov         rcx, [r12 + rjob.ends]
    xor         edx, edx
    test        r13, r13
    jz          .first
    mov         rdx, [rcx + r13 * 8 - 8]        ; its start
.first:
    mov         rsi, [rcx + r13 * 8]
    sub         rsi, rdx                        ; its length
    mov         rdi, [r12 + rjob.text]
    add         rdi, rdx
    mov         rcx, [r12 + rjob.out]
    lea         rcx, [rcx + rdx * 4]            ; its room
    mov         rdx, [r12 + rjob.pretok]
    call        rk_doc
    test        rax, rax
    js          .failed
    mov         rcx, [r12 + rjob.counts]
    mov         [rcx + r13 * 8], rax
    jmp         .claim
.failed:
    mov         [r12 + rjob.status], rax
    mov         rax, [r12 + rjob.ndocs]         ; the others stop claiming
    mov         [r12 + rjob.next], rax
.done:
    vzeroupper
    pop         r13
    pop         r12
    pop         rbx
    ret

;-----------------------------------------------------------------------------
; int64_t asmbpe_renc_decode(const asmbpe_renc *e, const uint32_t *ids,
;                            uint64_t n, uint8_t *out, uint64_t cap)
; The bytes of n ids (each < n_tokens) one after another into out: returns
; the bytes written, or ASMBPE_EINVAL (an id out of range: nothing is
; promised about out) or -(bytes needed) - 16 when they exceed cap (nothing
; written past cap).  Tokens are copied 16 bytes at a time where 16 bytes
; of room are left, byte by byte near the end.
;-----------------------------------------------------------------------------
FUNC asmbpe_renc_decode, 5, 15, 0, e, ids, n, out, cap
    mov         r12, idsq
    mov         r13, nq
    mov         r14, outq
    mov         r15, capq
    mov         r9, [eq + renc.tokoff]
    mov         r10, [eq + renc.tokbytes]
    mov         r11, [eq + renc.ntok]
    xor         eax, eax                        ; bytes written
    xor         ebx, ebx                        ; ids done
    lea         rbp, [r14 + r15]                ; the room's end
.next:
    cmp         rbx, r13
    jae         .done
    mov         ecx, [r12 + rbx * 4]
    inc         rbx
    cmp         rcx, r11
    jae         .bad
    mov         rdx, [r9 + rcx * 8]             ; its bytes
    mov         rcx, [r9 + rcx * 8 + 8]
    sub         rcx, rdx                        ; its length
    add         rdx, r10
    lea         rdi, [r14 + rax]                ; where they go
    add         rax, rcx
    cmp         rax, r15
    ja          .over
.copy:
    lea         rsi, [rdi + 16]
    cmp         rsi, rbp
    ja          .bytes
    vmovdqu     xmm0, [rdx]                     ; (the token table has PAD
    vmovdqu     [rdi], xmm0                     ; after its bytes)
    cmp         rcx, 16
    jbe         .next
    add         rdx, 16
    add         rdi, 16
    sub         rcx, 16
    jmp         .copy
.bytes:
    test        rcx, rcx
    jz          .next
    mov         sil, [rdx]
    mov         [rdi], sil
    inc         rdx
    inc         rdi
    dec         rcx
    jmp         .bytes
.over:                                          ; count what is needed
    cmp         rbx, r13
    jae         .need
    mov         ecx, [r12 + rbx * 4]
    inc         rbx
    cmp         rcx, r11
    jae         .bad
    add         rax, [r9 + rcx * 8 + 8]
    sub         rax, [r9 + rcx * 8]
    jmp         .over
.need:
    neg         rax
    sub         rax, 16
.done:
    RET
.bad:
    mov         rax, ASMBPE_EINVAL
    RET
ENDFUNC
