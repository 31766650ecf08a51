// Host tensors whose memory goes back to the system when they are freed.
#pragma once

#include <ATen/core/Tensor.h>

namespace hpctrain {

// An uninitialized CPU tensor. From 1 MiB up its memory is a private anonymous mapping of its
// own (a from_blob tensor: not resizable), unmapped as soon as the tensor is freed; smaller ones
// come from LibTorch's allocator. Why: for a loop that makes large tensors one at a time and
// drops each (ckpt verify, ckpt merge), glibc serves blocks up to the largest freed one from its
// heap and keeps their pages, and 64-byte-aligned blocks of one size rarely fit the holes left
// by the previous ones: reading a 200 MiB checkpoint that way kept +150 MiB resident.
at::Tensor empty_unpooled(at::IntArrayRef shape, at::ScalarType dtype);

}  // namespace hpctrain
