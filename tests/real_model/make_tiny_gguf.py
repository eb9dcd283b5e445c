"""Write a tiny llama-architecture GGUF model with random weights: run with the llama venv's Python.

usage: python make_tiny_gguf.py OUT.gguf

One block, 32-wide, a byte-level SentencePiece vocabulary of 259 tokens: about 100 KB, loaded in
milliseconds. Its words are noise; a grammar (a named tool_choice) still makes it emit a well-formed
tool call, which is what the adapter check needs. Nothing is downloaded.
"""

from __future__ import annotations

import sys

# Both live only in the llama venv this script runs under, not in the Console's venv that mypy checks with.
import numpy as np  # type: ignore[import-not-found]
from gguf import GGUFWriter  # type: ignore[import-not-found]

N_EMBD, N_FF, N_HEAD = 32, 64, 2


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """<unk>, <s>, </s>, then one token per byte: SentencePiece's byte fallback spells any text."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    scores = [0.0] * len(tokens)
    # gguf token types: 2 unknown, 3 control, 6 byte.
    types = [2, 3, 3] + [6] * 256
    return tokens, scores, types


def main(path: str, context_length: int) -> None:
    rng = np.random.default_rng(18)
    tokens, scores, types = vocabulary()
    n_vocab = len(tokens)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    writer = GGUFWriter(path, "llama")
    writer.add_name("console-ha tiny random")
    writer.add_context_length(context_length)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(1)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(0)  # all F32
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    # numpy shapes are ggml's reversed: token_embd is (n_vocab, n_embd) here, {n_embd, n_vocab} in ggml.
    writer.add_tensor("token_embd.weight", weights(n_vocab, N_EMBD))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("output.weight", weights(n_vocab, N_EMBD))
    writer.add_tensor("blk.0.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        writer.add_tensor(f"blk.0.{name}.weight", weights(N_EMBD, N_EMBD))
    writer.add_tensor("blk.0.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    writer.add_tensor("blk.0.ffn_gate.weight", weights(N_FF, N_EMBD))
    writer.add_tensor("blk.0.ffn_up.weight", weights(N_FF, N_EMBD))
    writer.add_tensor("blk.0.ffn_down.weight", weights(N_EMBD, N_FF))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
