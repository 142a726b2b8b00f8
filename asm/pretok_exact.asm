;-----------------------------------------------------------------------------
; pretok_exact.asm — the exact pre-tokenizers of SPEC §10 (nanochat, cl100k,
; o200k, gpt2).  (Interim: they run the seed until the scanners land.)
;-----------------------------------------------------------------------------
%include "asmbpe.inc"

extern split_seed
extern pretok_next_seed

section .text

HIDDEN
FUNC asmbpe_split_exact, 6, 6, 0
    jmp         split_seed
ENDFUNC

HIDDEN
FUNC asmbpe_pretok_next_exact, 4, 4, 0
    jmp         pretok_next_seed
ENDFUNC
