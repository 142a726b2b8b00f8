;-----------------------------------------------------------------------------
; pretok_exact.asm — the exact pre-tokenizers of SPEC §10: nanochat (id 2),
; cl100k (3), o200k (4) and gpt2 (5), each its pattern written out as
; branches over the Unicode class of each character (UCLASS, unicode.inc),
; with the ASCII fast paths of the seed: the vector letter-run scan and, for
; nanochat and cl100k (which split ASCII text as SPEC §3 does, cl100k with
; digits in threes), PRETOK_WINDOW.  harness/dev/pretok_twin.py is the
; Python twin of every routine here, alternative by alternative.
;
; The chunk routines (xc_nanochat, xc_cl100k, xc_o200k, xc_gpt2) share one
; register contract:
;   In:  r10 = a chunk start < r11 = endp (the text's end, with SPEC §2
;        padding after it); rbp = asmbpe_uni (UNI_LOAD); ymm13-ymm15 =
;        PRETOK_LOAD_CONSTANTS (0x20, 'a', 25).
;   Out: r10 = the chunk's end (r10 < result <= endp).
;   Clobbers rax, rcx, rdx, rbx, r12-r15, ymm0, ymm1; pushes nothing (so a
;   caller's red zone below its return address survives).
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "pretok.inc"
%include "unicode.inc"

section .text

;-----------------------------------------------------------------------------
; Pieces shared by the chunk routines.  Each jumps to its routine's .ret
; (r10 = the chunk's end) or .clamp (r10 = endp) when the chunk is done.
;-----------------------------------------------------------------------------

; X_LRUN: \p{L}+ goes on at r10 (a character start): r10 past the run.
; ASCII letters 32 at a time; any other character by its class.
%macro X_LRUN 0
%%loop:
    cmp         r10, r11
    jae         .clamp
    movzx       eax, byte [r10]
    test        al, al
    js          %%mb
    vmovdqu     ymm0, [r10]                     ; 32 bytes, may reach padding
    vpor        ymm0, ymm0, ymm13               ; fold case
    vpsubb      ymm0, ymm0, ymm14               ; - 'a'
    vpminub     ymm1, ymm0, ymm15
    vpcmpeqb    ymm0, ymm0, ymm1                ; (b | 0x20) - 'a' <= 25
    vpmovmskb   eax, ymm0
    not         eax
    tzcnt       eax, eax                        ; leading ASCII letters
    add         r10, rax
    cmp         eax, 32
    je          %%loop
    cmp         r10, r11
    jae         .clamp
    movzx       eax, byte [r10]
    test        al, al
    jns         .ret                            ; an ASCII non-letter ends it
%%mb:
    UCLASS_MB   r10
    test        cl, XL
    jz          .ret
    add         r10, rax
    jmp         %%loop
%endmacro

; X_WRUN: o200k's [\p{Ll}\p{Lm}\p{Lo}\p{M}]+ goes on at r10: r10 past it
; (ASCII: lower-case letters, 32 at a time); then jumps to %1.
%macro X_WRUN 1
%%loop:
    cmp         r10, r11
    jae         %%clamp
    movzx       eax, byte [r10]
    test        al, al
    js          %%mb
    vmovdqu     ymm0, [r10]
    vpsubb      ymm0, ymm0, ymm14               ; b - 'a' <= 25
    vpminub     ymm1, ymm0, ymm15
    vpcmpeqb    ymm0, ymm0, ymm1
    vpmovmskb   eax, ymm0
    not         eax
    tzcnt       eax, eax
    add         r10, rax
    cmp         eax, 32
    je          %%loop
    cmp         r10, r11
    jae         %%clamp
    movzx       eax, byte [r10]
    test        al, al
    jns         %1
%%mb:
    UCLASS_MB   r10
    test        cl, XLOW
    jz          %1
    add         r10, rax
    jmp         %%loop
%%clamp:
    mov         r10, r11
    jmp         %1
%endmacro

; X_CONTR fold, yes: at an apostrophe at r10, the contractions
; '(?i:[sdmt]|ll|ve|re) (fold = 1: ASCII case and U+017F, the long s, which
; (?i) folds onto s) or GPT-2's 's|'t|'re|'ve|'m|'ll|'d (fold = 0).  On a
; match r10 moves past it and it jumps to yes; else falls through, r10 kept.
; Clobbers eax, edx.
%macro X_CONTR 2
    lea         rdx, [r10 + 1]
    cmp         rdx, r11
    jae         %%no
    movzx       eax, byte [r10 + 1]
%if %1
    or          al, 0x20                        ; ASCII case fold
%endif
    cmp         al, 's'
    je          %%take2
    cmp         al, 't'
    je          %%take2
    cmp         al, 'd'
    je          %%take2
    cmp         al, 'm'
    je          %%take2
    lea         rdx, [r10 + 2]
    cmp         rdx, r11
    jae         %%no
    movzx       edx, byte [r10 + 2]
%if %1
    cmp         byte [r10 + 1], 0xC5            ; U+017F (C5 BF)
    jne         %%ascii
    cmp         dl, 0xBF
    je          %%take3
%%ascii:
    or          dl, 0x20
%endif
    cmp         al, 'l'
    je          %%l
    cmp         dl, 'e'
    jne         %%no
    cmp         al, 'v'
    je          %%take3
    cmp         al, 'r'
    je          %%take3
    jmp         %%no
%%l:
    cmp         dl, 'l'
    jne         %%no
%%take3:
    add         r10, 3
    jmp         %2
%%take2:
    add         r10, 2
    jmp         %2
%%no:
%endmacro

; X_DIGITS n: \p{N}{1,n} from the digit at r10 (eax = its length); returns.
%macro X_DIGITS 1
    add         r10, rax
%rep %1 - 1
    cmp         r10, r11
    jae         .ret
    UCLASS      r10
    test        cl, XN
    jz          .ret
    add         r10, rax
%endrep
    ret
%endmacro

; X_WS cl100k, gpt2: the whitespace alternatives at a whitespace character
; at r10 (ecx = its class, eax = its length):
;   cl100k = 1: \s++$ first (the whole run when it reaches the end);
;   gpt2 = 0: \s*[\r\n] (up to the run's last CR/LF; o200k's \s*[\r\n]+ is
;   the same), then \s+(?!\S) (the run; less its last character when
;   something follows), then \s+ or \s (a lone whitespace character).
;   gpt2 = 1: no CR/LF rule.  Uses r12 (run start), r13 (after the last
;   CR/LF), r14 (start of the run's last character).
%macro X_WS 2
    mov         r12, r10
    xor         r13d, r13d
%%have:
    mov         r14, r10
    add         r10, rax
%if %2 == 0
    test        cl, XNL
    jz          %%next
    mov         r13, r10
%endif
%%next:
    cmp         r10, r11
    jae         %%end
    UCLASS      r10
    test        cl, XWS
    jnz         %%have
%%end:
%if %1
    cmp         r10, r11
    jae         .ret                            ; \s++$
%endif
%if %2 == 0
    test        r13, r13
    jz          %%no_nl
    mov         r10, r13                        ; \s*[\r\n]
    ret
%%no_nl:
%endif
    cmp         r10, r11
    jae         .ret                            ; \s+(?!\S) at the end
    cmp         r14, r12
    jbe         .ret                            ; one character: \s+ / \s
    mov         r10, r14                        ; \s+(?!\S): all but the last
    ret
%endmacro

; X_ORUN tail: [^\s\p{L}\p{N}]+ from r10 (at .orun_adv: eax = the length of
; a character known to be in it), then the bytes of tail (a list of byte
; values, e.g. 10, 13) while they last.
%macro X_ORUN 1-*
.orun_adv:
    add         r10, rax
.orun:
    cmp         r10, r11
    jae         .ret
    UCLASS      r10
    test        cl, XWS | XL | XN
    jz          .orun_adv
%if %0 > 0 && %1 >= 0
.tail:
    movzx       eax, byte [r10]
%rep %0
    cmp         al, %1
    je          .tail_take
%rotate 1
%endrep
    ret
.tail_take:
    inc         r10
    cmp         r10, r11
    jb          .tail
%endif
    ret
%endmacro

;-----------------------------------------------------------------------------
; xc_gpt4 digits, cl100k: the chunk at r10 under
;   '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}
;   | ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+          (nanochat)
; or cl100k's (digits 3, \s++$ before \s*[\r\n], \s for \s+: the same).
;-----------------------------------------------------------------------------
%macro XCHUNK_GPT4 2
    UCLASS      r10
    test        cl, XL
    jnz         .lrun_next                      ; \p{L}+
    cmp         byte [r10], 0x27
    jne         .not_apos
    X_CONTR     1, .ret
    xor         ecx, ecx                        ; a lone apostrophe: O
    mov         eax, 1
.not_apos:
    test        cl, XN
    jnz         .digits
    test        cl, XNL
    jnz         .ws
    mov         ebx, ecx                        ; c: a possible prefix
    mov         r12, r10
    add         r10, rax                        ; the next character
    cmp         r10, r11
    jae         .c_alone
    UCLASS      r10
    test        cl, XL
    jnz         .lrun_next                      ; [^\r\n\p{L}\p{N}]?+\p{L}+
    test        bl, XWS
    jz          .orun_have                      ; c is O: its run goes on
    cmp         byte [r12], ' '
    jne         .ws_c
    test        cl, XWS | XL | XN
    jz          .orun_adv                       ; ' ' + [^\s\p{L}\p{N}]++
.ws_c:
    mov         r10, r12
    UCLASS      r10
    jmp         .ws
.c_alone:                                       ; c is the last character
    test        bl, XWS
    jz          .ret                            ; an O run of one
    jmp         .ws_c
.orun_have:                                     ; r10 after c (ecx, eax)
    test        cl, XWS | XL | XN
    jz          .orun_adv
    jmp         .tail                           ; [\r\n]*
.digits:                                        ; \p{N}{1,digits}
    X_DIGITS    %1
    X_ORUN      10, 13
.ws:
    X_WS        %2, 0
.lrun_next:
    add         r10, rax
    X_LRUN
.clamp:
    mov         r10, r11
.ret:
    ret
%endmacro

PROC xc_nanochat, 64
    XCHUNK_GPT4 2, 0
ENDPROC

PROC xc_cl100k, 64
    XCHUNK_GPT4 3, 1
ENDPROC

;-----------------------------------------------------------------------------
; xc_o200k: the chunk at r10 under o200k_base's pattern (SPEC §10):
;   P?U*W+C? | P?U+W*C? | \p{N}{1,3} | ' '?O+[\r\n/]* | \s*[\r\n]+
;   | \s+(?!\S) | \s+
; with P = [^\r\n\p{L}\p{N}], U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (XUP),
; W = [\p{Ll}\p{Lm}\p{Lo}\p{M}] (XLOW), C = (?i:'s|'t|'re|'ve|'m|'ll|'d),
; O = [^\s\p{L}\p{N}].  The letter alternatives, from j (after P, then
; without it): the U run from j, noting the end of its last Lm/Lo/M (in W
; too); a W run follows when the character after the U run is Ll (first
; alternative); else the first alternative ends after that last Lm/Lo/M;
; else the second ends with the U run (when it is not empty).  With P = c
; a mark (in U and W), the first alternative without P (c alone) comes
; before the second with P.
;-----------------------------------------------------------------------------
; X_UPSCAN: r10 past the U run from r10; r14 = the end of its last Lm/Lo/M
; character (0: none); ecx = the class of the character after it (0 at the
; end of the text)
%macro X_UPSCAN 0
    xor         r14d, r14d
%%loop:
    cmp         r10, r11
    jae         %%end0
    UCLASS      r10
    test        cl, XUP
    jz          %%end
    add         r10, rax
    test        cl, XLM | XM
    jz          %%loop
    mov         r14, r10
    jmp         %%loop
%%end0:
    xor         ecx, ecx
%%end:
%endmacro

PROC xc_o200k, 64
    UCLASS      r10
    test        cl, XL
    jnz         .letters                        ; no prefix: j = c
    test        cl, XN
    jnz         .digits
    test        cl, XNL
    jnz         .ws
    mov         ebx, ecx                        ; c: a possible prefix P
    mov         r12, r10
    add         r10, rax
    mov         r13, r10                        ; j: after P
    X_UPSCAN
    test        cl, XLL
    jnz         .wrun                           ; P U* W+
    test        r14, r14
    jz          .p_no_w
    mov         r10, r14                        ; P U* W+ (W: its last Lm/Lo/M)
    jmp         .contr
.p_no_w:
    test        bl, XM
    jz          .p_alt2
    mov         r10, r13                        ; U* W+ without P: the mark c
    jmp         .contr
.p_alt2:
    cmp         r10, r13
    jne         .contr                          ; P U+ W*, W empty
    test        bl, XWS                         ; no letters
    jz          .orun_c
    cmp         byte [r12], ' '
    jne         .ws_c
    mov         r10, r13
    cmp         r10, r11
    jae         .ws_c
    UCLASS      r10
    test        cl, XWS | XL | XN
    jz          .orun_adv                       ; ' ' + O+
.ws_c:
    mov         r10, r12
    UCLASS      r10
    jmp         .ws
.orun_c:
    mov         r10, r13
    jmp         .orun
.letters:                                       ; c in \p{L}: from c
    X_UPSCAN
    test        cl, XLL
    jnz         .wrun
    test        r14, r14
    jz          .contr                          ; U+ W* (W empty)
    mov         r10, r14
    jmp         .contr
.wrun:
    X_WRUN      .contr
.contr:                                         ; C?
    cmp         r10, r11
    jae         .ret
    cmp         byte [r10], 0x27
    jne         .ret
    X_CONTR     1, .ret
    ret
.digits:                                        ; \p{N}{1,3}
    X_DIGITS    3
    X_ORUN      10, 13, '/'
.ws:
    X_WS        0, 0
.clamp:
    mov         r10, r11
.ret:
    ret
ENDPROC

;-----------------------------------------------------------------------------
; xc_gpt2: the chunk at r10 under GPT-2's pattern
;   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
;-----------------------------------------------------------------------------
PROC xc_gpt2, 64
    UCLASS      r10
    cmp         byte [r10], 0x27
    jne         .first
    X_CONTR     0, .ret
    xor         ecx, ecx                        ; a lone apostrophe: O
    mov         eax, 1
.first:
    test        cl, XL
    jnz         .lrun_next
    test        cl, XN
    jnz         .nrun_adv
    test        cl, XWS
    jz          .orun_adv
    cmp         byte [r10], ' '
    jne         .ws
    mov         r12, r10                        ; ' ' + L+ | N+ | O+ ?
    inc         r10
    cmp         r10, r11
    jae         .ws_c
    UCLASS      r10
    test        cl, XL
    jnz         .lrun_next
    test        cl, XN
    jnz         .nrun_adv
    test        cl, XWS
    jz          .orun_adv
.ws_c:
    mov         r10, r12
    UCLASS      r10
.ws:
    X_WS        0, 1
.nrun_adv:                                      ; \p{N}+
    add         r10, rax
    cmp         r10, r11
    jae         .ret
    UCLASS      r10
    test        cl, XN
    jnz         .nrun_adv
    ret
    X_ORUN      -1
.lrun_next:
    add         r10, rax
    X_LRUN
.clamp:
    mov         r10, r11
.ret:
    ret
ENDPROC

;-----------------------------------------------------------------------------
; The split functions: SPLIT_BODY (pretok.inc) around each chunk routine.
; Private to asmbpe_split_exact, which has asmbpe_split_offsets' contract.
;-----------------------------------------------------------------------------
%macro XONE_NANOCHAT 0
    call        xc_nanochat
%endmacro
%macro XONE_CL100K 0
    call        xc_cl100k
%endmacro
%macro XONE_O200K 0
    call        xc_o200k
%endmacro
%macro XONE_GPT2 0
    call        xc_gpt2
%endmacro

HIDDEN
FUNC split_nanochat, 5, 15, 1, text, len, pos, out, cap
    SPLIT_BODY  XONE_NANOCHAT, UNI_LOAD, WIN_GPT4 | WIN_L2 | WIN_P3
ENDFUNC

HIDDEN
FUNC split_cl100k, 5, 15, 1, text, len, pos, out, cap
    SPLIT_BODY  XONE_CL100K, UNI_LOAD, WIN_CL100K | WIN_L2 | WIN_P3
ENDFUNC

HIDDEN
FUNC split_o200k, 5, 15, 1, text, len, pos, out, cap
    SPLIT_BODY  XONE_O200K, UNI_LOAD, WIN_O200K | WIN_L2 | WIN_P3
ENDFUNC

HIDDEN
FUNC split_gpt2, 5, 15, 1, text, len, pos, out, cap
    SPLIT_BODY  XONE_GPT2, UNI_LOAD, WIN_GPT2 | WIN_L2 | WIN_P3
ENDFUNC

;-----------------------------------------------------------------------------
; asmbpe_split_exact: asmbpe_split_offsets for r9 = PRETOK_NANOCHAT ..
; PRETOK_GPT2 (checked by the caller).  Jumps to the split function.
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_split_exact, 6, 6, 0
    cmp         r9d, PRETOK_CL100K
    jb          split_nanochat
    je          split_cl100k
    cmp         r9d, PRETOK_O200K
    je          split_o200k
    jmp         split_gpt2
ENDFUNC

;-----------------------------------------------------------------------------
; size_t asmbpe_pretok_next_exact(const uint8_t *text, size_t len, size_t pos,
;                                 uint64_t pretok)
; asmbpe_pretok_next for pretok = PRETOK_NANOCHAT .. PRETOK_GPT2 (checked by
; the caller): one chunk routine call.  Saves what the routines clobber.
;-----------------------------------------------------------------------------
HIDDEN
FUNC asmbpe_pretok_next_exact, 4, 15, 1, text, len, pos, pretok
    mov         rax, lenq
    cmp         posq, lenq
    jae         .ret
    lea         r10, [textq + posq]
    lea         r11, [textq + lenq]
    UNI_LOAD    rbp
    PRETOK_LOAD_CONSTANTS
    lea         rax, [xc_nanochat]
    lea         rdx, [xc_cl100k]
    cmp         pretokd, PRETOK_CL100K
    cmove       rax, rdx
    lea         rdx, [xc_o200k]
    cmp         pretokd, PRETOK_O200K
    cmove       rax, rdx
    lea         rdx, [xc_gpt2]
    cmp         pretokd, PRETOK_GPT2
    cmove       rax, rdx
    call        rax
    mov         rax, r10
    sub         rax, textq
.ret:
    RET
ENDFUNC
