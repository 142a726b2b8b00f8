;-----------------------------------------------------------------------------
; encode_short.asm — the short path: chunks of 2 .. SHORT_MAX bytes
; (short_path), and of up to SHORT16_MAX bytes (short16, entered from
; short_path).
;
; Called by chunk_miss / chunk_uncached (encode_cache.asm) and build_seed
; (encode_table.asm).  Reads the pair -> rank table with RANK / RANKV
; (PAIR_HOME, PROBE: encode.inc).
;-----------------------------------------------------------------------------
%include "asmbpe.inc"
%include "sys.inc"
%include "encode.inc"

section .rodata
align 64
; u16 1 << lane for lanes 0..15 (short16: a set of lanes from a bit mask)
bit_w:
%assign i 0
%rep 16
    dw 1 << i
%assign i i + 1
%endrep
; u16 lane numbers 0..15 (short16: the lane of a rank to replace)
lane_w:
%assign i 0
%rep 16
    dw i
%assign i i + 1
%endrep

section .text

; RANKV dst32, dst64, a32, b32 (%1-%4 as RANK's): RANK without a data-dependent branch while
; the probe run ends within 4 slots of the home slot (short16): one 32-byte
; load of the 4 slots {key, rank} (the table's tail repeats its first
; slots), their keys compared with P and with the empty key at once; the
; first slot that holds either gives the rank (an empty slot's rank dword
; is NO_RANK).  Longer runs go on slot by slot.  Needs r8-r10 as RANK, ymm9
; = all ones.  Clobbers ecx, esi, r11, ymm6, ymm7.
%macro RANKV 4
    PAIR_HOME   %3, %4
    vmovd       xmm6, ecx
    vpbroadcastd ymm6, xmm6
    vmovdqu     ymm7, [r8 + r11 * 8]
    vpcmpeqd    ymm6, ymm6, ymm7                ; key == P
    vpcmpeqd    ymm7, ymm7, ymm9                ; empty
    vpor        ymm6, ymm6, ymm7
    vmovmskps   esi, ymm6
    and         esi, 0x55                       ; (the key dwords)
    jz          %%far
    tzcnt       esi, esi
    lea         r11, [r8 + r11 * 8 + 4]
    mov         %1, [r11 + rsi * 4]
    jmp         %%done
%%far:                                          ; (rare) past the 4 slots
    add         r11d, 4
    and         r11d, r9d
    PROBE       %1, %2
%%done:
%endmacro

;=============================================================================
; short_path: rbx = thread state, r12 = job, rsi = bytes, rdx = n (2 ..
; SHORT_MAX), rdi = ids out.  Rounds: the lowest rank r among the adjacent
; pairs, then every occurrence of that pair, left to right, becomes id
; 256 + r.  The ids are worked on in place at rdi, the pair ranks in
; tstate.rank.  The rewrite keeps the ranks up to date as it goes: a pair of two
; copied ids keeps its old rank (rank[i - 2] when the copy came from i - 1),
; only pairs with the new id are looked up; the next round's lowest rank
; falls out of the same pass.  Returns rdi past the ids.  Keeps rbx, rbp,
; r12-r15.
;=============================================================================
%define sp_ts        rbx   ; the thread state (tstate.rank: the pair ranks)
%define sp_ids       rdi   ; the ids, worked on in place
%define sp_m         r13   ; ids now
%define sp_md        r13d  ; (sp_m, 32-bit)
%define sp_min       ebp   ; the lowest rank seen (the next round's merge)
%define sp_r         esi   ; this round's merge
%define sp_src       rax   ; i: the id read (a round)
%define sp_srcd      eax   ; (sp_src, 32-bit)
%define sp_dst       rdx   ; j: the id written (a round), the pair ranked
%define sp_dstd      edx   ; (sp_dst, 32-bit)
%define sp_was       r14d  ; 1: id[j - 1] is new this round
%define sp_new       r15d  ; 1: id[j] is new this round
%define sp_rk        r15   ; (a lookup) the rank found
%define sp_rkd       r15d  ; (sp_rk, 32-bit)
PROC short_path, 64
    push        rbp
    push        r13
    push        r14
    push        r15
    mov         rax, [r12 + job.enc]
    LOAD_TABLE  rax
    cmp         edx, SHORT16_MAX
    jbe         short16
    xor         eax, eax                        ; bytes -> ids
.widen:
    movzx       ecx, byte [rsi + rax]
    mov         [sp_ids + rax * 2], cx
    inc         eax
    cmp         eax, edx
    jb          .widen
    mov         sp_md, edx                      ; m: ids now
    mov         sp_min, NO_RANK                 ; the lowest rank
    xor         sp_dstd, sp_dstd
.rank:                                          ; rank[j] of (id[j], id[j+1])
    lea         eax, [sp_dstd + 1]
    cmp         eax, sp_md
    jae         .round
    movzx       ecx, word [sp_ids + sp_dst * 2]
    movzx       sp_rkd, word [sp_ids + sp_dst * 2 + 2]
    RANK        sp_rkd, sp_rk, ecx, sp_rkd
    mov         [sp_ts + tstate.rank + sp_dst * 4], sp_rkd
    cmp         sp_rkd, sp_min
    cmovb       sp_min, sp_rkd
    inc         sp_dstd
    jmp         .rank
.round:
    cmp         sp_min, NO_RANK
    je          .done
    mov         sp_r, sp_min                    ; r: this round's merge
    mov         sp_min, NO_RANK                 ; the next round's
    xor         sp_srcd, sp_srcd                ; i: read
    xor         sp_dstd, sp_dstd                ; j: write
    xor         sp_was, sp_was                  ; id[j-1] is new
.apply:
    cmp         sp_srcd, sp_md
    jae         .applied
    lea         ecx, [sp_srcd + 1]
    cmp         ecx, sp_md
    jae         .copy
    cmp         [sp_ts + tstate.rank + sp_src * 4], sp_r
    jne         .copy
    lea         ecx, [sp_r + 256]               ; (id[i], id[i+1]) -> 256 + r
    mov         [sp_ids + sp_dst * 2], cx
    add         sp_srcd, 2
    mov         sp_new, 1                       ; id[j] is new
    jmp         .written
.copy:
    movzx       ecx, word [sp_ids + sp_src * 2]
    mov         [sp_ids + sp_dst * 2], cx
    inc         sp_srcd
    xor         sp_new, sp_new
.written:
    test        sp_dstd, sp_dstd
    jz          .next_id
    mov         ecx, sp_was
    mov         sp_was, sp_new
    or          ecx, sp_new
    jnz         .lookup
    mov         ecx, [sp_ts + tstate.rank + sp_src * 4 - 8] ; both copied: rank[i-2]
    jmp         .set
.lookup:
    movzx       ecx, word [sp_ids + sp_dst * 2 - 2]
    movzx       sp_rkd, word [sp_ids + sp_dst * 2]
    RANK        sp_rkd, sp_rk, ecx, sp_rkd
    mov         ecx, sp_rkd
.set:
    mov         [sp_ts + tstate.rank + sp_dst * 4 - 4], ecx
    cmp         ecx, sp_min
    cmovb       sp_min, ecx
    inc         sp_dstd
    jmp         .apply
.next_id:
    mov         sp_was, sp_new
    inc         sp_dstd
    jmp         .apply
.applied:
    mov         sp_md, sp_dstd
    jmp         .round
.done:
    lea         sp_ids, [sp_ids + sp_m * 2]
    pop         r15
    pop         r14
    pop         r13
    pop         rbp
    ret
ENDPROC
%undef sp_ts
%undef sp_ids
%undef sp_m
%undef sp_md
%undef sp_min
%undef sp_r
%undef sp_src
%undef sp_srcd
%undef sp_dst
%undef sp_dstd
%undef sp_was
%undef sp_new
%undef sp_rk
%undef sp_rkd

;=============================================================================
; short16: short_path for 2 .. SHORT16_MAX bytes (most cache misses), entered
; from it with rbp, r13-r15 pushed, rax = the encoder and the merge table
; loaded (r8-r10).  The first ranks come from the byte-pair table (enc.bp).  One
; merge per step instead of rounds over the whole chunk: the pair ranks (u16,
; 0xFFFF: none) sit in ymm4, one lane per position; vphminposuw on each half
; gives the lowest rank and its leftmost lane i.  The pair at i joins the
; id at i with the next live one k: id[i] = 256 + r, k dies (its lane
; 0xFFFF), and only the lanes of the previous live position p and of i get
; new ranks (two lookups).  Taking the leftmost lowest rank each step is the
; rounds of the short path: every pair made by merge r involves the new id,
; so its rank is above r, and an overlapping pair at k dies with k.
; The lookups are RANKV (no data-dependent branch), and a merge whose next
; one is known early lets that one start at once (STEPS): the lookups of
; the two overlap.  Ids live in the thread state (tstate.rank, as u16 scratch),
; the live positions in a bit mask (r15d).  Writes the live ids at rdi;
; returns rdi past them.  Keeps rbx, r12 (pushed: the steps use them).
; Clobbers rax, rcx, rdx, rsi, r8-r11, ymm0-ymm9.
;=============================================================================
%define s16_bp       rbp   ; (setup) enc.bp: the byte-pair ranks (BP_LANES)
%define s16_ids      r13   ; the ids, by position (s16.ids, in tstate.rank)
%define s16_live     r15d  ; the live positions, one bit each
%define s16_n        r14d  ; (setup) n
%define s16_nq       r14   ; (s16_n, 64-bit)
%define s16_i        ebp   ; (STEPS) i: the lane merged
%define s16_iq       rbp   ; (s16_i, 64-bit)
%define s16_t        r14d  ; (STEPS) t = 256 + rank: the new id at i
%define s16_r2       r12d  ; (STEPS) r2: the lowest rank among the lanes left alone
%define s16_j        ebx   ; (STEPS) j: its leftmost lane
%define s16_low      edi   ; (STEPS) the lowest of the merge's new ranks
%define s16_out      rdi   ; (.out) where the next id goes
struc s16                                       ; short16's scratch, in tstate.rank
    .ids:       resw 16                         ; u16 ids, one per position
                resw 16                         ; (spare)
endstruc

; SET_LANE value32, lane32, width: u16 lane `lane` of ymm4 (width 16) or
; xmm4 (width 8) := value (ymm5 = lane_w).  %1 = value32, %2 = lane32
; (32-bit registers, kept), %3 = width (16 or 8).  Clobbers ymm6, ymm7.
%macro SET_LANE 3
    vmovd       xmm6, %1
    vmovd       xmm7, %2
  %if %3 == 16
    vpbroadcastw ymm6, xmm6
    vpbroadcastw ymm7, xmm7
    vpcmpeqw    ymm7, ymm7, ymm5
    vpblendvb   ymm4, ymm4, ymm6, ymm7
  %else
    vpbroadcastw xmm6, xmm6
    vpbroadcastw xmm7, xmm7
    vpcmpeqw    xmm7, xmm7, xmm5
    vpblendvb   xmm4, xmm4, xmm6, xmm7
  %endif
%endmacro

; MINPOS width, n, min32, lane32, t32 (%1 = width: 16 or 8, %2 = n: the
; vector register's number, %3 = min32, %4 = lane32 (out), %5 = t32: 32-bit
; registers): min = the lowest u16 lane of ymm<n>
; (width 16) or of xmm<n> (width 8), lane = the leftmost lane holding it
; (0xFFFF: every lane is "none").  Clobbers xmm1-xmm3, t.
%macro MINPOS 5
  %if %1 == 16
    vextracti128 xmm1, ymm%2, 1
    vphminposuw xmm2, xmm%2                     ; (min, lane) of lanes 0-7
    vphminposuw xmm3, xmm1                      ; and of lanes 8-15
    vmovd       %4, xmm2
    vmovd       %5, xmm3
    rorx        %4, %4, 16                      ; min << 16 | lane: the
    rorx        %5, %5, 16                      ; lower key is the lower
    add         %5, 8                           ; min, then the leftmost
    cmp         %5, %4                          ; lane (ties: the lower
    cmovb       %4, %5                          ; half)
    mov         %3, %4
    shr         %3, 16
    and         %4, 0xFF
  %else
    vphminposuw xmm2, xmm%2                     ; (min, lane) of lanes 0-7
    vmovd       %4, xmm2
    mov         %3, %4
    and         %3, 0xFFFF                      ; min
    shr         %4, 16                          ; its lane
  %endif
%endmacro

; STEPS width: short16's steps, on the ranks of ymm4 (width 16) or, for
; chunks of up to 9 bytes (8 pairs), of xmm4 alone (8: one vphminposuw, and
; xmm lane updates, a shorter chain per step).  Leaves to .out.  %1 = width
; (16 or 8).  Clobbers what short16 does (its banner), the s16_* registers
; marked (STEPS) included.
;
; Each merge also finds the next one early, when it can: the lowest rank r2
; (leftmost lane j) among the lanes the merge leaves alone (all but p, i and
; k).  When both new pairs of the merge rank above r2, (r2, j) is the next
; step's lowest rank (every other lane holds r2 or more, and the lanes with
; r2 are unchanged, so j is still the leftmost), and the next merge starts at
; once: its lookups do not wait for this merge's.  Otherwise the next step
; takes the lowest rank over all lanes again.  (A simulation on the misses of
; E100: 59 % of the merges need a full search.)

; BP_LANES xmm, first, count (%1 = xmm: the register filled, %2 = first, %3
; = count: assembly-time numbers): lanes 0 .. count-1 of xmm = the byte-pair
; ranks of pairs first .. first+count-1 of the chunk at rsi (rbp = enc.bp),
; inserted from the table (no store, so no wide reload of narrow stores;
; no loop, so no mispredicted exit).  Reads rsi[first .. first+count].
; Clobbers eax.  (movzx + rol rather than movbe, which the CPU check does
; not require.)
%macro BP_LANES 3
%assign j 0
%rep %3
    movzx       eax, word [rsi + %2 + j]        ; byte j + 1 << 8 | byte j,
    rol         ax, 8                           ; swapped: the table's index
    vpinsrw     %1, %1, [rbp + rax * 2], j
%assign j j + 1
%endrep
%endmacro

%macro STEPS 1
  %if %1 == 16
    %define V(r) ymm %+ r
  %else
    %define V(r) xmm %+ r
  %endif
%%step:
    MINPOS      %1, 4, edx, eax, ecx
    cmp         edx, 0xFFFF
    je          .out
%%merge:                                        ; merge rank edx at lane eax
    mov         s16_i, eax                      ; i
    add         edx, 256                        ; the new id t
    mov         [s16_ids + s16.ids + s16_iq * 2], dx
    mov         s16_t, edx
    bzhi        edx, s16_live, s16_i            ; p: the last live before i
    lzcnt       edx, edx                        ; (k > i does not change
    xor         edx, 31                         ; those bits; 63: none)
    lea         ecx, [s16_i + 1]                ; the live after i: k, the
    shrx        esi, s16_live, ecx              ; first, and q, the next
    tzcnt       eax, esi
    blsr        esi, esi
    add         eax, ecx                        ; k
    xor         r11d, r11d                      ; the lanes left alone: all
    bts         r11d, s16_i                     ; but p, i, k (p = 63: bit
    bts         r11d, eax                       ; 31, no lane)
    bts         r11d, edx
    vmovd       xmm0, r11d
    vpbroadcastw V(0), xmm0
    vpand       V(0), V(0), V(8)                ; (ymm8 = bit_w)
    vpcmpeqw    V(0), V(0), V(8)
    vpor        V(0), V(0), V(4)
    MINPOS      %1, 0, s16_r2, s16_j, r11d      ; r2, j
    btr         s16_live, eax                   ; k dies
    vmovd       xmm6, eax                       ; lane k := 0xFFFF
    vpbroadcastw V(6), xmm6
    vpcmpeqw    V(6), V(6), V(5)
    vpor        V(4), V(4), V(6)
    mov         eax, NO_RANK
    test        esi, esi
    jz          %%set_i
    tzcnt       esi, esi
    add         esi, ecx                        ; q
    movzx       esi, word [s16_ids + s16.ids + rsi * 2]
    RANKV       eax, rax, s16_t, esi            ; (t, id[q])
%%set_i:
    SET_LANE    eax, s16_i, %1                  ; lane i := rank
    mov         s16_low, eax                    ; the lowest new rank
    cmp         edx, 63
    je          %%next
    movzx       esi, word [s16_ids + s16.ids + rdx * 2]
    RANKV       eax, rax, esi, s16_t            ; (id[p], t)
    SET_LANE    eax, edx, %1                    ; lane p := rank
    cmp         eax, s16_low
    cmovb       s16_low, eax
%%next:
    cmp         s16_r2, 0xFFFF                  ; no lane left alone has a
    je          %%step                          ; merge
    cmp         s16_low, s16_r2                 ; a new pair ranks at or
    jbe         %%step                          ; below r2
    mov         eax, s16_j
    mov         edx, s16_r2
    jmp         %%merge
  %undef V
%endmacro

align 64
short16:
    push        rbx
    push        r12
    push        rdi
    mov         s16_bp, [rax + enc.bp]          ; (rax: the encoder)
    lea         s16_ids, [rbx + tstate.rank]
    vpmovzxbw   ymm0, [rsi]                     ; 16 bytes (padding past the
    vmovdqu     [s16_ids + s16.ids], ymm0       ; chunk: their lanes die)
    mov         s16_n, edx                      ; n
    vmovdqu     ymm5, [lane_w]
    vmovdqu     ymm8, [bit_w]
    vpcmpeqd    ymm9, ymm9, ymm9
    mov         s16_live, 1
    shlx        s16_live, s16_live, s16_n
    dec         s16_live                        ; live positions 0 .. n-1
    lea         eax, [s16_nq - 2]               ; lanes from n - 1 on: no
    vmovd       xmm1, eax                       ; pair (all ones)
    vpbroadcastw ymm1, xmm1
    vpcmpgtw    ymm1, ymm5, ymm1
    BP_LANES    xmm4, 0, 8                      ; ranks of pairs 0 .. 7
    cmp         s16_n, 9
    ja          .init16
    vpor        xmm4, xmm4, xmm1
    STEPS       8
.init16:
    BP_LANES    xmm6, 8, 7                      ; pairs 8 .. 14
    vinserti128 ymm4, ymm4, xmm6, 1
    vpor        ymm4, ymm4, ymm1
    STEPS       16
.out:                                           ; the live ids, in order
    pop         rdi
.out_id:
    tzcnt       ecx, s16_live
    movzx       eax, word [s16_ids + s16.ids + rcx * 2]
    mov         [s16_out], ax
    add         s16_out, 2
    blsr        s16_live, s16_live
    jnz         .out_id
    pop         r12
    pop         rbx
    pop         r15
    pop         r14
    pop         r13
    pop         rbp
    ret
%undef s16_bp
%undef s16_ids
%undef s16_live
%undef s16_n
%undef s16_nq
%undef s16_i
%undef s16_iq
%undef s16_t
%undef s16_r2
%undef s16_j
%undef s16_low
%undef s16_out
