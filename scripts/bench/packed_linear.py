#!/usr/bin/env python3
"""A linear layer of a decoding step on the CPU in float32: MKL's sgemm (at::linear) against
oneDNN's product with the weight prepacked once (the mkldnn ops model/packed_linear.h calls),
packed for any batch and for the batch measured. Prints microseconds per call for the layer
shapes of the demo's model (d_model 192, ffn 768, 8,000 pieces) and of transformer-base
(512, 2,048), at a few row counts: where packing pays is what sets kMinPackedElements (Intel
processors) and kMinPackedElementsOffIntel (others) in model/packed_linear.h.

    scripts/bench/packed_linear.py [--threads 1] [--calls 300] [--rows 4,12,96,400]

Run it with the venv's python (torch installed): ~/.cache/nmt-train/torch-*/venv/bin/python.
"""
import argparse

import torch
import torch.nn.functional as F

# The same timer as the attention benchmark beside this script (its folder is on sys.path when
# run as a script).
from attention_step import per_call_us

SHAPES = [(192, 192), (192, 576), (192, 768), (768, 192), (192, 8000),
          (512, 512), (512, 1536), (512, 2048), (2048, 512), (512, 8000)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rows", default="4,12,96,400")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    linear = torch.ops.mkldnn._linear_pointwise
    reorder = torch.ops.mkldnn._reorder_linear_weight
    print(f"{'in -> out':>12} {'rows':>5} {'MKL us':>9} {'packed us':>10} {'packed(rows) us':>16}"
          f" {'MKL / packed':>13}")
    with torch.inference_mode():
        for d_in, d_out in SHAPES:
            weight, bias = torch.randn(d_out, d_in), torch.randn(d_out)
            packed_any = reorder(weight, None)
            for rows in (int(r) for r in args.rows.split(",")):
                x = torch.randn(rows, d_in)
                packed_rows = reorder(weight, rows)
                mkl = per_call_us(lambda: F.linear(x, weight, bias), args.calls)
                any_ = per_call_us(lambda: linear(x, packed_any, bias, "none", [], ""), args.calls)
                own = per_call_us(lambda: linear(x, packed_rows, bias, "none", [], ""), args.calls)
                print(f"{d_in:>5} -> {d_out:<4} {rows:>5} {mkl:>9.1f} {any_:>10.1f} {own:>16.1f}"
                      f" {mkl / any_:>12.2f}x")


if __name__ == "__main__":
    main()
