"""transformers' side of tests/e2e/test_hf_gpt2.sh (run with the venv's Python).

  hf_gpt2_check.py load DIR TEST_H5 SEQ_LEN PROMPT N   loads DIR with GPT2LMHeadModel and
      AutoModelForCausalLM (no missing/unexpected/mismatched key), prints JSON: test_loss (every
      SEQ_LEN window of TEST_H5, as `hpctrain eval`), greedy (PROMPT + N tokens by
      model.generate, as bytes in latin-1), config
  hf_gpt2_check.py make DIR VOCAB SEQ_LEN SEED BAD   a tiny GPT-2 (gelu, 2 layers, n_embd 32, 4
      heads) with every parameter random and non-zero (biases and LayerNorms too),
      save_pretrained(DIR); and its bad-input variants under BAD: llama/ (model_type), missing/
      (a tensor removed), gelu_new/ (GPT-2's tanh GELU); and legacy/, the same weights as older
      GPT-2 files hold them (pytorch_model.bin, no "transformer." prefix, mask buffers, lm_head)
  hf_gpt2_check.py same DIR FILE.safetensors...   each FILE's tensors equal DIR's bitwise (in our
      layout, Conv1D weights transposed; a FILE named model.safetensors is in GPT-2's), exit 1 otherwise
"""
import json
import os
import shutil
import sys
import types
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.environ.get("HPCTRAIN_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../..")),
                                "examples"))
from gpt_reference import test_loss  # noqa: E402

CONV1D = (".c_attn.weight", ".c_proj.weight", ".c_fc.weight")


class Logits(torch.nn.Module):
    """A transformers causal LM as gpt_reference's test_loss expects it: forward -> logits."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf
        self.config = types.SimpleNamespace(block_size=hf.config.n_positions)

    def forward(self, x):
        return self.hf(x).logits


def load(d, test_h5, seq_len, prompt, n):
    from transformers import AutoModelForCausalLM, GPT2LMHeadModel
    m, info = GPT2LMHeadModel.from_pretrained(d, output_loading_info=True)
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    assert not bad, f"GPT2LMHeadModel.from_pretrained: {bad}"
    auto, info = AutoModelForCausalLM.from_pretrained(d, output_loading_info=True)
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    assert not bad and type(auto).__name__ == "GPT2LMHeadModel", f"AutoModelForCausalLM: {type(auto).__name__} {bad}"
    assert m.lm_head.weight.data_ptr() == m.transformer.wte.weight.data_ptr(), "lm_head is not tied to wte"
    assert m.config.n_positions == seq_len, f"n_positions {m.config.n_positions} != --seq-len {seq_len}"
    loss = test_loss(Logits(m).eval(), test_h5, seq_len)  # eval mode: no dropout (GPT-2's default pdrop is 0.1)
    m.eval()
    ids = torch.tensor([list(prompt.encode())])
    with torch.no_grad():
        out = m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False)
    print(json.dumps({"test_loss": loss, "greedy": bytes(out[0].tolist()).decode("latin-1"),
                      "config": m.config.to_dict()}))


def make(d, vocab, seq_len, seed):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=vocab, n_positions=seq_len, n_embd=32, n_layer=2, n_head=4,
                     activation_function="gelu", bos_token_id=None, eos_token_id=None)
    m = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name.endswith("ln_f.weight"):
                p.copy_(1 + 0.2 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
            assert (p != 0).all(), name
    m.save_pretrained(d)


def same(d, ours):
    hf_layout = os.path.basename(ours) == "model.safetensors"
    from safetensors.torch import load_file
    hf = load_file(os.path.join(d, "model.safetensors"))
    mine = load_file(ours)
    assert set(hf) == set(mine), f"names differ: {sorted(set(hf) ^ set(mine))}"
    for k, v in hf.items():
        w = mine[k].t() if k.endswith(CONV1D) and not hf_layout else mine[k]
        assert torch.equal(v, w), f"{k} differs"
    print(f"{ours}: {len(hf)} tensors equal bitwise")


def bad(d, out):
    from safetensors.torch import load_file, save_file
    cfg = json.load(open(os.path.join(d, "config.json")))
    for name, change in (("llama", {"model_type": "llama"}), ("gelu_new", {"activation_function": "gelu_new"})):
        shutil.copytree(d, os.path.join(out, name))
        json.dump({**cfg, **change}, open(os.path.join(out, name, "config.json"), "w"))
    # As older GPT-2 files look (the hub's original gpt2): pytorch_model.bin, GPT2Model's names
    # without "transformer.", the attention-mask buffers, and lm_head.weight saved beside wte.
    legacy = os.path.join(out, "legacy")
    os.makedirs(legacy)
    shutil.copy(os.path.join(d, "config.json"), legacy)
    sd = {k.removeprefix("transformer."): v for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
    T = cfg["n_positions"]
    for i in range(cfg["n_layer"]):
        sd[f"h.{i}.attn.bias"] = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        sd[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    sd["lm_head.weight"] = sd["wte.weight"].clone()
    torch.save(sd, os.path.join(legacy, "pytorch_model.bin"))
    shutil.copytree(d, os.path.join(out, "missing"))
    sd = load_file(os.path.join(d, "model.safetensors"))
    del sd["transformer.h.1.mlp.c_fc.weight"]
    save_file(sd, os.path.join(out, "missing", "model.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "load":
        load(args[0], args[1], int(args[2]), args[3], int(args[4]))
    elif cmd == "make":
        make(args[0], int(args[1]), int(args[2]), int(args[3]))
        bad(args[0], args[4])
    elif cmd == "same":
        for f in args[1:]:
            same(args[0], f)
    else:
        sys.exit(f"unknown command {cmd}")
