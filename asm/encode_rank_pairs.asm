;-----------------------------------------------------------------------------
; encode_rank_pairs.asm — a rank file's pair table from its token bytes:
; asmbpe_rank_pairs (what harness.rank.RankEncoder gives asmbpe_renc_new for
; a tiktoken ranks file; harness.vocab.pair_table is its Python twin)
; (the rank encoder: its layouts and macros in encode_rank.inc)
;-----------------------------------------------------------------------------
%include "encode_rank.inc"

section .text

;-----------------------------------------------------------------------------
; int64_t asmbpe_rank_pairs(const uint8_t *tok_bytes,
;                           const uint64_t *tok_offsets, uint64_t n_tokens,
;                           uint32_t *rows)
; A rank file's pair table for asmbpe_renc_new (harness.vocab.pair_table's
; rows, in token order instead of sorted): for every token i of 2+ bytes
; (token i is tok_bytes[tok_offsets[i], tok_offsets[i + 1])) and every split
; of its bytes into a token a followed by a token b, the row {a, b, i, i}.
; rows: room for a row per split point (the sum of length - 1 over the
; tokens of 2+ bytes; tok_offsets[n] - n when no token is empty).
; Of two equal tokens the later one is found.  Reads no
; byte outside the tokens.  Returns the rows written, or ASMBPE_EINVAL
; (n_tokens over RK_MAX_TOK), ASMBPE_ENOMEM (its index not mapped).
; The index: 2^b >= 2 n {u32 id, u32 crc32c} slots (id NO_PRIO: empty),
; linear probing from the crc's multiplicative hash; a lookup compares the
; crc, then the length, then the bytes (rp_find).
;-----------------------------------------------------------------------------
%define rp_bytes    rbx     ; tok_bytes
%define rp_off      rbp     ; tok_offsets
%define rp_k        r12     ; the split point: bytes before it
%define rp_out      r13     ; the next row
%define rp_tab      r14     ; the index
%define rp_i        r15     ; the token
%define rp_i32      r15d
%define rp_shift    r9      ; 64 - b (rp_find keeps it)
%define rp_mask     r10     ; 2^b - 1 (rp_find keeps it)
; the stack: [rsp] n_tokens, [rsp + 8] rows, [rsp + 16] the index's bytes
FUNC asmbpe_rank_pairs, 4, 15, 0, tokbytes, tokoff, ntok, rows
    mov         rax, ASMBPE_EINVAL
    cmp         ntokq, RK_MAX_TOK
    ja          .ret
    mov         rp_bytes, tokbytesq
    mov         rp_off, tokoffq
    mov         rp_out, rowsq
    sub         rsp, 24
    mov         [rsp], ntokq
    mov         [rsp + 8], rowsq
    lea         rax, [ntokq * 2]
    POW2_AT_LEAST 10
    mov         eax, 64
    sub         eax, ecx
    mov         rp_shift, rax
    lea         rp_mask, [rdx - 1]
    lea         rdi, [rdx * 8]
    mov         [rsp + 16], rdi
    push        rp_shift
    push        rp_mask
    call        asmbpe_map
    pop         rp_mask
    pop         rp_shift
    test        rax, rax
    jz          .nomem
    mov         rp_tab, rax
    mov         rdi, rax
    mov         rcx, [rsp + 16]
    shr         rcx, 3
    mov         rax, -1
    rep stosq                                   ; every slot empty

    ; each token into the index, the last first (of two equal tokens, the
    ; last is found, as in a dict built in token order)
    mov         rp_i, [rsp]
.index:
    sub         rp_i, 1
    jb          .indexed
    mov         rsi, [rp_off + rp_i * 8]
    mov         rdi, [rp_off + rp_i * 8 + 8]
    sub         rdi, rsi                        ; its length
    add         rsi, rp_bytes
    CRC_BYTES   rsi, rdi, rax
    mov         edx, eax
    mov         r8, RK_GOLD
    imul        r8, rdx
    shrx        r8, r8, rp_shift                ; its home
.index_probe:
    cmp         dword [rp_tab + r8 * 8], NO_PRIO
    je          .index_put
    inc         r8
    and         r8, rp_mask
    jmp         .index_probe
.index_put:
    mov         [rp_tab + r8 * 8], rp_i32
    mov         [rp_tab + r8 * 8 + 4], edx
    jmp         .index

.indexed:
    ; each split point of each token: its two sides looked up
    xor         rp_i, rp_i
.token:
    cmp         rp_i, [rsp]
    jae         .done
    mov         rax, [rp_off + rp_i * 8 + 8]
    sub         rax, [rp_off + rp_i * 8]
    cmp         rax, 2
    jb          .token_next
    mov         rp_k, 1
.split:
    mov         rsi, [rp_off + rp_i * 8]
    add         rsi, rp_bytes
    mov         rdi, rp_k
    call        rp_find                         ; a: bytes [0, k)
    cmp         eax, NO_PRIO
    je          .split_next
    push        rax                             ; (a)
    mov         rsi, [rp_off + rp_i * 8]
    mov         rdi, [rp_off + rp_i * 8 + 8]
    sub         rdi, rsi
    sub         rdi, rp_k
    add         rsi, rp_bytes
    add         rsi, rp_k
    call        rp_find                         ; b: bytes [k, L)
    pop         rcx
    cmp         eax, NO_PRIO
    je          .split_next
    mov         [rp_out], ecx
    mov         [rp_out + 4], eax
    mov         [rp_out + 8], rp_i32
    mov         [rp_out + 12], rp_i32
    add         rp_out, 16
.split_next:
    inc         rp_k
    mov         rax, [rp_off + rp_i * 8 + 8]
    sub         rax, [rp_off + rp_i * 8]
    cmp         rp_k, rax
    jb          .split
.token_next:
    inc         rp_i
    jmp         .token
.done:
    mov         rdi, rp_tab
    mov         rsi, [rsp + 16]
    call        asmbpe_unmap
    mov         rax, rp_out
    sub         rax, [rsp + 8]
    shr         rax, 4                          ; the rows
    add         rsp, 24
    jmp         .ret
.nomem:
    mov         rax, ASMBPE_ENOMEM
    add         rsp, 24
.ret:
    RET
ENDFUNC

; rp_find (asmbpe_rank_pairs): rsi = bytes, rdi = their length (1+), the
; registers of asmbpe_rank_pairs.  eax = the id of the token that is those
; bytes, or NO_PRIO.  Clobbers rax, rcx, rdx, r8, r11.
rp_find:
    CRC_BYTES   rsi, rdi, rax
    mov         edx, eax                        ; the crc
    mov         r8, RK_GOLD
    imul        r8, rdx
    shrx        r8, r8, rp_shift                ; its home
.probe:
    mov         rax, [rp_tab + r8 * 8]
    cmp         eax, NO_PRIO
    je          .none
    mov         rcx, rax
    shr         rcx, 32
    cmp         ecx, edx
    jne         .next
    mov         ecx, eax                        ; a candidate: its length
    mov         r11, [rp_off + rcx * 8 + 8]
    mov         rcx, [rp_off + rcx * 8]
    sub         r11, rcx
    cmp         r11, rdi
    jne         .next
    add         rcx, rp_bytes                   ; then its bytes
    push        rdx
    xor         r11d, r11d
.cmp8:
    lea         rdx, [r11 + 8]
    cmp         rdx, rdi
    ja          .cmp1
    mov         rdx, [rsi + r11]
    cmp         rdx, [rcx + r11]
    jne         .differ
    add         r11, 8
    jmp         .cmp8
.cmp1:
    cmp         r11, rdi
    jae         .same
    movzx       edx, byte [rsi + r11]
    cmp         dl, [rcx + r11]
    jne         .differ
    inc         r11
    jmp         .cmp1
.same:
    pop         rdx
    mov         eax, eax                        ; the id
    ret
.differ:
    pop         rdx
.next:
    inc         r8
    and         r8, rp_mask
    jmp         .probe
.none:
    mov         eax, NO_PRIO
    ret
