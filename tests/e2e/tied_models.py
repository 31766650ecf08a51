"""Tied weights (one tensor under two names) for tests/e2e/test_tied_weights.sh, and the plain
single-process PyTorch run that hpctrain must reproduce.

  tied_models.py data DIR VOCAB T            token data with exactly 16 training windows of T
  tied_models.py script OUT.pt VOCAB T       a nanoGPT-style GPT, head tied to wte, TorchScript
  tied_models.py reference KIND SRC DIR STEPS OUT.h5
      KIND gpt: SRC is the TorchScript file (its weights are the start); KIND cpp: the Python twin
      of tests/plugins/tied_models.cpp's `tied_lm` (SRC "-", the same closed-form start).
      Trains STEPS full-batch AdamW steps (lr 3e-3, weight decay 0.1 on every parameter, clip 1.0)
      on all 16 windows, as hpctrain does at any world size with a global batch of 16, and writes
      every state_dict name (both tied names) to OUT.h5 under model/, like `ckpt merge`.
  tied_models.py load KIND FILE N_PARAMS     FILE (.pt or .safetensors from `ckpt merge`) loads with
      load_state_dict(strict=True) into the Python module, the head stays tied, and the module
      has N_PARAMS parameters (PyTorch counts a shared tensor once).
"""
import sys

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d, bias=False)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.mlp_proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).chunk(3, dim=2)
        q = q.view(b, t, self.heads, -1).transpose(1, 2)
        k = k.view(b, t, self.heads, -1).transpose(1, 2)
        v = v.view(b, t, self.heads, -1).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class TiedGPT(nn.Module):
    """nanoGPT's layout: the output head IS the token embedding (self.lm_head.weight = wte.weight)."""

    def __init__(self, vocab: int, block: int, d: int = 32, heads: int = 2):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(vocab, d), wpe=nn.Embedding(block, d),
                                              h=nn.ModuleList([Block(d, heads)]), ln_f=nn.LayerNorm(d)))
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # exactly as nanoGPT ties them

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t, device=idx.device))
        for blk in self.transformer.h:
            x = blk(x)
        return self.lm_head(self.transformer.ln_f(x))


class CppTwin(nn.Module):
    """tests/plugins/tied_models.cpp `tied_lm` in Python: wte [V,d], fc d->d, head.weight = wte.weight;
    logits = (tanh(fc(wte(idx))) + wte(idx)) @ wte.weight^T; closed-form start (no RNG)."""

    def __init__(self, vocab: int, d: int = 16):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.fc = nn.Linear(d, d)
        self.head = nn.Module()
        self.head.weight = self.wte.weight  # registered under a second name, as the C++ module does
        with torch.no_grad():
            i = lambda n: torch.arange(n, dtype=torch.float64)
            self.wte.weight.copy_((0.5 * torch.sin(i(vocab * d) * 0.37)).view(vocab, d).float())
            self.fc.weight.copy_((0.3 * torch.cos(i(d * d) * 0.11)).view(d, d).float())
            self.fc.bias.copy_((0.01 * i(d)).float())

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.wte(idx)
        return F.linear(torch.tanh(self.fc(x)) + x, self.head.weight)


def windows(path: str, t: int):
    with h5py.File(path, "r") as f:
        tok = torch.from_numpy(f["tokens"][()].astype(np.int64))
    n = (tok.numel() - 1) // t
    w = torch.stack([tok[k * t:k * t + t + 1] for k in range(n)])
    return w[:, :t], w[:, 1:]


def main():
    cmd = sys.argv[1]
    if cmd == "data":
        out, vocab, t = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        rng = np.random.default_rng(7)
        for split, n in (("train", 16), ("test", 4)):
            with h5py.File(f"{out}/{split}.h5", "w") as f:
                f.create_dataset("tokens", data=rng.integers(0, vocab, n * t + 1).astype(np.int32))
                f.attrs["vocab_size"] = np.int64(vocab)
    elif cmd == "script":
        torch.manual_seed(0)
        net = TiedGPT(int(sys.argv[3]), int(sys.argv[4]))
        assert net.lm_head.weight is net.transformer.wte.weight
        torch.jit.script(net).save(sys.argv[2])
    elif cmd == "reference":
        kind, src, data, steps, out = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
        with h5py.File(f"{data}/train.h5", "r") as f:
            vocab = int(f.attrs["vocab_size"])
        if kind == "gpt":
            scripted = torch.jit.load(src)
            t = scripted.transformer.wpe.weight.shape[0]
            net = TiedGPT(vocab, t)
            net.load_state_dict(scripted.state_dict(), strict=True)
        else:
            net, t = CppTwin(vocab), int(src)
        x, y = windows(f"{data}/train.h5", t)
        assert x.shape[0] == 16, x.shape
        params = list(net.parameters())  # PyTorch lists the shared tensor once
        opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.1, foreach=False)
        for _ in range(steps):
            opt.zero_grad()
            logits = net(x)
            F.cross_entropy(logits.flatten(0, 1), y.flatten()).backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=False)
            opt.step()
        with h5py.File(out, "w") as f:
            for name, v in net.state_dict(keep_vars=False).items():
                f.create_dataset(f"model/{name}", data=v.detach().numpy())
        print(f"ok: plain PyTorch, {kind}, {steps} full-batch steps, {sum(p.numel() for p in params)} parameters")
    elif cmd == "load":
        kind, path, n_params = sys.argv[2], sys.argv[3], int(sys.argv[4])
        if path.endswith(".safetensors"):
            from safetensors.torch import load_file
            sd = load_file(path)
        else:
            sd = torch.load(path, map_location="cpu", weights_only=True)
        if kind == "gpt":
            net = TiedGPT(sd["transformer.wte.weight"].shape[0], sd["transformer.wpe.weight"].shape[0])
            head, wte = lambda: net.lm_head.weight, lambda: net.transformer.wte.weight
        else:
            net = CppTwin(sd["wte.weight"].shape[0])
            head, wte = lambda: net.head.weight, lambda: net.wte.weight
        want = set(net.state_dict().keys())
        assert set(sd) == want, f"names: only in the file {sorted(set(sd) - want)}, only in PyTorch {sorted(want - set(sd))}"
        net.load_state_dict(sd, strict=True)
        assert head() is wte(), "the head is no longer tied after loading"
        n = sum(p.numel() for p in net.parameters())
        assert n == n_params, f"PyTorch counts {n} parameters, hpctrain reported {n_params}"
        print(f"ok: {path}: load_state_dict(strict=True) with every name ({len(sd)}), tied head, {n} parameters")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
