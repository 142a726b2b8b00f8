;-----------------------------------------------------------------------------
; encode_cache.asm — the chunks the worker does not find: chunk_miss (encode,
; then fill the cache), chunk_uncached and run_memo (runs of one byte).
;
; Called by enc_worker (encode_worker.asm); they encode through short_path
; (encode_short.asm) and long_path (encode_long.asm).
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "encode.inc"

extern short_path
extern long_path
extern mask_tab

section .text

; COPY_IDS dst, src, n, i, t32, t16: dst[0 .. n) = src[0 .. n), u16 ids one
; at a time (n >= 1; n and i 64-bit registers, t32 / t16 one scratch register).
; %1 = dst, %2 = src (address registers, kept), %3 = n (kept), %4 = i (ends
; at n), %5 = t32, %6 = t16 (its 32- and 16-bit views).  Clobbers i and t.
%macro COPY_IDS 6
    xor         %4, %4
%%copy:
    movzx       %5, word [%2 + %4 * 2]
    mov         [%1 + %4 * 2], %6
    inc         %4
    cmp         %4, %3
    jb          %%copy
%endmacro

;=============================================================================
; chunk_miss: rbx = thread state, r12 = job, rsi = the chunk's bytes, rdx =
; its length (2 .. CACHE_MAX_LEN), rdi = where its ids go, r8 = way 0 of
; its cache set.  Encodes it (short path) and, when the ids fit, moves way 0
; to way 1 and fills way 0.
; chunk_uncached: the same without a cache entry, any length >= 2.
; Both return rdi past the ids; keep rbx, rbp, r12-r15; clobber rax, rcx,
; rdx, rsi, r8-r11, ymm0-ymm9.
;=============================================================================
%define cm_ent       rax   ; (after the call) way 0 of the chunk's set
%define cm_first     r8    ; its first id
%define cm_n         rcx   ; its ids
%define cm_nd        ecx   ; (cm_n, 32-bit)
%define cm_nb        cl    ; (cm_n, 8-bit)
%define cm_len       rdx   ; the chunk's length
%define cm_lenb      dl    ; (cm_len, 8-bit)
%define cm_mask      r9    ; mask_tab + 64 - length: keeps its bytes
PROC chunk_miss, 64
    push        rdi
    push        rsi
    push        rdx
    push        r8
    push        r8                              ; (alignment)
    call        short_path                      ; rdi past the ids
    pop         rax
    pop         rax                             ; the entry
    pop         rdx                             ; length
    pop         rsi                             ; bytes
    pop         r8                              ; first id
    mov         cm_n, rdi
    sub         cm_n, cm_first
    shr         cm_n, 1                         ; ids
    cmp         cm_nd, CE_MAX_TOK
    ja          .ret
    vmovdqu     ymm0, [cm_ent]                  ; way 0 -> way 1
    vmovdqu     ymm1, [cm_ent + 32]
    vmovdqu     [cm_ent + centry_size], ymm0
    vmovdqu     [cm_ent + centry_size + 32], ymm1
    lea         cm_mask, [mask_tab + 64]        ; key, zero-padded
    sub         cm_mask, cm_len
    vmovdqu     ymm2, [cm_mask]
    vmovdqu     xmm3, [cm_mask + 32]
    vpand       ymm0, ymm2, [rsi]
    vpand       xmm1, xmm3, [rsi + 32]
    vmovdqu     [cm_ent + centry.key], ymm0
    vmovdqu     [cm_ent + centry.key + 32], xmm1
    mov         [cm_ent + centry.len], cm_lenb
    mov         [cm_ent + centry.ntok], cm_nb
    add         cm_ent, centry.tok
    COPY_IDS    cm_ent, cm_first, cm_n, rdx, esi, si
.ret:
    ret
ENDPROC
%undef cm_ent
%undef cm_first
%undef cm_n
%undef cm_nd
%undef cm_nb
%undef cm_len
%undef cm_lenb
%undef cm_mask

PROC chunk_uncached
    cmp         rdx, SHORT_MAX
    jbe         short_path                      ; tail calls
    jmp         long_path
ENDPROC

;=============================================================================
; run_memo: rbx = thread state, r12 = job, rsi = the chunk's bytes, rdx = its
; length (> CACHE_MAX_LEN), rdi = where its ids go.  A chunk that is one
; byte repeated: its ids from the memo (rax = 1, rdi past them), or, not
; there, encoded (chunk_uncached, counted as encoded and, with EF_PROFILE,
; timed as merging) and kept when its ids fit (rax = 1).  Any other chunk:
; rax = 0, nothing written.  Keeps rsi, rdx when rax = 0; keeps rbx, rbp,
; r12-r15; clobbers rax, rcx, r8-r11, ymm0-ymm9.  Reads the chunk rounded up to 32 bytes (text or padding).
;=============================================================================
%define rm_byte      eax   ; the chunk's first byte (the run's, if it is one)
%define rm_byteb     al    ; (rm_byte, 8-bit)
%define rm_at        rcx   ; the bytes compared so far
%define rm_atd       ecx   ; (rm_at, 32-bit)
%define rm_ent       r8    ; its memo entry (from its hash)
%define rm_entd      r8d   ; (rm_ent, 32-bit)
%define rm_n         rcx   ; (then) the run's ids
%define rm_nd        ecx   ; (rm_n, 32-bit)
%define rm_nb        cl    ; (rm_n, 8-bit)
%define rm_lend      edx   ; (kept) its length
%define rm_first     r9    ; (kept) its first id
PROC run_memo, 64
    movzx       rm_byte, byte [rsi]
    vmovd       xmm0, rm_byte
    vpbroadcastb ymm0, xmm0
    xor         rm_atd, rm_atd
.same:                                          ; 32 bytes at a time
    vpcmpeqb    ymm1, ymm0, [rsi + rm_at]
    vpmovmskb   r8d, ymm1
    mov         r9, rdx
    sub         r9, rm_at                       ; bytes left (> 0)
    cmp         r9, 32
    jae         .whole
    bzhi        r8d, r8d, r9d                   ; (the last, partial)
    mov         r10d, -1
    bzhi        r10d, r10d, r9d
    cmp         r8d, r10d
    jne         .other
    jmp         .run
.whole:
    cmp         r8d, -1
    jne         .other
    add         rm_at, 32
    cmp         rm_at, rdx
    jb          .same
.run:                                           ; entry (byte * 17 + len)
    imul        rm_entd, rm_byte, 17            ; mod MEMO_ENTRIES
    add         rm_entd, edx
    and         rm_entd, MEMO_ENTRIES - 1
    shl         rm_entd, 6
    lea         rm_ent, [rm_ent + rbx + tstate.memo]
    cmp         [rm_ent + mement.len], edx
    jne         .encode
    cmp         [rm_ent + mement.byte], rm_byteb
    jne         .encode
    movzx       rm_nd, byte [rm_ent + mement.ntok] ; found: its ids
    add         rm_ent, mement.tok
    COPY_IDS    rdi, rm_ent, rm_n, r9, r10d, r10w
    lea         rdi, [rdi + rm_n * 2]
    mov         eax, 1
    ret
.encode:
    inc         qword [rbx + tstate.encoded]
    push        r8                              ; the entry
    push        rax                             ; the byte
    push        rdx                             ; the length
    push        rdi                             ; the first id
    sub         rsp, 8
    test        qword [r12 + job.flags], EF_PROFILE
    jnz         .encode_timed
    call        chunk_uncached
.encoded:
    add         rsp, 8
    pop         r9                              ; the first id
    pop         rdx
    pop         rax
    pop         r8
    mov         rm_n, rdi
    sub         rm_n, rm_first
    shr         rm_n, 1                         ; ids
    cmp         rm_n, MEMO_MAX_TOK
    ja          .kept                           ; (too many: not kept)
    mov         [rm_ent + mement.len], rm_lend
    mov         [rm_ent + mement.byte], rm_byteb
    mov         [rm_ent + mement.ntok], rm_nb
    add         rm_ent, mement.tok
    COPY_IDS    rm_ent, rm_first, rm_n, r10, r11d, r11w
.kept:
    mov         eax, 1
    ret
.other:
    xor         eax, eax
    ret
.encode_timed:                                  ; EF_PROFILE: the encoding
    rdtsc                                       ; counts as merging
    shl         rdx, 32
    or          rax, rdx
    mov         [rsp], rax
    mov         rdx, [rsp + 16]                 ; the length
    call        chunk_uncached
    rdtsc
    shl         rdx, 32
    or          rax, rdx
    sub         rax, [rsp]
    add         [rbx + tstate.cyc_merge], rax
    jmp         .encoded
ENDPROC
%undef rm_byte
%undef rm_byteb
%undef rm_at
%undef rm_atd
%undef rm_ent
%undef rm_entd
%undef rm_n
%undef rm_nd
%undef rm_nb
%undef rm_lend
%undef rm_first
