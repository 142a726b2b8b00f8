/*
 * asmbpe.h — the C ABI of libasmbpe.so, and the ONLY place its prototypes are
 * written.  The harness feeds this file to cffi's cdef (harness/_lib.py strips
 * the preprocessor lines), so keep to plain declarations and enums.
 *
 * Conventions (SPEC §2): System V AMD64; rbx, rbp, r12-r15 and DF preserved;
 * vzeroupper before returning from code that touched ymm.  Every input text
 * buffer has ASMBPE_PAD readable bytes before its start and after its end; the
 * library may read that padding but never writes outside the ranges it is
 * given.  Errors are negative status codes.  Requires AVX2, BMI1, BMI2, SSE4.2, POPCNT, LZCNT.
 */
#ifndef ASMBPE_H
#define ASMBPE_H
#include <stddef.h>
#include <stdint.h>

enum {
    ASMBPE_PAD    = 64,     /* readable bytes around every input buffer */

    ASMBPE_OK     = 0,
    ASMBPE_EINVAL = -1,     /* an argument is out of range */
    ASMBPE_ENOMEM = -2,     /* an allocation inside the library failed */

    /* asmbpe_cpu_flags() bits */
    ASMBPE_CPU_AVX2    = 1,     /* reported only when the OS saves ymm */
    ASMBPE_CPU_BMI1    = 2,
    ASMBPE_CPU_BMI2    = 4,
    ASMBPE_CPU_OSYMM   = 8,     /* OSXSAVE and xgetbv(0) & 6 == 6 */
    ASMBPE_CPU_XGETBV1 = 16,    /* xgetbv(1) (XINUSE) available */
    ASMBPE_CPU_SSE42   = 32,    /* crc32 (the encoder's chunk hash) */
    ASMBPE_CPU_POPCNT  = 64,
    ASMBPE_CPU_LZCNT   = 128,   /* (ABM on AMD) */
};

/* cpuflags.asm: cpuid + xgetbv, the ASMBPE_CPU_* bits of this machine. */
uint32_t asmbpe_cpu_flags(void);

/* memeq.asm: 1 if the n bytes at a and b are equal, else 0.
 * Reads up to 7 bytes before a and b (the front padding) when n < 8. */
int asmbpe_memeq(const void *a, const void *b, size_t n);

/* fnv.asm: FNV-1a 64 of the n bytes at p (tokenizer.bin's merge-table hash,
 * SPEC §7). Reads exactly those n bytes. */
uint64_t asmbpe_fnv1a64(const void *p, size_t n);

/* The pre-tokenizers (SPEC §3 and §10), by the id tokenizer.bin stores. */
enum {
    ASMBPE_PRETOK_SEED = 1,         /* SPEC §3: byte-level classes */
    ASMBPE_PRETOK_NANOCHAT = 2,     /* SPEC §10: exact Unicode classes */
    ASMBPE_PRETOK_CL100K = 3,
    ASMBPE_PRETOK_O200K = 4,
    ASMBPE_PRETOK_GPT2 = 5,
};

/* pretok.asm: end offset of the chunk of text[0, len) under pre-tokenizer
 * pretok that starts at the chunk boundary pos; len when pos >= len;
 * (size_t)ASMBPE_EINVAL for an unknown pretok. */
size_t asmbpe_pretok_next(const uint8_t *text, size_t len, size_t pos,
                          uint64_t pretok);

/* pretok.asm: split text[pos, len) into chunks with pre-tokenizer pretok,
 * writing up to cap chunk end offsets to out; returns how many were written.
 * Fewer than cap: the text is done.  Exactly cap: continue with
 * pos = out[cap - 1].  out[n..cap) may be overwritten (scratch).
 * ASMBPE_EINVAL for an unknown pretok. */
int64_t asmbpe_split_offsets(const uint8_t *text, size_t len, size_t pos,
                             uint64_t *out, size_t cap, uint64_t pretok);

/* ---- training (SPEC §4) ---------------------------------------------------- */

enum {
    ASMBPE_ETHREAD = -4,    /* a thread could not be started */
    ASMBPE_MAX_THREADS = 256,
};

/* wordtab.asm: the persistent word table.  It owns copies of the word bytes, so
 * text can be counted in batches and freed after each. */
typedef struct asmbpe_wordtab asmbpe_wordtab;
asmbpe_wordtab *asmbpe_wordtab_new(void);               /* NULL: out of memory */
void asmbpe_wordtab_free(asmbpe_wordtab *t);
int64_t asmbpe_wordtab_size(const asmbpe_wordtab *t);   /* unique words */
int64_t asmbpe_wordtab_key_bytes(const asmbpe_wordtab *t);
uint64_t asmbpe_wordtab_total(const asmbpe_wordtab *t); /* chunks counted */

/* count.asm: add the chunks (pre-tokenizer pretok) of documents
 * text[doc_ends[i-1], doc_ends[i]) (the first starting at 0) of at most
 * max_word_bytes bytes (0: no limit) to t, on `threads` threads.  Returns the
 * unique words in t, or a negative status (ASMBPE_EINVAL: threads, pretok). */
int64_t asmbpe_count_words(asmbpe_wordtab *t, const uint8_t *text,
                           const uint64_t *doc_ends, uint64_t n_docs,
                           uint64_t threads, uint64_t max_word_bytes,
                           uint64_t pretok);

/* wordtab.asm: every word of t, in table order: bytes concatenated (key_bytes of
 * them), end offsets and counts (size entries each).  Returns the words. */
int64_t asmbpe_wordtab_export(const asmbpe_wordtab *t, uint8_t *bytes,
                              uint64_t *ends, uint64_t *counts);

/* wordtab.asm: add n words with their counts to t, word i being
 * bytes[ends[i-1], ends[i]) (the first from 0), as asmbpe_wordtab_export
 * writes them; bytes has ASMBPE_PAD padding.  For merging tables counted
 * elsewhere.  Returns the unique words in t, or a negative status. */
int64_t asmbpe_wordtab_add(asmbpe_wordtab *t, const uint8_t *bytes,
                           const uint64_t *ends, const uint64_t *counts,
                           uint64_t n);

/* train.asm: learn up to n_merges merges (SPEC §4) from the words of t.
 * merges[i] = left | right << 16 makes token 256 + i; counts[i] its count.
 * Stops early when no pair has min_count (0 counts as 1).  flags: ASMBPE_NAIVE
 * (one thread; every pair recounted for every merge), ASMBPE_VERIFY (recount
 * at the end and compare; winning counts must never go up), ASMBPE_RELEASE_WORDS
 * (the caller is done with t: its slots and word bytes are given back once the
 * words are laid out, so the merge loop's tables reuse those pages; t then reads
 * as empty and only asmbpe_wordtab_free may follow).  stats: at least
 * ASMBPE_TS_COUNT entries.  Returns the merges learned, ASMBPE_EVERIFY (merges
 * and stats still written; the stats name the first violation), or another
 * negative status. */
enum {
    ASMBPE_NAIVE = 1,
    ASMBPE_VERIFY = 2,
    ASMBPE_RELEASE_WORDS = 4,
    ASMBPE_WIDE_ONLY = 8,   /* asmbpe_train32: u32 tokens from the first merge */
    ASMBPE_EVERIFY = -5,
    ASMBPE_TS_CYC_LAYOUT = 0, ASMBPE_TS_CYC_PAIRS, ASMBPE_TS_CYC_LOOP,
    ASMBPE_TS_CYC_SCAN, ASMBPE_TS_CYC_APPLY, ASMBPE_TS_CYC_HEAP,
    ASMBPE_TS_CYC_VERIFY, ASMBPE_TS_CYC_COMPACT,
    ASMBPE_TS_WORDS, ASMBPE_TS_TOKENS, ASMBPE_TS_PAIRS, ASMBPE_TS_MERGES,
    ASMBPE_TS_REWRITTEN, ASMBPE_TS_COMPACTIONS,
    ASMBPE_TS_VERIFY_MERGE, ASMBPE_TS_VERIFY_PAIR, ASMBPE_TS_VERIFY_KEPT,
    ASMBPE_TS_VERIFY_TRUE, ASMBPE_TS_THREADS, ASMBPE_TS_PEAK_BYTES,
    ASMBPE_TS_SOLO_MERGE,   /* first merge thread 0 ran alone (~0: none) */
    ASMBPE_TS_PER_MERGE,    /* in: 0, or a uint64_t * to 4 x n_merges entries:
                               merge m's cycles (from being chosen to the next
                               merge chosen), words rewritten, pairs replaced,
                               chunks of 128 positions scanned (all threads) */
    ASMBPE_TS_NARROW,       /* asmbpe_train32: in: merges to learn on u16 tokens
                               before widening to u32 (0: up to 65,279, as many
                               as u16 ids allow); out: merges learned so */
    ASMBPE_TS_HANDOFF,      /* (internal: 0 on return) */
    ASMBPE_TS_PT_SLOTS,     /* in: 0, or the pair table's first size in slots (a
                               power of two >= 1024: tests make it grow); out:
                               its size at the end */
    ASMBPE_TS_PT_REHASHES,  /* pair-table rehashes (in place, the same size or
                               doubled) */
    ASMBPE_TS_PT_KEEP_DEAD, /* in: 0, or 1: a new pair never takes the slot of a
                               pair whose count fell to 0 (tests: the table then
                               fills and is rehashed at its own size) */
    ASMBPE_TS_COUNT
};
int64_t asmbpe_train(const asmbpe_wordtab *t, uint64_t n_merges,
                     uint64_t min_count, uint64_t threads, uint64_t flags,
                     uint32_t *merges, uint64_t *counts, uint64_t *stats);
/* train.asm assembled with u32 tokens (asm/train.inc, TOK32): the same
 * training for vocabularies above 65,535 ids, up to 2^20 - 256 merges (ids
 * below 2^20); merges[i] = left | right << 32 (a uint32 [n][2] array). Same
 * merges and counts as asmbpe_train wherever both can run.  It learns its
 * first merges (stats[ASMBPE_TS_NARROW], 65,279 by default) on u16 tokens,
 * as asmbpe_train does, then widens the words to u32 in place and goes on;
 * ASMBPE_WIDE_ONLY (and ASMBPE_NAIVE) run on u32 tokens throughout. */
int64_t asmbpe_train32(const asmbpe_wordtab *t, uint64_t n_merges,
                       uint64_t min_count, uint64_t threads, uint64_t flags,
                       uint64_t *merges, uint64_t *counts, uint64_t *stats);

/* ---- the rank encoder (SPEC §11): loaded vocabularies, u32 ids ------------- */

/* encode_rank.asm: an encoder of a loaded vocabulary.  pairs: n_pairs rows
 * {left, right, priority, result} (harness.vocab.pair_table: no pair twice,
 * ids and priorities < n_tokens, one result per priority); byte_ids[256]: the
 * id of each byte;
 * token i is tok_bytes[tok_offsets[i], tok_offsets[i + 1]).  flags:
 * ASMBPE_RENC_WHOLE (a chunk that is a token encodes as it: tiktoken, HF
 * ignore_merges); ASMBPE_RENC_RANKS (implies WHOLE: the pairs are every split
 * of a token into two tokens with priority = result = the token's id, as a
 * tiktoken rank file's are, so the encoder may find a pair's priority from
 * its bytes); ASMBPE_RENC_NOGROW (the per-thread tables keep their first
 * size and go back to the seed when full, where they would grow: for tests
 * of that path); ASMBPE_RENC_SPLIT (a chunk of 16..128 bytes met for the
 * first time is cut where no token's bytes span, its pieces encoded apart:
 * the caller promises that every token's bytes merge to that token where
 * ASMBPE_RENC_WHOLE is set, as in cl100k_base and o200k_base).  NULL when
 * out of memory or n_tokens is 0 or over 2^20 - 1.
 * Each thread index keeps a state with the encoder, made on first use: a
 * chunk table of 32 MB that starts as a copy of the bytes and short tokens
 * and doubles when full up to 128 MB (then back to the copy), an arena of
 * 4 to 64 MB for its chunks of 5+ ids, a 20 MB table of chunks of 16..128
 * bytes, an 8 MB cache, scratch.  Calls on one encoder must not overlap. */
typedef struct asmbpe_renc asmbpe_renc;
enum { ASMBPE_RENC_WHOLE = 1, ASMBPE_RENC_RANKS = 2, ASMBPE_RENC_NOGROW = 4,
       ASMBPE_RENC_SPLIT = 8 };
asmbpe_renc *asmbpe_renc_new(const uint32_t *pairs, uint64_t n_pairs,
                             const uint32_t *byte_ids, const uint8_t *tok_bytes,
                             const uint64_t *tok_offsets, uint64_t n_tokens,
                             uint64_t flags);
void asmbpe_renc_free(asmbpe_renc *e);
/* a rank file's pair table for asmbpe_renc_new: for every token i of 2+
 * bytes (token i is tok_bytes[tok_offsets[i], tok_offsets[i + 1]), tokens
 * distinct) and every split of its bytes into tokens a then b, the row
 * {a, b, i, i}, in token order.  rows: room for one row per split point
 * (the sum of length - 1 over tokens of 2+ bytes).  Returns the rows written, or ASMBPE_EINVAL (n_tokens over
 * 2^20 - 1), ASMBPE_ENOMEM. */
int64_t asmbpe_rank_pairs(const uint8_t *tok_bytes, const uint64_t *tok_offsets,
                          uint64_t n_tokens, uint32_t *rows);
/* the ids of one chunk (len >= 1 bytes, ASMBPE_PAD readable after it) into
 * out (room for len ids; out[n..len) may be overwritten): the lowest-priority
 * adjacent pair merges first, leftmost first.  Returns the ids n, or
 * ASMBPE_ENOMEM. */
int64_t asmbpe_renc_chunk(asmbpe_renc *e, const uint8_t *chunk, size_t len,
                          uint32_t *out);
/* the ids of a padded text, split with pre-tokenizer pretok, into out (cap >=
 * len; out[n..len) may be overwritten).  Returns the ids n, or ASMBPE_EINVAL
 * (cap < len, unknown pretok), ASMBPE_ENOMEM. */
int64_t asmbpe_renc_text(asmbpe_renc *e, const uint8_t *text, size_t len,
                         uint64_t pretok, uint32_t *out, size_t cap);
/* documents text[doc_ends[i-1], doc_ends[i]) (the first from 0; text padded)
 * on `threads` threads; counts[i] = document i's ids, and out (room for
 * doc_ends[n_docs-1] ids) holds them all in document order.  Returns the ids
 * in all, or ASMBPE_EINVAL (threads 0 or > ASMBPE_MAX_THREADS, unknown pretok),
 * ASMBPE_ENOMEM, ASMBPE_ETHREAD. */
/* the bytes of n ids (each < n_tokens) into out: returns the bytes written,
 * ASMBPE_EINVAL for an id out of range, or -(bytes needed) - 16 when they do
 * not fit in cap (nothing written past cap). */
int64_t asmbpe_renc_decode(const asmbpe_renc *e, const uint32_t *ids, uint64_t n,
                           uint8_t *out, uint64_t cap);
int64_t asmbpe_renc_encode(asmbpe_renc *e, const uint8_t *text,
                           const uint64_t *doc_ends, uint64_t n_docs,
                           uint64_t threads, uint64_t pretok, uint32_t *out,
                           uint64_t *counts);

/* asmbpe_renc_encode of documents where they lie (docs[i], doc_ends[i] -
 * doc_ends[i-1] bytes, no padding needed): each is copied by the thread that
 * encodes it into a padded buffer of its own, so the caller never joins them.
 * Same out, counts and result. */
int64_t asmbpe_renc_encode_docs(asmbpe_renc *e, const uint8_t *const *docs,
                                const uint64_t *doc_ends, uint64_t n_docs,
                                uint64_t threads, uint64_t pretok,
                                uint32_t *out, uint64_t *counts);

/* ---- encoding (SPEC §6) ----------------------------------------------------- */

/* encode.asm: the encoder of a merge table: merges[i] = left | right << 16
 * makes id 256 + i (the caller has checked the ids and that no pair repeats).
 * It keeps a chunk cache per thread index across calls (4 MB each), and a
 * table of the chunks that are one id (each byte, and each id of up to 15
 * bytes that its bytes encode to: 2 MB, built by the first cached call and
 * shared by the threads).  NULL when out of memory or n_merges > 65279. */
typedef struct asmbpe_enc asmbpe_enc;
asmbpe_enc *asmbpe_enc_new(const uint32_t *merges, uint64_t n_merges);
void asmbpe_enc_free(asmbpe_enc *e);

/* encode.asm: asmbpe_enc_free gives each thread's state (its cache and
 * buffers, 4 MB and more) to a process-wide pool of up to 64, from which the
 * next encoder's threads take theirs, cleared, before they map new ones (on
 * some machines first-touching new pages costs more than the encoding that
 * writes them).  asmbpe_enc_trim unmaps every state in the pool and returns
 * how many; safe at any time, from any thread. */
uint64_t asmbpe_enc_trim(void);

/* encode.asm: the bytes of ids[0, n), each id < 256 + n_merges (the caller
 * strips MASKBIT and handles specials): written to out if they fit in cap, their
 * number returned either way; ASMBPE_EINVAL at an id out of range,
 * ASMBPE_ENOMEM.  The id -> bytes table is built on the first call. */
int64_t asmbpe_decode(asmbpe_enc *e, const uint16_t *ids, uint64_t n,
                      uint8_t *out, uint64_t cap);

/* encode.asm: counters of thread index tid (~0: all threads summed) over all
 * calls so far, ASMBPE_ES_COUNT entries: chunks, hits (chunks that were
 * not encoded: found among the one-id chunks or in the cache; chunks - hits
 * were encoded), long chunks (heap path).  The cycle counts are kept only by
 * calls with ASMBPE_ENC_PROFILE: pre-tokenizer, cache (hashing, probing,
 * copying hits), merge (cache misses and uncached chunks), write (moving ids
 * into document order, thread 0, after the others), total (the thread's run,
 * not counting write). */
enum {
    ASMBPE_ES_CHUNKS = 0, ASMBPE_ES_HITS, ASMBPE_ES_LONGS,
    ASMBPE_ES_CYC_PRETOK, ASMBPE_ES_CYC_CACHE, ASMBPE_ES_CYC_MERGE,
    ASMBPE_ES_CYC_WRITE, ASMBPE_ES_CYC_TOTAL,
    ASMBPE_ES_COUNT
};
void asmbpe_enc_stats(const asmbpe_enc *e, uint64_t tid, uint64_t *out);

/* encode.asm: encode documents text[doc_ends[i-1], doc_ends[i]) (the first
 * from 0) on `threads` threads, blocks of 256 documents at a time.  out must
 * hold doc_ends[n_docs - 1] + n_docs ids; it receives every document's ids in
 * order, counts[i] of them for document i.  flags: ASMBPE_ENC_BOS puts
 * <|bos|> (id 256 + n_merges) first in each document; ASMBPE_ENC_NOCACHE
 * bypasses the chunk caches; id << ASMBPE_ENC_PRETOK_SHIFT names the
 * pre-tokenizer (0 there: seed); ASMBPE_ENC_PROFILE keeps the cycle counters of
 * asmbpe_enc_stats; ASMBPE_ENC_CLAIMS skips the final move into order (for a
 * caller that copies the ids out anyway): the threads claim runs of documents.
 * Thread 0 takes its runs from the front: documents 0..f-1, their ids one after
 * another, in order, from front[0] (front NULL: from out[0]), none marked.  The
 * other threads take theirs from the back: a run starting at document d >= f
 * leaves its documents' ids one after another from out[doc_ends[d-1] + d],
 * with bit 63 set in counts[d] (the caller clears it).  So with one thread
 * every id is in order from front[0], and nothing is marked.  front must hold
 * as many ids as out; it is not read without ASMBPE_ENC_CLAIMS.
 * Returns the ids written or a negative status (then out, front and counts
 * hold nothing meaningful).  One call at a time per encoder. */
enum {
    ASMBPE_ENC_BOS = 1,
    ASMBPE_ENC_NOCACHE = 2,
    ASMBPE_ENC_PROFILE = 4,
    ASMBPE_ENC_CLAIMS = 8,
    ASMBPE_ENC_PRETOK_SHIFT = 24,   /* bits 24-31: the pre-tokenizer id
                                       (0: seed) */
};
int64_t asmbpe_encode(asmbpe_enc *e, const uint8_t *text,
                      const uint64_t *doc_ends, uint64_t n_docs,
                      uint64_t threads, uint64_t flags,
                      uint16_t *out, uint64_t *counts, uint16_t *front);

/* encode.asm: asmbpe_encode on documents that lie anywhere: document i is
 * docs[i][0, doc_ends[i] - doc_ends[i-1]) (doc_ends still cumulative), read
 * exactly, no padding needed.  Each thread copies the document it encodes into
 * a padded buffer of its own (kept with the encoder), so the caller never packs
 * the documents into one text.  Same out, counts, flags, front and result. */
int64_t asmbpe_encode_docs(asmbpe_enc *e, const uint8_t *const *docs,
                           const uint64_t *doc_ends, uint64_t n_docs,
                           uint64_t threads, uint64_t flags,
                           uint16_t *out, uint64_t *counts, uint16_t *front);

/* threads.asm: peak bytes the library has had mapped; reset != 0 restarts the
 * peak from what is mapped now. */
uint64_t asmbpe_mapped_peak(int reset);

#endif
