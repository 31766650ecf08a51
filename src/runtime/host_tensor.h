// Host tensors whose memory goes back to the system when they are freed.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

namespace hpctrain {

// An uninitialized CPU tensor. From 1 MiB up its memory is a private anonymous mapping of its
// own (a from_blob tensor: not resizable), unmapped as soon as the tensor is freed; smaller ones
// come from LibTorch's allocator. Why: for a loop that makes large tensors one at a time and
// drops each (ckpt verify, ckpt merge), glibc serves blocks up to the largest freed one from its
// heap and keeps their pages, and 64-byte-aligned blocks of one size rarely fit the holes left
// by the previous ones: reading a 200 MiB checkpoint that way kept +150 MiB resident.
at::Tensor empty_unpooled(at::IntArrayRef shape, at::ScalarType dtype);

// A CPU allocator whose every non-empty allocation is a private anonymous mapping of its own,
// unmapped when freed (allocate(0) gives a null pointer). For storages that are resized in place
// (at::native::resize_bytes_cpu allocates through the storage's allocator): ZeRO-3's unit buffers,
// which come and go twice per step, so freed ones go back to the system instead of staying in
// glibc's heap. Page-granular: only for buffers of many pages. Throws c10::Error when mmap fails.
c10::Allocator* unpooled_allocator();

}  // namespace hpctrain
