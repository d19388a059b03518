#!/usr/bin/env python3
"""Convert a checkpoint written by the authors' code (booydar/transformer-xl, `torch.save(model)`
or a `state_dict`) into an rmt checkpoint (safetensors with the model config in __metadata__).

    python3 apps/convert_authors_checkpoint.py model.pt out.safetensors --kind rmt [--mem-len N]

A whole pickled model needs the authors' `pytorch/` folder on PYTHONPATH to unpickle. The sizes
are read off the tensors; what the tensors cannot tell (the model kind, mem_len,
read_mem_from_cache) comes from the options. Needs torch and numpy.
"""
import argparse
import json
import struct
import sys

import numpy as np
import torch


def state_dict_of(obj):
    if isinstance(obj, dict):
        return obj.get("state_dict", obj) if "state_dict" in obj else obj
    if hasattr(obj, "state_dict"):
        return obj.state_dict()
    sys.exit(f"error: {type(obj).__name__} is neither a model nor a state_dict")


def config_from_tensors(sd, args):
    def shape(name):
        if name not in sd:
            sys.exit(f"error: the checkpoint has no tensor '{name}'; is it a MemTransformerLM?")
        return list(sd[name].shape)

    V, d_model = shape("word_emb.emb_layers.0.weight")
    n_head, d_head = shape("r_w_bias")
    d_inner = shape("layers.0.pos_ff.CoreNet.0.weight")[0]
    n_layer = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("layers."))
    m = shape("mem_tokens")[0] if "mem_tokens" in sd else 0
    if args.kind in ("rmt", "mt", "xl_rmt") and m == 0:
        sys.exit(f"error: --kind {args.kind} needs memory tokens, but the checkpoint has no mem_tokens")
    if args.kind in ("baseline", "xl") and m > 0:
        sys.exit(f"error: the checkpoint has {m} memory tokens; use --kind rmt, mt or xl_rmt")
    if args.kind in ("xl", "xl_rmt") and args.mem_len <= 0:
        sys.exit(f"error: --kind {args.kind} needs --mem-len > 0")
    return {"format": "rmt-checkpoint-1", "kind": args.kind, "n_token": V, "n_layer": n_layer,
            "n_head": n_head, "d_head": d_head, "d_model": d_model, "d_inner": d_inner,
            "mem_len": args.mem_len if args.kind in ("xl", "xl_rmt") else 0, "num_mem_tokens": m,
            "read_mem_from_cache": "true" if args.read_mem_from_cache else "false",
            "dropout": args.dropout, "dropatt": 0.0}


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {"__metadata__": {k: str(v) for k, v in metadata.items()}}, [], 0
    for name, t in tensors.items():
        data = np.ascontiguousarray(t.detach().cpu().to(torch.float32).numpy()).astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    import os
    os.replace(tmp, path)  # atomic: never a half-written checkpoint


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", help="the authors' checkpoint (.pt)")
    p.add_argument("output", help="rmt checkpoint to write (.safetensors)")
    p.add_argument("--kind", required=True, choices=["baseline", "xl", "rmt", "mt", "xl_rmt"])
    p.add_argument("--mem-len", type=int, default=0, help="Transformer-XL cache length (xl, xl_rmt)")
    p.add_argument("--no-read-mem-from-cache", dest="read_mem_from_cache", action="store_false")
    p.add_argument("--dropout", type=float, default=0.1)
    args = p.parse_args()
    obj = torch.load(args.input, map_location="cpu")
    sd = state_dict_of(obj)
    config = config_from_tensors(sd, args)
    tensors = {k: v for k, v in sd.items() if torch.is_tensor(v)}
    write_safetensors(args.output, tensors, config)
    print(f"wrote {args.output}: {config['kind']}, {config['n_layer']} layers, d_model {config['d_model']}, "
          f"{config['num_mem_tokens']} memory tokens, {len(tensors)} tensors")


if __name__ == "__main__":
    main()
