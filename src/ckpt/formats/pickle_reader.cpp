// A stack-machine unpickler for the opcodes torch.save's state dicts use. REDUCE is allowed for
// OrderedDict, _rebuild_tensor_v2 and _rebuild_parameter only; each storage record is read once
// and a tensor's size/stride/offset is checked against its storage before it is viewed.
#include "ckpt/formats/pickle_reader.h"

#include <ATen/ATen.h>

#include <cstring>
#include <map>
#include <memory>

#include "runtime/check.h"
#include "runtime/tensor_text.h"

namespace hpctrain::ckpt {
namespace {

struct Val;
using VP = std::shared_ptr<Val>;

struct Val {
  enum Kind { kNone, kBool, kInt, kFloat, kStr, kTuple, kList, kDict, kGlobal, kTensor } kind = kNone;
  int64_t i = 0;
  double f = 0;
  std::string s, name;                     // kStr: s; kGlobal: s = module, name
  std::vector<VP> items;                   // kTuple, kList
  std::vector<std::pair<VP, VP>> entries;  // kDict
  at::Tensor t;
};

VP make(Val::Kind k) {
  auto v = std::make_shared<Val>();
  v->kind = k;
  return v;
}

const std::pair<const char*, at::ScalarType> kStorages[] = {
    {"FloatStorage", at::kFloat},       {"DoubleStorage", at::kDouble}, {"HalfStorage", at::kHalf},
    {"BFloat16Storage", at::kBFloat16}, {"IntStorage", at::kInt},       {"LongStorage", at::kLong},
    {"ByteStorage", at::kByte},         {"BoolStorage", at::kBool}};

class Unpickler {
 public:
  // `storage` null: a plain pickle (no globals, no persistent ids).
  Unpickler(const std::string& pkl, const StorageReader* storage, const std::string& source)
      : p_(pkl), storage_(storage), src_(source) {}

  VP run() {
    for (;;) {
      unsigned char op = byte();
      switch (op) {
        case 0x80: byte(); break;    // PROTO
        case 0x95: bytes(8); break;  // FRAME
        case 'c': {                  // GLOBAL
          if (!storage_) fail("a global (a plain pickle holds only dicts, lists, strings and numbers)");
          VP g = make(Val::kGlobal);
          g->s = line();
          g->name = line();
          push(g);
          break;
        }
        case 'q': memo_[byte()] = top(); break;         // BINPUT
        case 'r': memo_[uint_le(4)] = top(); break;     // LONG_BINPUT
        case 0x94: memo_[memo_.size()] = top(); break;  // MEMOIZE
        case 'h': push(memo(byte())); break;            // BINGET
        case 'j': push(memo(uint_le(4))); break;        // LONG_BINGET
        case '(': marks_.push_back(stack_.size()); break;
        case ')': push(make(Val::kTuple)); break;
        case 't': push(tuple(pop_mark())); break;
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          size_t n = op - 0x84;
          need(n);
          std::vector<VP> v(stack_.end() - n, stack_.end());
          stack_.resize(stack_.size() - n);
          push(tuple(std::move(v)));
          break;
        }
        case '}': push(make(Val::kDict)); break;
        case ']': push(make(Val::kList)); break;
        case 'a': {  // APPEND
          VP v = pop();
          list_top()->items.push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<VP> v = pop_mark();
          for (auto& x : v) list_top()->items.push_back(x);
          break;
        }
        case 's': {  // SETITEM
          VP v = pop(), k = pop();
          dict_top()->entries.emplace_back(k, v);
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<VP> kv = pop_mark();
          if (kv.size() % 2) fail("SETITEMS with an odd number of items");
          for (size_t i = 0; i < kv.size(); i += 2) dict_top()->entries.emplace_back(kv[i], kv[i + 1]);
          break;
        }
        case 'X': push(str(bytes(uint_le(4)))); break;  // BINUNICODE
        case 0x8c: push(str(bytes(byte()))); break;     // SHORT_BINUNICODE
        case 'U': push(str(bytes(byte()))); break;      // SHORT_BINSTRING
        case 'K': push(integer(byte())); break;
        case 'M': push(integer(uint_le(2))); break;
        case 'J': push(integer(static_cast<int32_t>(uint_le(4)))); break;
        case 0x8a: {  // LONG1
          size_t n = byte();
          if (n > 8) fail("integer wider than 64 bits");
          uint64_t v = n ? uint_le(n) : 0;
          if (n && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
          push(integer(static_cast<int64_t>(v)));
          break;
        }
        case 'G': {  // BINFLOAT (big-endian)
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | byte();
          VP v = make(Val::kFloat);
          std::memcpy(&v->f, &bits, 8);
          push(v);
          break;
        }
        case 'N': push(make(Val::kNone)); break;
        case 0x88:
        case 0x89: {  // NEWTRUE, NEWFALSE
          VP v = make(Val::kBool);
          v->i = op == 0x88;
          push(v);
          break;
        }
        case 'Q':  // BINPERSID
          if (!storage_) fail("a persistent id (a plain pickle holds only dicts, lists, strings and numbers)");
          push(persistent(pop()));
          break;
        case 'R': {                                // REDUCE
          VP args = pop(), fn = pop();
          push(reduce(*fn, *args));
          break;
        }
        case 'b': pop(); break;  // BUILD: a dict's state (_metadata), ignored
        case '.': return pop();  // STOP
        case 0x93:  // STACK_GLOBAL (protocol 4+): no global is ever needed by the subsets read here
          fail(storage_ ? "unsupported pickle opcode 0x93"
                        : "a global (a plain pickle holds only dicts, lists, strings and numbers)");
        default: fail("unsupported pickle opcode 0x" + hex(op));
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(src_ + (storage_ ? ": not a state dict pickle: " : ": not a plain pickle: ") + what + " (at byte " +
                std::to_string(pos_) + (storage_ ? " of data.pkl)" : ")"));
  }
  static std::string hex(unsigned v) {
    const char* d = "0123456789abcdef";
    return std::string{d[(v >> 4) & 15], d[v & 15]};
  }
  unsigned char byte() {
    if (pos_ >= p_.size()) fail("truncated");
    return static_cast<unsigned char>(p_[pos_++]);
  }
  std::string bytes(size_t n) {
    if (n > p_.size() - pos_) fail("truncated");
    std::string s = p_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint64_t uint_le(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(byte()) << (8 * k);
    return v;
  }
  std::string line() {
    size_t e = p_.find('\n', pos_);
    if (e == std::string::npos) fail("truncated");
    std::string s = p_.substr(pos_, e - pos_);
    pos_ = e + 1;
    return s;
  }
  void push(VP v) { stack_.push_back(std::move(v)); }
  void need(size_t n) const {
    if (stack_.size() < n + (marks_.empty() ? 0 : marks_.back())) fail("stack underflow");
  }
  VP pop() {
    need(1);
    VP v = stack_.back();
    stack_.pop_back();
    return v;
  }
  VP top() {
    need(1);
    return stack_.back();
  }
  VP memo(uint64_t k) {
    auto it = memo_.find(k);
    if (it == memo_.end()) fail("memo key " + std::to_string(k) + " unset");
    return it->second;
  }
  std::vector<VP> pop_mark() {
    if (marks_.empty()) fail("no MARK");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<VP> v(stack_.begin() + m, stack_.end());
    stack_.resize(m);
    return v;
  }
  VP list_top() {
    VP l = top();
    if (l->kind != Val::kList) fail("APPEND to a non-list");
    return l;
  }
  VP dict_top() {
    VP d = top();
    if (d->kind != Val::kDict) fail("SETITEM on a non-dict");
    return d;
  }
  static VP tuple(std::vector<VP> v) {
    VP t = make(Val::kTuple);
    t->items = std::move(v);
    return t;
  }
  static VP str(std::string s) {
    VP v = make(Val::kStr);
    v->s = std::move(s);
    return v;
  }
  static VP integer(int64_t i) {
    VP v = make(Val::kInt);
    v->i = i;
    return v;
  }
  int64_t as_int(const VP& v, const char* what) const {
    if (v->kind != Val::kInt) fail(std::string(what) + " is not an integer");
    return v->i;
  }
  std::vector<int64_t> int_tuple(const VP& v, const char* what) const {
    if (v->kind != Val::kTuple) fail(std::string(what) + " is not a tuple");
    std::vector<int64_t> out;
    for (const auto& x : v->items) out.push_back(as_int(x, what));
    return out;
  }

  // ('storage', torch.<T>Storage, key, location, numel) -> a 1-D tensor of the record's bytes.
  VP persistent(const VP& pid) {
    if (pid->kind != Val::kTuple || pid->items.size() != 5 || pid->items[0]->s != "storage" ||
        pid->items[1]->kind != Val::kGlobal || pid->items[2]->kind != Val::kStr)
      fail("a persistent id that is not a tensor storage");
    const std::string& key = pid->items[2]->s;
    auto cached = storages_.find(key);
    if (cached != storages_.end()) return cached->second;
    const Val& type = *pid->items[1];
    at::ScalarType dt = at::kFloat;
    bool known = false;
    for (auto& [n, s] : kStorages)
      if (type.s == "torch" && type.name == n) dt = s, known = true;
    if (!known) fail("storage type " + printable(type.s + "." + type.name) + " is not supported");
    int64_t numel = as_int(pid->items[4], "storage size");
    if (numel < 0 || numel > (int64_t{1} << 40)) fail("storage size " + std::to_string(numel));
    VP v = make(Val::kTensor);
    v->t = at::empty({numel}, at::TensorOptions(dt));
    size_t got = (*storage_)(key, v->t.data_ptr(), v->t.nbytes());
    if (got < v->t.nbytes())
      fail("record data/" + printable(key) + " has " + std::to_string(got) + " bytes, its storage needs " +
           std::to_string(v->t.nbytes()));
    storages_[key] = v;
    return v;
  }

  VP reduce(const Val& fn, const Val& args) {
    if (fn.kind != Val::kGlobal || args.kind != Val::kTuple) fail("REDUCE of a non-global");
    std::string g = fn.s + "." + fn.name;
    if (g == "collections.OrderedDict" && args.items.empty()) return make(Val::kDict);
    if (g == "torch._utils._rebuild_parameter" && !args.items.empty() && args.items[0]->kind == Val::kTensor)
      return args.items[0];
    if (g != "torch._utils._rebuild_tensor_v2") fail("global " + printable(g) + " is not allowed");
    if (args.items.size() < 4 || args.items[0]->kind != Val::kTensor) fail("_rebuild_tensor_v2 arguments");
    const at::Tensor& st = args.items[0]->t;
    int64_t off = as_int(args.items[1], "storage offset");
    std::vector<int64_t> size = int_tuple(args.items[2], "size"), stride = int_tuple(args.items[3], "stride");
    if (size.size() != stride.size() || off < 0) fail("tensor size/stride/offset");
    int64_t last = off, numel = 1;
    for (size_t d = 0; d < size.size(); ++d) {
      if (size[d] < 0 || stride[d] < 0) fail("negative size or stride");
      numel *= size[d];
      if (size[d] > 0) last += (size[d] - 1) * stride[d];
    }
    if (numel > 0 && last >= st.numel()) fail("a tensor reaches beyond its storage");
    VP v = make(Val::kTensor);
    v->t = numel == 0 ? at::empty(size, st.options()) : st.as_strided(size, stride, off).contiguous();
    return v;
  }

  const std::string& p_;
  const StorageReader* storage_;
  const std::string& src_;
  size_t pos_ = 0;
  std::vector<VP> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, VP> memo_;
  std::map<std::string, VP> storages_;
};

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> unpickle_state_dict(const std::string& pkl,
                                                                    const StorageReader& storage,
                                                                    const std::string& source) {
  VP root = Unpickler(pkl, &storage, source).run();
  if (root->kind != Val::kDict) throw Error(source + " does not hold a dict of name -> tensor (a state dict)");
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [k, v] : root->entries) {
    if (k->kind != Val::kStr || v->kind != Val::kTensor)
      throw Error(source + ": state dict entries must be name -> tensor" +
                  (k->kind == Val::kStr ? " (entry " + printable(k->s) + " is not a tensor)" : ""));
    out.emplace_back(k->s, v->t);
  }
  return out;
}

std::vector<std::pair<std::string, int64_t>> unpickle_int_entries(const std::string& pkl, const std::string& source) {
  VP root = Unpickler(pkl, nullptr, source).run();
  if (root->kind != Val::kDict) throw Error(source + " does not hold a dict");
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [k, v] : root->entries)
    if (k->kind == Val::kStr && v->kind == Val::kInt) out.emplace_back(k->s, v->i);
  return out;
}

}  // namespace hpctrain::ckpt
