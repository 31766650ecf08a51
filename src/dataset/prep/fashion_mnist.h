// Fashion-MNIST -> hpctrain HDF5 (`hpctrain data fashion-mnist`).
#pragma once

#include <string>
#include <vector>

namespace hpctrain {

// Where Debian's dataset-fashion-mnist package installs the idx .gz files.
inline const char* kFashionMnistDefaultSrc = "/usr/share/datasets/fashion-mnist";

// The ten class names, in label order.
const std::vector<std::string>& fashion_mnist_classes();

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from src_dir, validates them (magic
// numbers, 60,000/10,000 samples of 28x28, labels in [0,10), gzip integrity) and writes
// out_dir/train.h5 and out_dir/test.h5 atomically. Throws hpctrain::Error naming the bad file.
void convert_fashion_mnist(const std::string& src_dir, const std::string& out_dir);

}  // namespace hpctrain
