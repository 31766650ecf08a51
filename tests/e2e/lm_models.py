"""A GPT-like language model written in Python and saved as TorchScript, for the e2e tests of
`hpctrain train --model lm.pt` on token data: token + position embeddings, one pre-LayerNorm
block with causal self-attention (F.scaled_dot_product_attention) and a GELU MLP, and an output
projection; forward(int64 [B,T]) -> logits [B,T,V]. With --extra-logit the same module (same
parameters) returns [B,T,V+1], a model that does not fit its checkpoint's vocabulary.
usage: lm_models.py OUT.pt VOCAB SEQ_LEN [--extra-logit]"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyLM(nn.Module):
    def __init__(self, vocab: int, block: int, d: int = 32, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)  # a key bias only adds rounding noise (test_lm.sh)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.logits(idx)

    def logits(self, idx: torch.Tensor) -> torch.Tensor:
        b, t = idx.shape
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=2)
        h = self.heads
        q = q.view(b, t, h, -1).transpose(1, 2)
        k = k.view(b, t, h, -1).transpose(1, 2)
        v = v.view(b, t, h, -1).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, -1))
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return self.head(self.lnf(x))


class ExtraLogit(TinyLM):
    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        z = self.logits(idx)
        return torch.cat([z, z[:, :, :1]], dim=2)


if __name__ == "__main__":
    torch.manual_seed(0)
    cls = ExtraLogit if "--extra-logit" in sys.argv[4:] else TinyLM
    torch.jit.script(cls(int(sys.argv[2]), int(sys.argv[3]))).save(sys.argv[1])
