"""Development tools, apart from the product: the naive Python twins (`twin` for the seed
pre-tokenizer, training and encoding; `pretok_twin` for the exact pre-tokenizers nanochat,
cl100k, o200k and gpt2, over the classes of `unicode_classes`) and the oracle regexes
(`oracle`) the tests hold the library to, checkasm (`checkasm`,
`checkasm_bench`), the benchmarks (`bench`, `bench_train`, `bench_encode`,
`bench_cluster`) and the profiler (`profile`). The `asmbpe check`, `bench` and `profile`
commands import them when they run; nothing in the product imports them."""
