#!/usr/bin/env python3
"""Sums a `perf report --no-children --sort symbol --stdio` by what each function does, for
scripts/bench/decode_profile.sh, and prints the shares with the run's rate (its --stats-json).

    decode_profile_table.py REPORT STATS_JSON [--title TEXT]

A function goes to the first category whose pattern its name matches (the order matters:
flash attention calls MKL's gemv, so attention's own kernels are named before matrix
products); what matches none is "other", and its largest functions are listed.
"""
import argparse
import json
import re

CATEGORIES = [
    ("attention kernels (SDPA; ours: few-query attention)",
     r"flash_attention|scaled_dot_product|few_query|(avx2|avx512|portable)_(weights|context)|head_(weights|context)"),
    ("matrix-vector products (MKL gemv: attention of one query)", r"sgemv|xsgemv"),
    ("matrix products (MKL/oneDNN gemm)", r"sgemm|gemm|dnnl|brgemm|mkl_blas|jit_.*(matmul|inner_product|ip_|brgemm|gemm)"),
    ("top-k (beam candidates)", r"topk|__adjust_heap|partial_sort|nth_element|__introselect"),
    ("log-softmax and exp", r"log_softmax|softmax|Sleef_.*exp|expf|__ieee754_exp|(avx2|avx512|portable)_row"),
    ("copies (cat, index_select, contiguous)", r"memmove|memcpy|direct_copy|index_select|cat_serial|copy_kernel"),
    ("layer norm", r"LayerNorm|RowwiseMoments|layer_norm"),
    ("element-wise ops (add, masks, activations)", r"VectorizedLoop2d|binary_op|fill|where|relu|gelu|masked|unary"),
    ("memory allocation and page faults", r"malloc|_int_free|cfree|free@|unlink_chunk|page_fault|clear_page|do_anonymous_page|memcg|pte|folio|alloc_pages"),
    ("dispatcher and tensor bookkeeping", r"c10::|Dispatcher|OperatorEntry|TensorImpl|intrusive_ptr|_Sp_counted|TensorIterator|at::_ops::"),
    ("startup and loading", r"_dl_|do_lookup|jit::|XXH|Hashtable|safetensors|sentencepiece|Argument::clone|FunctionSchema"),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("report")
    p.add_argument("stats")
    p.add_argument("--title", default="")
    a = p.parse_args()

    shares = {name: 0.0 for name, _ in CATEGORIES}
    other = {}
    line_re = re.compile(r"^\s*([0-9.]+)%\s+\[[.k]\]\s+(.*?)\s*$")
    with open(a.report, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = line_re.match(line)
            if not m:
                continue
            share, symbol = float(m.group(1)), m.group(2)
            for name, pattern in CATEGORIES:
                if re.search(pattern, symbol):
                    shares[name] += share
                    break
            else:
                other[symbol] = other.get(symbol, 0.0) + share
    stats = json.load(open(a.stats))
    print(f"\n{a.title}: {stats['sentences_per_s']:.1f} lines/s, "
          f"{stats['output_tokens_per_s']:.0f} target tokens/s")
    for name, share in sorted(shares.items(), key=lambda kv: -kv[1]):
        print(f"  {share:6.1f}%  {name}")
    print(f"  {sum(other.values()):6.1f}%  other, of which:")
    for symbol, share in sorted(other.items(), key=lambda kv: -kv[1])[:5]:
        print(f"  {share:10.1f}%  {symbol[:100]}")


if __name__ == "__main__":
    main()
