"""The encode pipeline behind `asmbpe encode` / `decode` / `stats`: input files
(harness.corpora) encoded block by block as SPEC §5 lays documents out
(`encode_blocks`), the next block read on a thread while this one is encoded;
`encode_to_tok` writes the blocks into a `.tok` file (harness.tokfile's TokWriter) on a
writer thread, one block behind the encoding, and sums them up (`EncodeSummary`);
`decode_text` streams a `.tok` file back to text."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .tokenizer import MASKBIT, N_SPECIAL
from .tokfile import CHAT_MAX_VOCAB, TokFile, TokWriter

__all__ = ["BLOCK_BYTES", "PREFETCH_BLOCKS", "encode_blocks", "EncodeSummary",
           "encode_to_tok", "decode_text"]

BLOCK_BYTES = 8 << 20       # encode_blocks: about this many source bytes per library call
# `asmbpe encode` without --memory reads this many blocks ahead, so that the reader
# decompresses the next Parquet row group while the blocks of this one are encoded
# (one ahead: the encoder waited 0.28 s at the row-group boundaries of english.parquet)
PREFETCH_BLOCKS = 8


def encode_blocks(tokenizer, inputs, *, chat: bool = False, threads: int | None = None,
                  separator=None, batch_bytes: int = BLOCK_BYTES, prefetch_depth: int = 1):
    """Encode input files (harness.corpora formats) block by block, as SPEC §5 lays
    documents out: yields (tokens uint16, documents, source bytes) per block of about
    `batch_bytes` source bytes. Plain documents become <|bos|> + text
    (`Tokenizer.encode_many(bos=True)`); with `chat`, the files hold conversations
    (`messages`), each rendered by `Tokenizer.render_chat` (MASKBIT on what the model
    should learn). The next block (up to `prefetch_depth` blocks) is read on a thread
    while this one is encoded. InputError for bad input, naming the file and line or
    row."""
    from .buffers import batch_bytes_of
    from .corpora import conversation_bytes, iter_batches, iter_conversation_batches, prefetch

    if chat:
        if tokenizer.vocab_size > CHAT_MAX_VOCAB:
            raise ValueError(f"chat encoding needs vocab_size <= {CHAT_MAX_VOCAB} (MASKBIT "
                             f"0x8000 marks the tokens to learn); the tokenizer has "
                             f"{tokenizer.vocab_size}")
        for convs in prefetch(iter_conversation_batches(inputs, batch_bytes), prefetch_depth):
            tokens = np.concatenate([tokenizer.render_chat(c) for c in convs])
            yield tokens, len(convs), sum(map(conversation_bytes, convs))
    else:
        # the encoder's tables are built while the first block is read
        def warm():
            tokenizer.encode_many([b""], threads, bos=True)

        for docs in prefetch(iter_batches(inputs, batch_bytes, separator=separator),
                             prefetch_depth, meanwhile=warm):
            tokens, _ = tokenizer.encode_many(docs, threads, bos=True)
            yield tokens, len(docs), batch_bytes_of(docs)


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


def encode_to_tok(tokenizer, inputs, output, *, chat: bool = False,
                  threads: int | None = None, separator=None, progress=None,
                  batch_bytes: int = BLOCK_BYTES, prefetch_depth: int = 1) -> EncodeSummary:
    """Encode the input files (see encode_blocks) into the `.tok` file `output`,
    atomically (TokWriter: nothing is left at `output` when anything fails). progress,
    when given, is called with the source bytes done after each block. batch_bytes:
    source bytes per block (memory in flight is about 8 blocks, plus prefetch_depth - 1
    read ahead; each block's tokens are written on a writer thread while the next block
    is encoded)."""
    from concurrent.futures import ThreadPoolExecutor

    first_special = tokenizer.vocab_size - N_SPECIAL
    specials = done = 0
    # blocks are written on a thread, one behind the encoding (the file write
    # releases the GIL): the pool's exit waits for the last write, then the
    # TokWriter's exit completes the file, or removes it after an error
    with TokWriter(output, tokenizer.merges_hash, chat=chat) as w, \
            ThreadPoolExecutor(1, thread_name_prefix="asmbpe-writer") as pool:
        pending = None
        for tokens, docs, nbytes in encode_blocks(tokenizer, inputs, chat=chat,
                                                  threads=threads, separator=separator,
                                                  batch_bytes=batch_bytes,
                                                  prefetch_depth=prefetch_depth):
            if chat:                            # roles, <|end|>, <|bos|>
                plain = tokens & np.uint16(~MASKBIT & 0xFFFF)
                specials += int(np.count_nonzero(plain >= first_special))
            else:                               # one <|bos|> per document: the
                specials += docs                # text never becomes a special
            if pending is not None:
                pending.result()                # the previous block is written
            pending = pool.submit(w.write, tokens, docs, nbytes)
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
