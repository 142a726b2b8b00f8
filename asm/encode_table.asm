;-----------------------------------------------------------------------------
; encode_table.asm — building the encoder's tables: asmbpe_enc_new /
; asmbpe_enc_free, build_tokens (the id -> bytes table) and build_seed (the
; whole-token table).
;
; asmbpe_enc_new makes the pair -> rank hash and the byte-pair table that
; short_path / long_path read (LOAD_TABLE, RANK: encode.inc).  build_tokens is
; called by asmbpe_decode (encode_decode.asm) and build_seed; build_seed by
; asmbpe_encode_impl (encode_entry.asm) on the first cached call, checking
; each candidate id with short_path (encode_short.asm).  asmbpe_enc_free gives
; the thread states to the pool (ts_give, encode_pool.asm).
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "encode.inc"

extern ts_give
extern short_path
extern mask_tab

section .text

;-----------------------------------------------------------------------------
; asmbpe_enc *asmbpe_enc_new(const uint32_t *merges, uint64_t n_merges)
; merges[i] = left | right << 16 makes id 256 + i (checked by the caller:
; ids defined, no pair twice).  NULL when out of memory or n_merges too big.
;-----------------------------------------------------------------------------
%define nw_merges    rbx   ; merges
%define nw_n         rbp   ; n_merges
%define nw_enc       r14   ; the encoder
%define nw_k         rsi   ; the merge inserted (its rank)
%define nw_kd        esi   ; (nw_k, 32-bit)
%define nw_kw        si    ; (nw_k, 16-bit)
%define nw_p         ecx   ; its pair P = left << 16 | right
%define nw_slots     r8    ; the slots (LOAD_TABLE)
%define nw_mask      r9d   ; slots - 1
%define nw_shift     r10d  ; 32 - log2(slots)
%define nw_slot      r11   ; the slot probed
%define nw_slotd     r11d  ; (nw_slot, 32-bit)
FUNC asmbpe_enc_new, 2, 12, 0, merges, n
    mov         nw_merges, mergesq
    mov         nw_n, nq
    xor         eax, eax
    cmp         nw_n, 65535 - 256
    ja          .ret
    mov         edi, (enc_size + 4095) & ~4095
    call        asmbpe_map
    test        rax, rax
    jz          .ret
    mov         nw_enc, rax
    mov         [nw_enc + enc.nmerges], nw_n
    lea         rax, [nw_n * 2]                 ; slots: a power of two
    mov         ecx, 10                         ; >= 2 n, at least 1024
.size:
    mov         edx, 1
    shl         edx, cl
    cmp         rdx, rax
    jae         .sized
    inc         ecx
    jmp         .size
.sized:
    lea         rax, [rdx - 1]
    mov         [nw_enc + enc.mask], rax
    mov         eax, 32
    sub         eax, ecx
    mov         [nw_enc + enc.shift], rax
    lea         rdi, [rdx * 8 + RANK_TAIL * 8]  ; (+ the tail: RANKV)
    mov         [nw_enc + enc.slotbytes], rdi
    call        asmbpe_map
    test        rax, rax
    jz          .fail
    mov         [nw_enc + enc.slots], rax
    mov         rdi, rax                        ; every slot empty
    mov         rcx, [nw_enc + enc.slotbytes]
    shr         rcx, 3
    mov         rax, -1
    rep stosq
    lea         rdi, [nw_n * 4 + 4]             ; a copy of the merges (for
    call        asmbpe_map                      ; the id -> bytes table)
    test        rax, rax
    jz          .fail_slots
    mov         [nw_enc + enc.merges], rax
    mov         rdi, rax
    mov         rsi, nw_merges
    lea         rcx, [nw_n * 4]
    rep movsb
    mov         edi, BP_BYTES                   ; the byte-pair ranks, for a
    call        asmbpe_map                      ; chunk's first ranks
    test        rax, rax
    jz          .fail_merges
    mov         [nw_enc + enc.bp], rax
    mov         rdi, rax
    mov         ecx, BP_BYTES / 8
    mov         rax, -1
    rep stosq
    LOAD_TABLE  nw_enc
    xor         nw_kd, nw_kd                    ; merge k
.insert:
    cmp         nw_k, nw_n
    jae         .done
    mov         eax, [nw_merges + nw_k * 4]
    rol         eax, 16                         ; P = left << 16 | right
    test        eax, 0xFF00FF00
    jnz         .not_bytes
    mov         edx, eax                        ; two bytes: a << 8 | b
    shr         edx, 8
    movzx       edi, al
    or          edx, edi
    mov         rdi, [nw_enc + enc.bp]
    mov         [rdi + rdx * 2], nw_kw
.not_bytes:
    mov         nw_p, eax
    imul        nw_slotd, nw_p, RANK_MUL
    shrx        nw_slotd, nw_slotd, nw_shift
.probe:
    cmp         dword [nw_slots + nw_slot * 8], NO_RANK
    je          .put
    inc         nw_slotd
    and         nw_slotd, nw_mask
    jmp         .probe
.put:
    mov         [nw_slots + nw_slot * 8], nw_p
    mov         [nw_slots + nw_slot * 8 + 4], nw_kd
    inc         nw_k
    jmp         .insert
.done:
    mov         rdi, [nw_enc + enc.mask]        ; the tail: the first slots
    lea         rdi, [nw_slots + rdi * 8 + 8]   ; again, so that RANKV's load
    vmovdqu     ymm0, [nw_slots]                ; from any slot sees the
    vmovdqu     [rdi], ymm0                     ; probe run as it wraps
    vzeroupper
    mov         rax, nw_enc
    jmp         .ret
.fail_merges:
    mov         rdi, [nw_enc + enc.merges]
    lea         rsi, [nw_n * 4 + 4]
    call        asmbpe_unmap
.fail_slots:
    mov         rdi, [nw_enc + enc.slots]
    mov         rsi, [nw_enc + enc.slotbytes]
    call        asmbpe_unmap
.fail:
    mov         rdi, nw_enc
    mov         esi, (enc_size + 4095) & ~4095
    call        asmbpe_unmap
    xor         eax, eax
.ret:
    RET
ENDFUNC
%undef nw_merges
%undef nw_n
%undef nw_enc
%undef nw_k
%undef nw_kd
%undef nw_kw
%undef nw_p
%undef nw_slots
%undef nw_mask
%undef nw_shift
%undef nw_slot
%undef nw_slotd

;-----------------------------------------------------------------------------
; void asmbpe_enc_free(asmbpe_enc *e)          (e may be NULL)
;-----------------------------------------------------------------------------
FUNC asmbpe_enc_free, 1, 12, 0, e
    mov         rbx, eq
    test        rbx, rbx
    jz          .ret
    xor         ebp, ebp                        ; thread index
.thread:
    cmp         ebp, MAX_THREADS
    jae         .threads_done
    mov         rdi, [rbx + enc.ts + rbp * 8]
    test        rdi, rdi
    jz          .next
    call        ts_give                         ; to the pool, for the next
.next:                                          ; encoder
    inc         ebp
    jmp         .thread
.threads_done:
    mov         rdi, [rbx + enc.seed]
    mov         esi, SEED_SLOTS * seedslot_size
    call        asmbpe_unmap
    mov         rdi, [rbx + enc.slots]
    mov         rsi, [rbx + enc.slotbytes]
    call        asmbpe_unmap
    mov         rdi, [rbx + enc.bp]
    mov         esi, BP_BYTES
    call        asmbpe_unmap
    mov         rbp, [rbx + enc.nmerges]
    mov         rdi, [rbx + enc.merges]
    lea         rsi, [rbp * 4 + 4]
    call        asmbpe_unmap
    mov         rdi, [rbx + enc.tokoff]
    lea         rsi, [rbp * 8 + 257 * 8]
    call        asmbpe_unmap
    mov         rdi, [rbx + enc.tokbytes]
    mov         rsi, [rbx + enc.tokcap]
    call        asmbpe_unmap
    mov         rdi, rbx
    mov         esi, (enc_size + 4095) & ~4095
    call        asmbpe_unmap
.ret:
    RET
ENDFUNC

; build_tokens: rbx = encoder.  Fills enc.tokoff and enc.tokbytes.  rax = 0, or
; ASMBPE_ENOMEM.  Keeps rbx, r12-r15; clobbers the rest.
%define bt_enc       rbx   ; the encoder
%define bt_n         r12   ; merges
%define bt_off       r13   ; the id -> first byte table [256 + n + 1]: lengths first
%define bt_merges    r14   ; enc.merges
%define bt_total     r15   ; bytes in all
%define bt_totald    r15d  ; (bt_total, 32-bit)
%define bt_cap       rbp   ; bytes mapped for them
%define bt_bytes     rbp   ; (then) the bytes, mapped
%define bt_k         r8    ; the merge whose bytes are written
%define bt_kd        r8d   ; (bt_k, 32-bit)
PROC build_tokens
    SAVE        rbx, r12, r13, r14, r15, rbp    ; (6: calls aligned)
    mov         bt_n, [bt_enc + enc.nmerges]
    lea         rdi, [bt_n * 8 + 257 * 8]       ; offsets [256 + n + 1]
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         bt_off, rax
    xor         eax, eax                        ; lengths first, in off[id + 1]
.bytes:
    mov         qword [bt_off + rax * 8 + 8], 1
    inc         eax
    cmp         eax, 256
    jb          .bytes
    mov         bt_merges, [bt_enc + enc.merges]
    xor         ecx, ecx                        ; merge k
    mov         bt_totald, 256                  ; bytes in all
.merge_len:
    cmp         rcx, bt_n
    jae         .lengths_done
    mov         eax, [bt_merges + rcx * 4]
    movzx       edx, ax                         ; left
    shr         eax, 16                         ; right
    mov         rdx, [bt_off + rdx * 8 + 8]
    add         rdx, [bt_off + rax * 8 + 8]
    mov         [bt_off + rcx * 8 + 257 * 8], rdx
    add         bt_total, rdx
    cmp         bt_total, TOK_MAX_BYTES
    ja          .too_big
    inc         rcx
    jmp         .merge_len
.lengths_done:
    xor         eax, eax                        ; lengths -> start offsets
    xor         edx, edx
    lea         rcx, [bt_n + 256]
.prefix:
    add         rdx, [bt_off + rax * 8 + 8]
    mov         [bt_off + rax * 8 + 8], rdx
    inc         rax
    cmp         rax, rcx
    jb          .prefix
    lea         rdi, [bt_total + 4095 + 16]     ; the bytes, and 16 to spare
    and         rdi, ~4095
    mov         bt_cap, rdi
    call        asmbpe_map
    test        rax, rax
    jz          .free_off
    mov         [bt_enc + enc.tokcap], bt_cap
    mov         bt_bytes, rax
    xor         eax, eax
.byte_ids:
    mov         [bt_bytes + rax], al
    inc         eax
    cmp         eax, 256
    jb          .byte_ids
    xor         bt_kd, bt_kd                    ; merge k: left's bytes, right's
.merge_bytes:
    cmp         bt_k, bt_n
    jae         .built
    mov         rdi, [bt_off + bt_k * 8 + 256 * 8]
    add         rdi, bt_bytes
    mov         eax, [bt_merges + bt_k * 4]
    movzx       edx, ax
    shr         eax, 16
    mov         rsi, [bt_off + rdx * 8]
    mov         rcx, [bt_off + rdx * 8 + 8]
    sub         rcx, rsi
    add         rsi, bt_bytes
    rep movsb
    mov         rsi, [bt_off + rax * 8]
    mov         rcx, [bt_off + rax * 8 + 8]
    sub         rcx, rsi
    add         rsi, bt_bytes
    rep movsb
    inc         bt_k
    jmp         .merge_bytes
.built:
    mov         [bt_enc + enc.tokbytes], bt_bytes
    mov         [bt_enc + enc.tokoff], bt_off
    xor         eax, eax
    jmp         .ret
.too_big:
.free_off:
    mov         rdi, bt_off
    lea         rsi, [bt_n * 8 + 257 * 8]
    call        asmbpe_unmap
.enomem:
    mov         rax, ASMBPE_ENOMEM
.ret:
    RESTORE
ENDPROC
%undef bt_enc
%undef bt_n
%undef bt_off
%undef bt_merges
%undef bt_total
%undef bt_totald
%undef bt_cap
%undef bt_bytes
%undef bt_k
%undef bt_kd

; build_seed: rdi = encoder, with thread 0's state.  Maps enc.seed and fills
; it (encode.inc): in id order, each id of up to SEED_MAX_LEN bytes that
; those bytes encode to alone (every byte; a merge's checked by short_path
; in thread 0's room) goes to the first free slot of its line.  Builds the
; id -> bytes table first if needed.  rax = 0, ASMBPE_ENOMEM, or
; ASMBPE_EINVAL should a byte find its line full (never, with SHORT_HASH).
; Keeps rbx, rbp, r12-r15; clobbers the rest.
struc bs_frame                                  ; build_seed's stack frame
    .job:       resq 1                          ; a job of job.enc alone: the
                                                ; encoder (all short_path reads)
    .slot:      resq 1                          ; the id's free slot
    .len:       resq 1                          ; its length
                resq 1                          ; (unused)
    .buf:       resb 64                         ; 16 zero bytes, the id's
                                                ; bytes zero-padded to 48
    .ids:       resw 32                         ; their ids (up to 32)
                resq 1                          ; (6 pushes + the frame: aligned)
endstruc
%define bs_enc       r13   ; the encoder
%define bs_job       r12   ; a job for short_path (bs_frame.job)
%define bs_ts        rbx   ; thread 0's state: short_path's room
%define bs_tab       r15   ; the whole-token table being built
%define bs_id        r14   ; the id
%define bs_idd       r14d  ; (bs_id, 32-bit)
%define bs_off       rbp   ; enc.tokoff
%define bs_len       rdx   ; its length
%define bs_lend      edx   ; (bs_len, 32-bit)
%define bs_lenb      dl    ; (bs_len, 8-bit)
%define bs_slot      r8    ; its hash, then its free slot
PROC build_seed
    SAVE        rbx, rbp, r12, r13, r14, r15
    sub         rsp, bs_frame_size
    mov         bs_enc, rdi
    mov         [rsp + bs_frame.job + job.enc], bs_enc
    lea         bs_job, [rsp + bs_frame.job]
    cmp         qword [bs_enc + enc.tokoff], 0
    jne         .have_tokens
    mov         rbx, bs_enc
    call        build_tokens
    test        rax, rax
    jnz         .ret
.have_tokens:
    mov         edi, SEED_SLOTS * seedslot_size
    call        asmbpe_map
    test        rax, rax
    jz          .enomem
    mov         bs_tab, rax
    mov         bs_ts, [bs_enc + enc.ts]        ; short_path's room
    vpxor       xmm0, xmm0, xmm0
    vmovdqu     [rsp + bs_frame.buf], ymm0
    vmovdqu     [rsp + bs_frame.buf + 32], ymm0
    xor         bs_idd, bs_idd                  ; id
.id:
    mov         rax, [bs_enc + enc.nmerges]
    add         rax, 256
    cmp         bs_id, rax
    jae         .built
    mov         bs_off, [bs_enc + enc.tokoff]
    mov         rsi, [bs_off + bs_id * 8]
    mov         bs_len, [bs_off + bs_id * 8 + 8]
    sub         bs_len, rsi                     ; its length
    cmp         bs_len, SEED_MAX_LEN
    ja          .next
    add         rsi, [bs_enc + enc.tokbytes]    ; (padded by 16)
    lea         r9, [mask_tab + 64]
    sub         r9, bs_len
    vmovdqu     xmm0, [rsi]
    vpand       xmm0, xmm0, [r9]
    vmovdqu     [rsp + bs_frame.buf + 16], xmm0 ; (byte 15: 0)
    vpinsrb     xmm0, xmm0, bs_lend, 15         ; the key
    SHORT_HASH  xmm0, bs_slot, rcx
    shl         bs_slot, SD_SHIFT
    add         bs_slot, bs_tab
    cmp         byte [bs_slot + seedslot.len], 0
    je          .free
    xor         bs_slot, seedslot_size          ; the other slot of the line
    cmp         byte [bs_slot + seedslot.len], 0
    je          .free
    cmp         bs_idd, 256                     ; lower ids have both
    jb          .no_byte_slot
    jmp         .next
.free:
    mov         [rsp + bs_frame.slot], bs_slot
    mov         [rsp + bs_frame.len], bs_len
    cmp         bs_idd, 256
    jb          .store                          ; a byte is its own id
    lea         rsi, [rsp + bs_frame.buf + 16]
    lea         rdi, [rsp + bs_frame.ids]
    call        short_path
    lea         rax, [rsp + bs_frame.ids + 2]
    cmp         rdi, rax
    jne         .next                           ; more than one id
    movzx       eax, word [rsp + bs_frame.ids]
    cmp         eax, bs_idd
    jne         .next                           ; another id, same bytes
.store:
    mov         bs_slot, [rsp + bs_frame.slot]
    vmovdqu     xmm0, [rsp + bs_frame.buf + 16]
    vmovdqu     [bs_slot + seedslot.key], xmm0
    mov         bs_len, [rsp + bs_frame.len]
    mov         [bs_slot + seedslot.len], bs_lenb
    mov         rax, bs_id
    bts         rax, 63
    mov         [bs_slot + seedslot.val], rax
.next:
    inc         bs_id
    jmp         .id
.built:
    mov         [bs_enc + enc.seed], bs_tab
    xor         eax, eax
    jmp         .ret
.no_byte_slot:
    mov         rdi, bs_tab
    mov         esi, SEED_SLOTS * seedslot_size
    call        asmbpe_unmap
    mov         rax, ASMBPE_EINVAL
    jmp         .ret
.enomem:
    mov         rax, ASMBPE_ENOMEM
.ret:
    vzeroupper
    add         rsp, bs_frame_size
    RESTORE
ENDPROC
%undef bs_enc
%undef bs_job
%undef bs_ts
%undef bs_tab
%undef bs_id
%undef bs_idd
%undef bs_off
%undef bs_len
%undef bs_lend
%undef bs_lenb
%undef bs_slot
