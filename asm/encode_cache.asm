;-----------------------------------------------------------------------------
; encode_cache.asm — the chunks the worker does not find: chunk_miss (encode, then
; fill the cache), chunk_uncached and run_memo (runs of one byte).
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
PROC chunk_miss
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
    mov         rcx, rdi
    sub         rcx, r8
    shr         rcx, 1                          ; ids
    cmp         ecx, CE_MAX_TOK
    ja          .ret
    vmovdqu     ymm0, [rax]                     ; way 0 -> way 1
    vmovdqu     ymm1, [rax + 32]
    vmovdqu     [rax + centry_size], ymm0
    vmovdqu     [rax + centry_size + 32], ymm1
    lea         r9, [mask_tab + 64]             ; key, zero-padded
    sub         r9, rdx
    vmovdqu     ymm2, [r9]
    vmovdqu     xmm3, [r9 + 32]
    vpand       ymm0, ymm2, [rsi]
    vpand       xmm1, xmm3, [rsi + 32]
    vmovdqu     [rax + centry.key], ymm0
    vmovdqu     [rax + centry.key + 32], xmm1
    mov         [rax + centry.len], dl
    mov         [rax + centry.ntok], cl
    add         rax, centry.tok
    COPY_IDS    rax, r8, rcx, rdx, esi, si
.ret:
    ret
ENDPROC

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
PROC run_memo
    movzx       eax, byte [rsi]
    vmovd       xmm0, eax
    vpbroadcastb ymm0, xmm0
    xor         ecx, ecx
.same:                                          ; 32 bytes at a time
    vpcmpeqb    ymm1, ymm0, [rsi + rcx]
    vpmovmskb   r8d, ymm1
    mov         r9, rdx
    sub         r9, rcx                         ; bytes left (> 0)
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
    add         rcx, 32
    cmp         rcx, rdx
    jb          .same
.run:                                           ; entry (byte * 17 + len)
    imul        r8d, eax, 17                    ; mod MEMO_ENTRIES
    add         r8d, edx
    and         r8d, MEMO_ENTRIES - 1
    shl         r8d, 6
    lea         r8, [r8 + rbx + tstate.memo]
    cmp         [r8 + mement.len], edx
    jne         .encode
    cmp         [r8 + mement.byte], al
    jne         .encode
    movzx       ecx, byte [r8 + mement.ntok]    ; found: its ids
    add         r8, mement.tok
    COPY_IDS    rdi, r8, rcx, r9, r10d, r10w
    lea         rdi, [rdi + rcx * 2]
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
    mov         rcx, rdi
    sub         rcx, r9
    shr         rcx, 1                          ; ids
    cmp         rcx, MEMO_MAX_TOK
    ja          .kept                           ; (too many: not kept)
    mov         [r8 + mement.len], edx
    mov         [r8 + mement.byte], al
    mov         [r8 + mement.ntok], cl
    add         r8, mement.tok
    COPY_IDS    r8, r9, rcx, r10, r11d, r11w
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
