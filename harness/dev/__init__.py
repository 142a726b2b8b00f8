"""Development tools, apart from the product: the naive Python twin (`twin`) and the
oracle regex (`oracle`) the tests hold the library to, checkasm (`checkasm`,
`checkasm_bench`), the benchmarks (`bench`, `bench_train`, `bench_encode`,
`bench_cluster`) and the profiler (`profile`). The `asmbpe check`, `bench` and `profile`
commands import them when they run; nothing in the product imports them."""
