;-----------------------------------------------------------------------------
; pretok.asm — the pre-tokenizer of SPEC §3: the class table and two entry
; points over the PRETOK_CHUNK scanner of pretok.inc.
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%define PRETOK_TABLE_HERE
%include "pretok.inc"

extern asmbpe_split_exact
extern asmbpe_pretok_next_exact

section .rodata align=64

; class table, built at assembly time: one entry per lead byte (see pretok.inc)
global asmbpe_pretok_ctab:data hidden
asmbpe_pretok_ctab:
%assign b 0
%rep 256
    %if (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z')
        db C_L
    %elif b >= '0' && b <= '9'
        db C_N
    %elif b == 10 || b == 13
        db C_S | C_NL
    %elif (b >= 9 && b <= 13) || b == 32
        db C_S
    %elif b < 0x80
        db C_O
    %elif b < 0xC0                          ; stray continuation byte
        db C_O
    %elif b == 0xC2                         ; U+0080-U+00BF
        db C_O | (1 << 5)
    %elif b < 0xE0
        db C_L | (1 << 5)
    %elif b == 0xE2                         ; U+2000-U+2FFF
        db C_O | (2 << 5)
    %elif b == 0xE3                         ; U+3000-U+303F when next is 0x80
        db C_CHK | (2 << 5)
    %elif b < 0xF0
        db C_L | (2 << 5)
    %elif b == 0xF0                         ; U+1F000-U+1FFFF when next is 0x9F
        db C_CHK | (3 << 5)
    %elif b < 0xF8
        db C_L | (3 << 5)
    %else                                   ; 0xF8-0xFF: not a lead byte
        db C_O
    %endif
    %assign b b + 1
%endrep

align 32
global asmbpe_pretok_vconst:data hidden
asmbpe_pretok_vconst:
    times 32 db 0x20
    times 32 db 'a'
    times 32 db 25
    times 32 db 0x27
    times 32 db '0'
    times 32 db 9
    times 32 db 0x0A
    times 32 db 0x0D
    times 32 db 4
%if $ - asmbpe_pretok_vconst != VC_M3
    %error "asmbpe_pretok_vconst: VC_M3 is not where pretok.inc says"
%endif
    dq 0x9249249249249249                   ; every third bit, from bit 0
    times VC_SLASH - VC_M3 - 8 db 0
    times 32 db '/'
%if $ - asmbpe_pretok_vconst != VC_0F
    %error "asmbpe_pretok_vconst: VC_0F is not where pretok.inc says"
%endif
    times 32 db 0x0F
    times 32 db 0xE0
    times 32 db 0xC0
    times 32 db 0xC3
    times 32 db 0x97
    times 32 db 0xB7
%if $ - asmbpe_pretok_vconst != VC_E2
    %error "asmbpe_pretok_vconst: VC_E2 is not where pretok.inc says"
%endif
    times 32 db 0xE2
    times 32 db 0x80
%rep 2                                      ; VC_P3HI: high nibble 8 9 A B
    db 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 0, 0, 0, 0
%endrep
%rep 2                                      ; VC_P3LO: per low nibble, the
%assign lo 0                                ; high nibbles it is O under:
%rep 16                                     ; 8 (8B-8F), 9, A (not A8 A9 AF), B
    %assign v 2 | 8
    %if lo >= 0xB
        %assign v v | 1
    %endif
    %if lo != 8 && lo != 9 && lo != 0xF
        %assign v v | 4
    %endif
    db v
    %assign lo lo + 1
%endrep
%endrep
%if $ - asmbpe_pretok_vconst != VC_70
    %error "asmbpe_pretok_vconst: VC_70 is not where pretok_window.inc says"
%endif
    times 32 db 0x70
    times 32 db 0xCF

section .text

;-----------------------------------------------------------------------------
; size_t asmbpe_pretok_next(const uint8_t *text, size_t len, size_t pos,
;                           uint64_t pretok)
;
; End offset of the chunk that starts at pos (pos < result <= len); len when
; pos >= len.  pos must be a chunk boundary (0 or a previous result).  pretok:
; ASMBPE_PRETOK_* (an unknown id: ASMBPE_EINVAL, as size_t).
; In: rdi, rsi, rdx, rcx.  Out: rax.  Reads up to 31 bytes of the padding
; after text + len.  Clobbers rcx, rdx, r8-r11, ymm0, ymm1, ymm13-15 (the
; exact pre-tokenizers: see asmbpe_pretok_next_exact).
;-----------------------------------------------------------------------------
FUNC asmbpe_pretok_next, 4, 4, 0, text, len, pos, pretok
    cmp         pretokq, PRETOK_SEED
    je          pretok_next_seed
    lea         rax, [pretokq - PRETOK_NANOCHAT]
    cmp         rax, PRETOK_MAX - PRETOK_NANOCHAT
    jbe         asmbpe_pretok_next_exact
    mov         rax, ASMBPE_EINVAL
    RET
ENDFUNC

HIDDEN
FUNC pretok_next_seed, 3, 3, 1, text, len, pos
    mov         rax, lenq
    cmp         posq, lenq
    jae         .ret
    lea         r10, [textq + posq]
    lea         r11, [textq + lenq]
    PRETOK_LOAD_CONSTANTS
    PRETOK_LOAD_TABLE r9
    PRETOK_CHUNK r10, r11, r8, r9
    mov         rax, r10
    sub         rax, textq
.ret:
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; int64_t asmbpe_split_offsets(const uint8_t *text, size_t len, size_t pos,
;                              uint64_t *out, size_t cap, uint64_t pretok)
;
; Splits text[pos, len) with pre-tokenizer pretok (ASMBPE_PRETOK_*): the seed
; below (split_seed), the exact ones in pretok_exact.asm (asmbpe_split_exact,
; the same contract).  An unknown pretok: ASMBPE_EINVAL.  In: rdi, rsi, rdx,
; rcx, r8, r9.  Pushes nothing: jumps to the one it names.
;-----------------------------------------------------------------------------
FUNC asmbpe_split_offsets, 6, 6, 0, text, len, pos, out, cap, pretok
    cmp         pretokq, PRETOK_SEED
    je          split_seed
    lea         rax, [pretokq - PRETOK_NANOCHAT]
    cmp         rax, PRETOK_MAX - PRETOK_NANOCHAT
    jbe         asmbpe_split_exact
    mov         rax, ASMBPE_EINVAL
    RET
ENDFUNC

;-----------------------------------------------------------------------------
; split_seed: asmbpe_split_offsets for the seed (SPEC §3).
;
; Splits text[pos, len) into chunks and writes their end offsets (from text)
; to out[0..n), stopping after cap of them.  Returns n.  n < cap means the
; text is done (out[n-1] == len, or n == 0 when pos >= len); n == cap may
; leave text to split: call again with pos = out[cap - 1].
;
; Where 64 bytes of text lie ahead, PRETOK_WINDOW takes many chunks at once
; (into out, or, when out has room for fewer than 64, into a buffer on the
; stack, of which the first ones that fit are kept); otherwise (text end,
; non-ASCII, a run longer than the window) PRETOK_CHUNK takes one.  After a
; window that gave nothing, the next 64 bytes go chunk by chunk.
; Bit 63 of cap set (library-internal: the encoder, whose batch buffer has
; room for cap ends): once out has room for fewer than 64 ends while 64 bytes
; of text lie ahead, it stops, instead of splitting a window into the stack
; buffer and keeping the ends that fit (the rest would be split again by the
; next call).  n < cap then no longer means the text is done: the caller goes
; on from out[n - 1] until that is len.  cap is then its low 63 bits.
; (Other callers leave bit 63 clear: no buffer holds 2^63 ends.)
; In: rdi, rsi, rdx, rcx, r8.  Out: rax.  Writes out[0..cap) only (a window
; writes its ends 8 at a time: out[n..cap) is scratch).  Reads up to
; 31 bytes past text + len.  Clobbers rcx, rdx, rsi, r8-r11, ymm0-ymm15;
; saves rbx, rbp, r12-r15; uses the red zone.
;-----------------------------------------------------------------------------
HIDDEN
FUNC split_seed, 5, 15, 1, text, len, pos, out, cap
    SPLIT_BODY  SEED_ONE, PRETOK_LOAD_TABLE, WIN_GPT4
ENDFUNC
