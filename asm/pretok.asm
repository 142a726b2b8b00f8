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
; the stack frame (6 pushes + this: rsp % 16 == 0)
struc so_frame
    .buf:       resq 64         ; a window's ends, when out has no room
    .out:       resq 1          ; out's place meanwhile
    .part:      resq 1          ; 1: bit 63 of cap was set
                resq 1          ; (pad)
endstruc
; and a red-zone slot below PRETOK_WINDOW's (struc wrz, pretok.inc)
%define SL_UNTIL rsp - 40                       ; chunk by chunk until here

HIDDEN
FUNC split_seed, 5, 15, 1, text, len, pos, out, cap
    sub         rsp, so_frame_size
    xor         eax, eax
    btr         capq, 63                        ; bit 63: stop short (the
    setc        al                              ; encoder's batches)
    mov         [rsp + so_frame.part], rax
    mov         r9, outq
    lea         r11, [textq + lenq]             ; endp
    lea         r10, [textq + posq]             ; cur
    xor         eax, eax
    cmp         posq, lenq
    jae         .ret
    test        capq, capq
    jz          .ret
    PRETOK_LOAD_CONSTANTS
    PRETOK_LOAD_WINDOW_CONSTANTS
    PRETOK_LOAD_TABLE rbp
    lea         rsi, [r9 + capq * 8]            ; end of out
    mov         r8, r9                          ; out, kept: rcx is a temp
    mov         [SL_UNTIL], r10
    align 16
.next:
    lea         rax, [r10 + 64]
    cmp         rax, r11
    ja          .one                            ; under 64 bytes left
    cmp         r10, [SL_UNTIL]
    jb          .one
    mov         rax, rsi
    sub         rax, r9
    cmp         rax, 64 * 8
    jb          .window_short                   ; out too full for a window
    PRETOK_WINDOW r10, textq, r9, .window_failed
    jmp         .stored
.window_short:                                  ; the window into so_frame.buf,
    cmp         qword [rsp + so_frame.part], 0  ; then as many ends as fit
    jne         .count                          ; (bit 63 of cap: stop)
    mov         [rsp + so_frame.out], r9
    lea         r9, [rsp + so_frame.buf]
    PRETOK_WINDOW r10, textq, r9, .short_failed
    lea         rcx, [rsp + so_frame.buf]
    sub         r9, rcx                         ; bytes of ends (> 0)
    mov         rcx, r9
    mov         r9, [rsp + so_frame.out]
    mov         rax, rsi
    sub         rax, r9                         ; room (> 0)
    cmp         rcx, rax
    cmova       rcx, rax                        ; cut: out is full, so the
    xor         edx, edx                        ; caller resumes at its last
.short_end:
    mov         rax, [rsp + so_frame.buf + rdx]
    mov         [r9 + rdx], rax
    add         rdx, 8
    cmp         rdx, rcx
    jb          .short_end
    add         r9, rcx
    jmp         .stored
.short_failed:
    mov         r9, [rsp + so_frame.out]
.window_failed:
    lea         rax, [r10 + 64]
    mov         [SL_UNTIL], rax
.one:
    PRETOK_CHUNK r10, r11, rbx, rbp
    mov         rax, r10
    sub         rax, textq
    mov         [r9], rax
    add         r9, 8
.stored:
    cmp         r10, r11
    jae         .count
    cmp         r9, rsi
    jb          .next
.count:
    mov         rax, r9
    sub         rax, r8
    shr         rax, 3
.ret:
    add         rsp, so_frame_size
    RET
ENDFUNC
