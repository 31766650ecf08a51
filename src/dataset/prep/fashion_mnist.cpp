// Fashion-MNIST conversion: reads the four idx .gz files, checks shapes (60,000 / 10,000 images
// of 28x28) and labels, and writes train.h5 / test.h5 through write_train_test.
#include "dataset/prep/fashion_mnist.h"

#include "dataset/prep/h5_writer.h"
#include "dataset/prep/idx_reader.h"
#include "runtime/check.h"

namespace hpctrain {

const std::vector<std::string>& fashion_mnist_classes() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                 "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

namespace {

ImageSet load_split(const std::string& dir, const std::string& prefix, int64_t expected) {
  const std::string ipath = dir + "/" + prefix + "-images-idx3-ubyte.gz";
  const std::string lpath = dir + "/" + prefix + "-labels-idx1-ubyte.gz";
  IdxArray img = read_idx_gz(ipath, 3);
  IdxArray lab = read_idx_gz(lpath, 1);
  auto dims = [](const std::vector<int64_t>& d) {
    std::string s;
    for (auto x : d) s += (s.empty() ? "" : "x") + std::to_string(x);
    return s;
  };
  if (img.dims != std::vector<int64_t>{expected, 28, 28})
    throw Error(ipath + ": images are " + dims(img.dims) + ", expected " + std::to_string(expected) + "x28x28");
  if (lab.dims[0] != expected)
    throw Error(lpath + ": " + std::to_string(lab.dims[0]) + " labels, expected " + std::to_string(expected));
  ImageSet s;
  s.sample_shape = {1, 28, 28};
  s.images = std::move(img.data);
  s.labels.resize(expected);
  const int64_t classes = int64_t(fashion_mnist_classes().size());
  for (int64_t i = 0; i < expected; ++i) {
    if (lab.data[i] >= classes)
      throw Error(lpath + ": label " + std::to_string(lab.data[i]) + " at index " + std::to_string(i) +
                  " is outside [0," + std::to_string(classes) + ")");
    s.labels[i] = lab.data[i];
  }
  return s;
}

}  // namespace

void convert_fashion_mnist(const std::string& src_dir, const std::string& out_dir) {
  ImageSet train = load_split(src_dir, "train", 60000);
  ImageSet test = load_split(src_dir, "t10k", 10000);
  DatasetAttrs attrs;
  attrs.source = "Fashion-MNIST (Zalando Research) idx files from " + src_dir;
  attrs.class_names = fashion_mnist_classes();
  write_train_test(out_dir, train, test, attrs);
}

}  // namespace hpctrain
