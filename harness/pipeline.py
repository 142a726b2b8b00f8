"""The encode pipeline behind `asmbpe encode` / `decode` / `stats`: input files
(harness.corpora) encoded block by block as SPEC §5 lays documents out
(`encode_blocks`), the next block read on a thread while this one is encoded;
`encode_to_tok` writes the blocks into a `.tok` file (harness.tokfile's TokWriter) on a
writer thread, one block behind the encoding, and sums them up (`EncodeSummary`);
`decode_text` streams a `.tok` file back to text.

Documents and `.tok` versions: asmbpe's own tokenizers put `<|bos|>` at each document's
start and write `.tok` version 1, as always. A loaded vocabulary (or a `doc_token` other
than `<|bos|>` at the start, or none) writes version 2, whose document index says where
each document starts; `doc_token` (`asmbpe encode --doc-token NAME`) inserts one of the
vocabulary's specials at each document's start or end (`doc_token_at`), as GPT-2-style
pipelines do with `<|endoftext|>`; a loaded vocabulary inserts none by default."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import memory_phase
from .tokenizer import MASKBIT, N_SPECIAL, insert_per_document
from .tokfile import CHAT_MAX_VOCAB, TokFile, TokWriter

__all__ = ["BLOCK_BYTES", "PREFETCH_BLOCKS", "DEFAULT", "doc_token_of", "tok_version",
           "encode_blocks", "EncodeSummary", "encode_to_tok", "decode_text"]

DEFAULT = "default"         # doc_token: <|bos|> at the start for asmbpe's own, else none
NONE = "none"

BLOCK_BYTES = 8 << 20       # encode_blocks: about this many source bytes per library call
# `asmbpe encode` without --memory reads this many blocks ahead, so that the reader
# decompresses the next Parquet row group while the blocks of this one are encoded
# (one ahead: the encoder waited 0.28 s at the row-group boundaries of english.parquet)
PREFETCH_BLOCKS = 8


def doc_token_of(tokenizer, doc_token=DEFAULT, doc_token_at: str = "start"):
    """(id or None, "start" | "end"): the special inserted per document. doc_token: a
    special's name, "none", or DEFAULT (<|bos|> at the start for asmbpe's own
    tokenizers, none for loaded vocabularies). ValueError for a name the tokenizer does
    not have."""
    if doc_token_at not in ("start", "end"):
        raise ValueError(f"--doc-token-at must be start or end, got {doc_token_at!r}")
    if doc_token in (None, NONE):
        return None, doc_token_at
    if doc_token == DEFAULT:
        return (None, "start") if tokenizer.is_loaded else (tokenizer.bos_id, "start")
    specials = tokenizer.specials
    if doc_token not in specials:
        raise ValueError(f"--doc-token {doc_token}: not a special token of {tokenizer.name} "
                         f"(its specials: {', '.join(specials) or 'none'})")
    return specials[doc_token], doc_token_at


def tok_version(tokenizer, doc_token=DEFAULT, doc_token_at: str = "start",
                chat: bool = False) -> tuple[int, int]:
    """(.tok version, token width) encode_to_tok writes: version 1 (width 2) for
    asmbpe's own tokenizers with <|bos|> at each document's start (and every chat
    file of theirs), version 2 otherwise, width 4 when ids need u32."""
    from .tokfile import VERSION, VERSION_INDEXED
    width = tokenizer.dtype.itemsize
    if not tokenizer.is_loaded and width == 2:
        if chat or doc_token_of(tokenizer, doc_token, doc_token_at) == (
                tokenizer.bos_id, "start"):
            return VERSION, 2
    return VERSION_INDEXED, width


def encode_blocks(tokenizer, inputs, *, chat: bool = False, threads: int | None = None,
                  separator=None, batch_bytes: int = BLOCK_BYTES, prefetch_depth: int = 1,
                  doc_token=DEFAULT, doc_token_at: str = "start", counts: bool = False,
                  read_options=None):
    """Encode input files (harness.corpora formats) block by block, as SPEC §5 lays
    documents out: yields (tokens uint16, documents, source bytes) per block of about
    `batch_bytes` source bytes. Plain documents become <|bos|> + text
    (`Tokenizer.encode_many(bos=True)`); with `chat`, the files hold conversations
    (`messages`), each rendered by `Tokenizer.render_chat` (MASKBIT on what the model
    should learn). The next block (up to `prefetch_depth` blocks) is read on a thread
    while this one is encoded. InputError for bad input, naming the file and line or
    row. doc_token / doc_token_at: the special put at each plain document's start or
    end (`doc_token_of`). counts: yield a fourth item, each document's token count
    (uint64), for the version-2 index. read_options (harness.corpora.ReadOptions) /
    separator: how documents are read (see harness.corpora.iter_documents)."""
    from .buffers import batch_bytes_of
    from .corpora import conversation_bytes, iter_batches, iter_conversation_batches, prefetch

    if chat:
        if tokenizer.vocab_size > CHAT_MAX_VOCAB:
            raise ValueError(f"chat encoding needs vocab_size <= {CHAT_MAX_VOCAB} (MASKBIT "
                             f"0x8000 marks the tokens to learn); the tokenizer has "
                             f"{tokenizer.vocab_size}")
        for convs in prefetch(iter_conversation_batches(inputs, batch_bytes,
                                                        read_options=read_options),
                              prefetch_depth):
            with memory_phase("encoding"):
                parts = [tokenizer.render_chat(c) for c in convs]
                tokens = np.concatenate(parts) if parts else np.zeros(0, np.uint16)
            out = (tokens, len(convs), sum(map(conversation_bytes, convs)))
            yield out + (np.array(list(map(len, parts)), dtype=np.uint64),) if counts else out
    else:
        token_id, at = doc_token_of(tokenizer, doc_token, doc_token_at)
        bos = token_id is not None and at == "start" and token_id == (
            None if tokenizer.is_loaded else tokenizer.bos_id)

        # the encoder's tables are built while the first block is read
        def warm():
            with memory_phase("building the encoder's tables"):
                tokenizer.encode_many([b""], threads, bos=bos)

        for docs in prefetch(iter_batches(inputs, batch_bytes, separator=separator,
                                          read_options=read_options),
                             prefetch_depth, meanwhile=warm):
            with memory_phase("encoding"):
                tokens, doc_counts = tokenizer.encode_many(docs, threads, bos=bos)
                if token_id is not None and not bos:
                    tokens, doc_counts = insert_per_document(tokens, doc_counts, token_id, at)
            out = (tokens, len(docs), batch_bytes_of(docs))
            yield out + (doc_counts,) if counts else out


@dataclass
class EncodeSummary:
    """What encode_to_tok wrote: totals, and the specials among the tokens."""

    path: Path
    tokens: int
    documents: int
    source_bytes: int
    special_tokens: int

    @property
    def bytes_per_token(self) -> float:
        """Source bytes per text token (specials left out); 0 without text tokens."""
        text = self.tokens - self.special_tokens
        return self.source_bytes / text if text else 0.0


@memory_phase("writing the .tok file")    # (reading and encoding name their own)
def encode_to_tok(tokenizer, inputs, output, *, chat: bool = False,
                  threads: int | None = None, separator=None, progress=None,
                  batch_bytes: int = BLOCK_BYTES, prefetch_depth: int = 1,
                  doc_token=DEFAULT, doc_token_at: str = "start",
                  read_options=None) -> EncodeSummary:
    """Encode the input files (see encode_blocks) into the `.tok` file `output`,
    atomically (TokWriter: nothing is left at `output` when anything fails). progress,
    when given, is called with the source bytes done after each block. batch_bytes:
    source bytes per block (memory in flight is about 8 blocks, plus prefetch_depth - 1
    read ahead; each block's tokens are written on a writer thread while the next block
    is encoded). doc_token / doc_token_at / read_options: see encode_blocks; the `.tok`
    version follows `tok_version`."""
    from concurrent.futures import ThreadPoolExecutor

    version, width = tok_version(tokenizer, doc_token, doc_token_at, chat)
    token_id, _ = doc_token_of(tokenizer, doc_token, doc_token_at)
    special_ids = np.array(sorted(tokenizer.specials.values()), dtype=np.int64)
    specials = done = 0
    # blocks are written on a thread, one behind the encoding (the file write
    # releases the GIL): the pool's exit waits for the last write, then the
    # TokWriter's exit completes the file, or removes it after an error
    with TokWriter(output, tokenizer.merges_hash, chat=chat, version=version,
                   width=width) as w, \
            ThreadPoolExecutor(1, thread_name_prefix="asmbpe-writer") as pool:
        pending = None
        for tokens, docs, nbytes, counts in encode_blocks(
                tokenizer, inputs, chat=chat, threads=threads, separator=separator,
                batch_bytes=batch_bytes, prefetch_depth=prefetch_depth,
                doc_token=doc_token, doc_token_at=doc_token_at, counts=True,
                read_options=read_options):
            if chat:                            # roles, <|end|>, <|bos|>
                plain = tokens & np.uint16(~MASKBIT & 0xFFFF)
                specials += int(np.count_nonzero(np.isin(plain, special_ids)))
            elif token_id is not None:          # one doc token per document: the
                specials += docs                # text never becomes a special
            if pending is not None:
                pending.result()                # the previous block is written
            pending = pool.submit(w.write, tokens, docs, nbytes,
                                  counts if version == 2 else None)
            done += nbytes
            if progress is not None:
                progress(done)
        if pending is not None:
            pending.result()
    return EncodeSummary(w.path, w.tokens, w.documents, w.source_bytes, specials)


def decode_text(tok: TokFile, tokenizer, errors: str = "replace",
                block_tokens: int = 1 << 20):
    """The text of a `.tok` file in pieces (str), block by block: the bytes of every
    token (specials as their names, MASKBIT stripped) decoded as UTF-8 with `errors`;
    a character cut between two blocks is decoded whole, so the pieces join to
    tokenizer.decode(all tokens, errors)."""
    import codecs

    dec = codecs.getincrementaldecoder("utf-8")(errors)
    for start in range(0, tok.n_tokens, block_tokens):
        ids = tok.ids(start, start + block_tokens)
        bad = ids >= tokenizer.vocab_size
        if bad.any():
            pos = int(np.argmax(bad))
            raise ValueError(f"id {int(tok.tokens[start + pos])} at position {start + pos} "
                             f"is not a token (vocab_size {tokenizer.vocab_size})")
        yield dec.decode(tokenizer.decode_bytes(ids))
    tail = dec.decode(b"", final=True)
    if tail:
        yield tail
